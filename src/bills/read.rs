//! Files as rows of cells: CSV, gzipped CSV and Parquet, read column by
//! name. Only the columns a mapping asks for are decoded (a Parquet file is
//! read with a projection), and a cell borrows from the file's buffers, so a
//! row costs no allocation.

use std::fs::File;
use std::io::{BufReader, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Decimal128Type, Float32Type, Float64Type, Int32Type, Int64Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType,
};
use arrow_array::{Array, ArrayRef, DictionaryArray, RecordBatch};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
    RowSelector,
};

use super::BillError;
use super::files::Contents;

/// One cell of a row. `Null` is an empty CSV field, the literal `null`, or
/// a Parquet null.
#[derive(Debug, Clone, Copy)]
pub enum Cell<'a> {
    Null,
    Text(&'a str),
    Num(f64),
    /// Unix seconds, UTC.
    Time(i64),
    /// A key-value map (Parquet `map<string,string>`, or BigQuery's list of
    /// key/value structs).
    Pairs(Pairs<'a>),
}

/// Key-value entries of one row.
#[derive(Debug, Clone, Copy)]
pub struct Pairs<'a> {
    keys: StrCol<'a>,
    values: StrCol<'a>,
    start: usize,
    end: usize,
}

impl<'a> Pairs<'a> {
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + '_ {
        (self.start..self.end).filter_map(|i| Some((self.keys.get(i)?, self.values.get(i))))
    }
}

/// A key-value column of a batch whose keys and values are dictionaries:
/// each row's entries as ids into the two, read without building a cell.
/// Within one epoch (see [`Batch::epoch`]) equal ids are equal texts.
pub struct MapIds<'a> {
    /// The map (or list) column itself, for its nulls.
    cells: &'a dyn Array,
    offsets: &'a [i32],
    keys: &'a DictionaryArray<Int32Type>,
    values: &'a DictionaryArray<Int32Type>,
    key_text: &'a arrow_array::StringArray,
    value_text: &'a arrow_array::StringArray,
}

impl<'a> MapIds<'a> {
    /// How many values the values' dictionary holds: the bound of their ids.
    pub fn value_count(&self) -> Option<u32> {
        u32::try_from(self.value_text.len()).ok()
    }

    /// Row `r`'s entries as the ids of their key and value (`None` for a
    /// null value), leaving out an entry without a key; `None` for a null
    /// cell.
    pub fn row(&self, r: usize) -> Option<impl Iterator<Item = (u32, Option<u32>)> + Clone + 'a> {
        if self.cells.is_null(r) {
            return None;
        }
        let at = |j: usize| {
            self.offsets
                .get(j)
                .and_then(|o| usize::try_from(*o).ok())
                .unwrap_or(0)
        };
        let (start, end) = (at(r), at(r + 1));
        let (keys, values) = (self.keys.keys(), self.values.keys());
        let (key_ids, value_ids) = (keys.values(), values.values());
        Some(
            (start..end.min(key_ids.len()).min(value_ids.len())).filter_map(move |j| {
                let key = u32::try_from(key_ids[j])
                    .ok()
                    .filter(|_| keys.is_valid(j))?;
                let value = u32::try_from(value_ids[j])
                    .ok()
                    .filter(|_| values.is_valid(j));
                Some((key, value))
            }),
        )
    }

    /// The text of key `id`.
    pub fn key_text(&self, id: u32) -> Option<&'a str> {
        entry(self.key_text, id)
    }

    /// The text of value `id`.
    pub fn value_text(&self, id: u32) -> Option<&'a str> {
        entry(self.value_text, id)
    }
}

/// Entry `id` of a dictionary's values.
fn entry(values: &arrow_array::StringArray, id: u32) -> Option<&str> {
    let id = usize::try_from(id).ok()?;
    (id < values.len() && values.is_valid(id)).then(|| values.value(id))
}

/// A row as a mapping sees it: cells by the position of the wanted column.
pub trait RowCells {
    /// The cell of wanted column `i`; `Null` when the file lacks the column.
    fn cell(&self, i: usize) -> Cell<'_>;
    /// 1-based, counting the header as line 1.
    fn line(&self) -> u64;
    /// The batch this row belongs to and its index there, when the file is
    /// decoded in batches (Parquet): a mapping may read the batch a column
    /// at a time when its first row comes.
    fn batch(&self) -> Option<(&Batch<'_>, usize)> {
        None
    }
}

/// What takes each row of a file.
pub type RowFn<'f> = dyn FnMut(&dyn RowCells) -> Result<(), BillError> + Send + 'f;

/// An opened file: its header, then its rows.
pub struct Table {
    shown: String,
    header: Vec<String>,
    inner: Inner,
}

enum Inner {
    Csv(csv::Reader<Box<dyn Read>>),
    Parquet(Parquet),
}

/// A Parquet file, read by every worker at once, each its own share of the
/// rows: each thread opens the bytes on its own, so decoding runs on every
/// core beside the mapping.
struct Parquet {
    bytes: ParquetBytes,
    meta: ArrowReaderMetadata,
}

enum ParquetBytes {
    /// A file on disk (kept here so a spooled copy lives as long as the
    /// table), opened again by each thread for a file offset of its own.
    File(Contents),
    Memory(bytes::Bytes),
}

/// Rows decoded per Parquet batch: large enough to amortize decoding, small
/// enough that a batch of 60 columns stays a few MB.
const BATCH_ROWS: usize = 8192;

impl Table {
    /// Opens a file by its name: `*.parquet`, `*.csv.gz`, or `*.csv`.
    /// `shown` is its path under the source's folder, which errors name.
    ///
    /// # Errors
    /// `File` when it cannot be opened or its header cannot be read.
    pub fn open(contents: Contents, shown: &str) -> Result<Self, BillError> {
        let fail = |why: String| BillError::file(shown, why);
        let name = shown
            .rsplit('/')
            .next()
            .unwrap_or(shown)
            .to_ascii_lowercase();
        let not_parquet =
            |e: parquet::errors::ParquetError| fail(format!("not a readable Parquet file: {e}"));
        if name.ends_with(".parquet") {
            let bytes = match contents {
                Contents::Memory(b) => ParquetBytes::Memory(b),
                local => ParquetBytes::File(local),
            };
            let meta = match &bytes {
                ParquetBytes::Memory(b) => parquet_metadata(b),
                ParquetBytes::File(c) => parquet_metadata(&open_file(c).map_err(&fail)?),
            }
            .map_err(not_parquet)?;
            let header = meta
                .schema()
                .fields()
                .iter()
                .map(|f| f.name().clone())
                .collect();
            return Ok(Self {
                shown: shown.to_owned(),
                header,
                inner: Inner::Parquet(Parquet { bytes, meta }),
            });
        }
        let reader: Box<dyn Read> = match contents {
            Contents::Memory(bytes) => Box::new(std::io::Cursor::new(bytes)),
            local => Box::new(BufReader::new(open_file(&local).map_err(&fail)?)),
        };
        let reader: Box<dyn Read> = if name.ends_with(".gz") {
            Box::new(flate2::read::MultiGzDecoder::new(BufReader::new(reader)))
        } else {
            reader
        };
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .from_reader(reader);
        let header = csv
            .headers()
            .map_err(|e| fail(format!("cannot read the header: {}", csv_why(&e))))?
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let h = if i == 0 {
                    h.trim_start_matches('\u{feff}')
                } else {
                    h
                };
                h.trim().to_owned()
            })
            .collect();
        Ok(Self {
            shown: shown.to_owned(),
            header,
            inner: Inner::Csv(csv),
        })
    }

    /// The column names, in file order.
    #[must_use]
    pub fn header(&self) -> &[String] {
        &self.header
    }

    /// Calls one of `workers` with every row. `wanted[i]` is the file
    /// position of the i-th wanted column (from [`Table::header`]), `None`
    /// when absent. A Parquet file's rows are cut into one contiguous share
    /// per worker (along row groups), each decoded and mapped on a thread of
    /// its own; a CSV file is read in order by the first.
    ///
    /// # Errors
    /// The error at the lowest line where any row failed, or a `File` error
    /// when the file is cut short or malformed.
    pub fn rows(
        self,
        wanted: &[Option<usize>],
        workers: &mut [&mut RowFn<'_>],
    ) -> Result<(), BillError> {
        let Some(first) = workers.first_mut() else {
            return Ok(());
        };
        match self.inner {
            Inner::Csv(reader) => csv_rows(&self.shown, reader, wanted, *first),
            Inner::Parquet(p) => parquet_rows(&self.shown, &self.header, &p, wanted, workers),
        }
    }
}

fn open_file(contents: &Contents) -> Result<File, String> {
    let path = contents.path().unwrap_or(std::path::Path::new(""));
    File::open(path).map_err(|e| format!("cannot open: {e}"))
}

fn csv_why(e: &csv::Error) -> String {
    match e.kind() {
        csv::ErrorKind::Io(io) => format!("read failed ({io}); a gzip file cut short?"),
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("{len} fields where the header has {expected_len}"),
        csv::ErrorKind::Utf8 { .. } => "not UTF-8 text".to_owned(),
        _ => e.to_string(),
    }
}

struct CsvRow<'a> {
    record: &'a csv::StringRecord,
    wanted: &'a [Option<usize>],
    line: u64,
}

impl RowCells for CsvRow<'_> {
    fn cell(&self, i: usize) -> Cell<'_> {
        match self
            .wanted
            .get(i)
            .copied()
            .flatten()
            .and_then(|at| self.record.get(at))
        {
            None | Some("") => Cell::Null,
            Some(t) => match t.trim() {
                "" => Cell::Null,
                t if t.eq_ignore_ascii_case("null") => Cell::Null,
                t => Cell::Text(t),
            },
        }
    }

    fn line(&self) -> u64 {
        self.line
    }
}

fn csv_rows(
    shown: &str,
    mut reader: csv::Reader<Box<dyn Read>>,
    wanted: &[Option<usize>],
    f: &mut RowFn<'_>,
) -> Result<(), BillError> {
    let mut record = csv::StringRecord::new();
    loop {
        match reader.read_record(&mut record) {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) => {
                let line = e.position().map_or(0, csv::Position::line);
                return Err(BillError::file(
                    shown,
                    format!("line {line}: {}", csv_why(&e)),
                ));
            }
        }
        let line = record.position().map_or(0, csv::Position::line);
        f(&CsvRow {
            record: &record,
            wanted,
            line,
        })?;
    }
}

/// A string column of any of Arrow's string layouts.
#[derive(Debug, Clone, Copy)]
enum StrCol<'a> {
    Utf8(&'a arrow_array::StringArray),
    Large(&'a arrow_array::LargeStringArray),
    View(&'a arrow_array::StringViewArray),
    Dict(&'a DictionaryArray<Int32Type>, &'a arrow_array::StringArray),
}

impl<'a> StrCol<'a> {
    fn of(array: &'a ArrayRef) -> Option<Self> {
        Some(match array.data_type() {
            DataType::Utf8 => Self::Utf8(array.as_string::<i32>()),
            DataType::LargeUtf8 => Self::Large(array.as_string::<i64>()),
            DataType::Utf8View => Self::View(array.as_string_view()),
            DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8 => {
                let d = array.as_dictionary::<Int32Type>();
                Self::Dict(d, d.values().as_string::<i32>())
            }
            _ => return None,
        })
    }

    fn get(&self, i: usize) -> Option<&'a str> {
        match self {
            Self::Utf8(a) => a.is_valid(i).then(|| a.value(i)),
            Self::Large(a) => a.is_valid(i).then(|| a.value(i)),
            Self::View(a) => a.is_valid(i).then(|| a.value(i)),
            Self::Dict(d, values) => d
                .is_valid(i)
                .then(|| usize::try_from(d.keys().value(i)).ok())
                .flatten()
                .map(|k| values.value(k)),
        }
    }
}

/// One decoded column of a batch.
enum Col<'a> {
    Missing,
    Str(StrCol<'a>),
    /// Dictionary text: each distinct value read once, a null-like one
    /// (empty, `null`) as `None`.
    Dict {
        array: &'a DictionaryArray<Int32Type>,
        keys: &'a [i32],
        values: Vec<Option<&'a str>>,
    },
    F64(&'a arrow_array::Float64Array),
    F32(&'a arrow_array::Float32Array),
    I64(&'a arrow_array::Int64Array),
    I32(&'a arrow_array::Int32Array),
    Decimal(&'a arrow_array::Decimal128Array, i32),
    /// Timestamps with their units per second.
    TsS(&'a arrow_array::TimestampSecondArray),
    TsMs(&'a arrow_array::TimestampMillisecondArray),
    TsUs(&'a arrow_array::TimestampMicrosecondArray),
    TsNs(&'a arrow_array::TimestampNanosecondArray),
    Date(&'a arrow_array::Date32Array),
    Map(&'a arrow_array::MapArray, StrCol<'a>, StrCol<'a>),
    List(&'a arrow_array::ListArray, StrCol<'a>, StrCol<'a>),
}

impl<'a> Col<'a> {
    fn of(array: &'a ArrayRef) -> Result<Self, String> {
        Ok(match array.data_type() {
            DataType::Null => Self::Missing,
            DataType::Float64 => Self::F64(array.as_primitive::<Float64Type>()),
            DataType::Float32 => Self::F32(array.as_primitive::<Float32Type>()),
            DataType::Int64 => Self::I64(array.as_primitive::<Int64Type>()),
            DataType::Int32 => Self::I32(array.as_primitive::<Int32Type>()),
            DataType::Decimal128(_, scale) => {
                Self::Decimal(array.as_primitive::<Decimal128Type>(), i32::from(*scale))
            }
            DataType::Timestamp(unit, _) => match unit {
                TimeUnit::Second => Self::TsS(array.as_primitive::<TimestampSecondType>()),
                TimeUnit::Millisecond => {
                    Self::TsMs(array.as_primitive::<TimestampMillisecondType>())
                }
                TimeUnit::Microsecond => {
                    Self::TsUs(array.as_primitive::<TimestampMicrosecondType>())
                }
                TimeUnit::Nanosecond => Self::TsNs(array.as_primitive::<TimestampNanosecondType>()),
            },
            DataType::Date32 => Self::Date(array.as_primitive::<Date32Type>()),
            DataType::Map(..) => {
                let m = array.as_map();
                match (StrCol::of(m.keys()), StrCol::of(m.values())) {
                    (Some(k), Some(v)) => Self::Map(m, k, v),
                    _ => return Err("a map whose keys or values are not strings".to_owned()),
                }
            }
            DataType::List(_) => {
                let l = array.as_list::<i32>();
                let entries = l.values().as_struct_opt().ok_or("a list of non-structs")?;
                let key = entries.column_by_name("key").and_then(StrCol::of);
                let value = entries.column_by_name("value").and_then(StrCol::of);
                match (key, value) {
                    (Some(k), Some(v)) => Self::List(l, k, v),
                    _ => return Err("a list without string key and value fields".to_owned()),
                }
            }
            DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8 => {
                let array = array.as_dictionary::<Int32Type>();
                let text = array.values().as_string::<i32>();
                let values = (0..text.len())
                    .map(|i| text.is_valid(i).then(|| text.value(i)).and_then(not_null))
                    .collect();
                Self::Dict {
                    array,
                    keys: array.keys().values(),
                    values,
                }
            }
            other => match StrCol::of(array) {
                Some(s) => Self::Str(s),
                None => return Err(format!("a column of type {other} gpuplan cannot read")),
            },
        })
    }

    fn cell(&self, i: usize) -> Cell<'a> {
        if let Some(n) = self.number(i) {
            return n.map_or(Cell::Null, Cell::Num);
        }
        if let Some(t) = self.time(i) {
            return t.map_or(Cell::Null, Cell::Time);
        }
        match self {
            Self::Str(s) => s.get(i).and_then(not_null).map_or(Cell::Null, Cell::Text),
            Self::Dict { values, .. } => self
                .dictionary_key(i)
                .and_then(|k| values.get(k).copied().flatten())
                .map_or(Cell::Null, Cell::Text),
            Self::Map(m, k, v) => pairs(*m, i, *k, *v, m.value_offsets()),
            Self::List(l, k, v) => pairs(*l, i, *k, *v, l.value_offsets()),
            _ => Cell::Null,
        }
    }

    /// Row `i`'s number (`Some(None)` when null), or `None` when this is
    /// not a column of numbers.
    fn number(&self, i: usize) -> Option<Option<f64>> {
        fn at<T: Array>(a: &T, i: usize, v: impl FnOnce() -> f64) -> Option<Option<f64>> {
            Some(a.is_valid(i).then(v))
        }
        match self {
            Self::F64(a) => at(*a, i, || a.value(i)),
            Self::F32(a) => at(*a, i, || f64::from(a.value(i))),
            #[allow(clippy::cast_precision_loss)]
            Self::I64(a) => at(*a, i, || a.value(i) as f64),
            Self::I32(a) => at(*a, i, || f64::from(a.value(i))),
            #[allow(clippy::cast_precision_loss)]
            Self::Decimal(a, scale) => at(*a, i, || a.value(i) as f64 / 10f64.powi(*scale)),
            _ => None,
        }
    }

    /// Row `i`'s time as Unix seconds (`Some(None)` when null), or `None`
    /// when this is not a column of times.
    fn time(&self, i: usize) -> Option<Option<i64>> {
        fn at<T: Array>(a: &T, i: usize, v: impl FnOnce() -> i64) -> Option<Option<i64>> {
            Some(a.is_valid(i).then(v))
        }
        match self {
            Self::TsS(a) => at(*a, i, || a.value(i)),
            Self::TsMs(a) => at(*a, i, || a.value(i).div_euclid(1000)),
            Self::TsUs(a) => at(*a, i, || a.value(i).div_euclid(1_000_000)),
            Self::TsNs(a) => at(*a, i, || a.value(i).div_euclid(1_000_000_000)),
            Self::Date(a) => at(*a, i, || i64::from(a.value(i)) * 86_400),
            _ => None,
        }
    }

    /// Row `i`'s key into a dictionary column's values, unless its cell is
    /// null (or a null-like text).
    fn dictionary_key(&self, i: usize) -> Option<usize> {
        let Self::Dict {
            array,
            keys,
            values,
        } = self
        else {
            return None;
        };
        if !array.is_valid(i) {
            return None;
        }
        let k = usize::try_from(*keys.get(i)?).ok()?;
        values.get(k)?.is_some().then_some(k)
    }
}

/// Text a cell holds, unless it is empty or the literal `null`.
fn not_null(t: &str) -> Option<&str> {
    (!t.is_empty() && !t.eq_ignore_ascii_case("null")).then_some(t)
}

fn pairs<'a>(
    array: &dyn Array,
    i: usize,
    keys: StrCol<'a>,
    values: StrCol<'a>,
    offsets: &[i32],
) -> Cell<'a> {
    if !array.is_valid(i) {
        return Cell::Null;
    }
    let at = |j: usize| {
        offsets
            .get(j)
            .and_then(|o| usize::try_from(*o).ok())
            .unwrap_or(0)
    };
    Cell::Pairs(Pairs {
        keys,
        values,
        start: at(i),
        end: at(i + 1),
    })
}

struct BatchRow<'a> {
    batch: &'a Batch<'a>,
    row: usize,
    line: u64,
}

impl RowCells for BatchRow<'_> {
    fn cell(&self, i: usize) -> Cell<'_> {
        self.batch.cell(i, self.row)
    }

    fn line(&self) -> u64 {
        self.line
    }

    fn batch(&self) -> Option<(&Batch<'_>, usize)> {
        Some((self.batch, self.row))
    }
}

/// Batches handed out so far, across every file and thread.
static BATCHES: AtomicU64 = AtomicU64::new(1);

/// The wanted columns of a batch of decoded Parquet rows, read a column at
/// a time: a tight loop over one array costs a fraction of reading the same
/// cells row by row.
pub struct Batch<'a> {
    cols: Vec<Col<'a>>,
    rows: usize,
    serial: u64,
    epoch: u64,
}

impl<'a> Batch<'a> {
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// A number no other batch has.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    /// Batches whose ids (see [`Batch::ids`], [`MapIds`]) may be
    /// compared: those of the same epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn cell(&self, i: usize, row: usize) -> Cell<'a> {
        self.cols.get(i).map_or(Cell::Null, |c| c.cell(row))
    }

    /// Writes an id of each row's cell in wanted column `i` to `out` (0 for
    /// a null cell or a missing column): within an epoch, equal ids are
    /// equal cells. Returns how many ids there can be, or `None` when the
    /// cells have none (numbers, key-value maps, plain text that is not
    /// null).
    pub fn ids(&self, i: usize, out: &mut Vec<u32>) -> Option<u32> {
        out.clear();
        match self.cols.get(i) {
            None | Some(Col::Missing) => {
                out.resize(self.rows, 0);
                Some(1)
            }
            Some(Col::Str(s)) => (0..self.rows)
                .all(|r| s.get(r).and_then(not_null).is_none())
                .then(|| {
                    out.resize(self.rows, 0);
                    1
                }),
            Some(Col::Dict {
                array,
                keys,
                values,
            }) => {
                // A null-like text is a null cell; the others are their
                // place in the dictionary, after 0.
                let ids: Vec<u32> = (1..)
                    .zip(values)
                    .map(|(id, v)| if v.is_some() { id } else { 0 })
                    .collect();
                let id = |k: i32| usize::try_from(k).ok().and_then(|k| ids.get(k).copied());
                match array.nulls() {
                    None => out.extend(keys.iter().map(|&k| id(k).unwrap_or(0))),
                    Some(nulls) => out.extend(
                        keys.iter()
                            .zip(nulls.iter())
                            .map(|(&k, valid)| if valid { id(k).unwrap_or(0) } else { 0 }),
                    ),
                }
                u32::try_from(values.len() + 1).ok()
            }
            Some(_) => None,
        }
    }

    /// Key-value column `i` as ids, when its keys and values are
    /// dictionaries.
    pub fn map_ids(&self, i: usize) -> Option<MapIds<'a>> {
        let (cells, offsets, keys, values): (&dyn Array, _, _, _) = match self.cols.get(i)? {
            Col::Map(m, StrCol::Dict(k, kt), StrCol::Dict(v, vt)) => {
                (*m, m.value_offsets(), (*k, *kt), (*v, *vt))
            }
            Col::List(l, StrCol::Dict(k, kt), StrCol::Dict(v, vt)) => {
                (*l, l.value_offsets(), (*k, *kt), (*v, *vt))
            }
            _ => return None,
        };
        Some(MapIds {
            cells,
            offsets,
            keys: keys.0,
            values: values.0,
            key_text: keys.1,
            value_text: values.1,
        })
    }

    /// Each row's number in wanted column `i` (`None` for a null cell or a
    /// missing column), or `false` when the column does not hold numbers.
    pub fn numbers(&self, i: usize, out: &mut Vec<Option<f64>>) -> bool {
        self.each(i, out, Col::number)
    }

    /// Each row's time in wanted column `i`, as Unix seconds (`None` for a
    /// null cell or a missing column), or `false` when the column does not
    /// hold times.
    pub fn times(&self, i: usize, out: &mut Vec<Option<i64>>) -> bool {
        self.each(i, out, Col::time)
    }

    /// Each row's `read` of column `i` into `out`; `false` when the column
    /// has no such values.
    fn each<T>(
        &self,
        i: usize,
        out: &mut Vec<Option<T>>,
        read: impl Fn(&Col<'a>, usize) -> Option<Option<T>>,
    ) -> bool {
        out.clear();
        match self.cols.get(i) {
            None | Some(Col::Missing) => {
                out.resize_with(self.rows, || None);
                true
            }
            Some(c) => (0..self.rows).all(|r| read(c, r).map(|v| out.push(v)).is_some()),
        }
    }
}

/// Epochs handed out so far, across every file and thread: a new one
/// whenever a batch's dictionaries are not its predecessor's.
static EPOCHS: AtomicU64 = AtomicU64::new(1);

/// The dictionaries of a batch's columns (a map's keys and values too).
/// Parquet keeps one dictionary for a whole column chunk, so within a row
/// group they do not change, though they may come in a new array over the
/// same buffers each batch: they are compared by their buffers. While the previous batch's are held here,
/// no new dictionary can take their addresses, so the same addresses mean
/// the same dictionaries.
#[derive(Default)]
struct Dictionaries {
    held: Vec<ArrayRef>,
    addresses: Vec<(usize, usize, usize)>,
    epoch: u64,
}

impl Dictionaries {
    /// The epoch of a batch with these columns.
    fn epoch(&mut self, cols: &[Col<'_>]) -> u64 {
        let dictionary = |s: &StrCol<'_>| match s {
            StrCol::Dict(d, _) => Some(Arc::clone(d.values())),
            _ => None,
        };
        let now: Vec<ArrayRef> = cols
            .iter()
            .flat_map(|c| match c {
                Col::Dict { array, .. } => vec![Some(Arc::clone(array.values()))],
                Col::Map(_, k, v) => vec![dictionary(k), dictionary(v)],
                _ => Vec::new(),
            })
            .flatten()
            .collect();
        let addresses: Vec<(usize, usize, usize)> = now
            .iter()
            .map(|a| {
                a.as_string_opt::<i32>().map_or((0, 0, 0), |t| {
                    (
                        t.offsets().as_ptr() as usize,
                        t.values().as_ptr() as usize,
                        t.len(),
                    )
                })
            })
            .collect();
        let same =
            self.epoch != 0 && addresses == self.addresses && addresses.iter().all(|a| a.0 != 0);
        if !same {
            self.epoch = EPOCHS.fetch_add(1, Ordering::Relaxed);
        }
        self.held = now;
        self.addresses = addresses;
        self.epoch
    }
}

fn parquet_rows(
    shown: &str,
    header: &[String],
    parquet: &Parquet,
    wanted: &[Option<usize>],
    workers: &mut [&mut RowFn<'_>],
) -> Result<(), BillError> {
    let mut roots: Vec<usize> = wanted.iter().flatten().copied().collect();
    roots.sort_unstable();
    roots.dedup();
    let rows: Vec<u64> = parquet
        .meta
        .metadata()
        .row_groups()
        .iter()
        .map(|g| u64::try_from(g.num_rows()).unwrap_or(0))
        .collect();
    let shares = shares(&rows, workers.len());
    // The lowest line any worker failed at: a worker stops once its rows lie
    // beyond it, and goes on below it, so the error reported is the file's
    // first whatever the threads' timing.
    let lowest = AtomicU64::new(u64::MAX);
    let outcomes: Vec<Result<(), (u64, BillError)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = workers
            .iter_mut()
            .zip(&shares)
            .map(|(f, share)| {
                let (roots, lowest) = (&roots, &lowest);
                scope.spawn(move || {
                    for part in share {
                        let line = part.line;
                        if line >= lowest.load(Ordering::Relaxed) {
                            break;
                        }
                        let group = Group {
                            shown,
                            header,
                            wanted,
                            roots,
                            part,
                            lowest,
                        };
                        let read = match &parquet.bytes {
                            ParquetBytes::Memory(b) => group.read(b.clone(), &parquet.meta, *f),
                            ParquetBytes::File(c) => match open_file(c) {
                                Ok(file) => group.read(file, &parquet.meta, *f),
                                Err(why) => Err((line, BillError::file(shown, why))),
                            },
                        };
                        if let Err((line, e)) = read {
                            lowest.fetch_min(line, Ordering::Relaxed);
                            return Err((line, e));
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err((0, BillError::file(shown, "a reading thread failed"))))
            })
            .collect()
    });
    outcomes
        .into_iter()
        .filter_map(Result::err)
        .min_by_key(|(line, _)| *line)
        .map_or(Ok(()), |(_, e)| Err(e))
}

/// A run of rows of one row group.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Part {
    group: usize,
    /// The group's rows before the run.
    skip: u64,
    rows: u64,
    /// The line before the run's first row (the header is line 1).
    line: u64,
}

/// Each worker's share of a file's rows: `n` contiguous runs of nearly
/// equal length, cut along row groups. Equal shares keep both cores busy
/// to the end whatever the file's row groups, and only the group a cut
/// falls in is read by two workers (each decoding its own rows of it).
fn shares(group_rows: &[u64], n: usize) -> Vec<Vec<Part>> {
    let total: u64 = group_rows.iter().sum();
    let n = n.max(1) as u64;
    (0..n)
        .map(|w| {
            let (from, to) = (total * w / n, total * (w + 1) / n);
            let mut parts = Vec::new();
            let mut start = 0;
            for (group, &rows) in group_rows.iter().enumerate() {
                let (lo, hi) = (from.max(start), to.min(start + rows));
                if lo < hi {
                    parts.push(Part {
                        group,
                        skip: lo - start,
                        rows: hi - lo,
                        line: 1 + lo,
                    });
                }
                start += rows;
            }
            parts
        })
        .collect()
}

/// A run of rows of a Parquet file, as one worker reads it.
struct Group<'a> {
    shown: &'a str,
    header: &'a [String],
    wanted: &'a [Option<usize>],
    roots: &'a [usize],
    part: &'a Part,
    lowest: &'a AtomicU64,
}

impl Group<'_> {
    /// Decodes the group's rows and hands them to `f`; an error comes with
    /// the line it is at.
    fn read<T: parquet::file::reader::ChunkReader + 'static>(
        &self,
        bytes: T,
        meta: &ArrowReaderMetadata,
        f: &mut RowFn<'_>,
    ) -> Result<(), (u64, BillError)> {
        let fail = |line: u64, why: String| (line, BillError::file(self.shown, why));
        let part = self.part;
        let builder = ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, meta.clone());
        let mask = ProjectionMask::roots(builder.parquet_schema(), self.roots.iter().copied());
        let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let selection = RowSelection::from(vec![
            RowSelector::skip(count(part.skip)),
            RowSelector::select(count(part.rows)),
        ]);
        let reader = builder
            .with_projection(mask)
            .with_row_groups(vec![part.group])
            .with_row_selection(selection)
            .with_batch_size(BATCH_ROWS)
            .build()
            .map_err(|e| fail(part.line, format!("cannot read: {e}")))?;
        let mut line = part.line;
        let mut dictionaries = Dictionaries::default();
        for batch in reader {
            if line >= self.lowest.load(Ordering::Relaxed) {
                return Ok(());
            }
            let batch = batch.map_err(|e| {
                fail(
                    line + 1,
                    format!(
                        "cannot decode the rows from line {}: {e}; a file cut short?",
                        line + 1
                    ),
                )
            })?;
            let cols = self.columns(&batch).map_err(|why| fail(line + 1, why))?;
            let epoch = dictionaries.epoch(&cols);
            let batch = Batch {
                cols,
                rows: batch.num_rows(),
                serial: BATCHES.fetch_add(1, Ordering::Relaxed),
                epoch,
            };
            for row in 0..batch.rows {
                let at = line + 1 + row as u64;
                f(&BatchRow {
                    batch: &batch,
                    row,
                    line: at,
                })
                .map_err(|e| (at, e))?;
            }
            line += batch.rows as u64;
        }
        Ok(())
    }

    /// The wanted columns of a batch, in the order of `wanted`.
    fn columns<'b>(&self, batch: &'b RecordBatch) -> Result<Vec<Col<'b>>, String> {
        self.wanted
            .iter()
            .map(|w| {
                let name = w.and_then(|at| self.header.get(at));
                match name.and_then(|name| batch.column_by_name(name)) {
                    None => Ok(Col::Missing),
                    Some(a) => Col::of(a).map_err(|why| {
                        format!("column {}: {why}", name.map_or("?", String::as_str))
                    }),
                }
            })
            .collect()
    }
}

/// The file's metadata, with text columns read as dictionaries: exports
/// repeat a few values (categories, accounts, regions, tag keys) on millions
/// of rows, and keeping them as keys into one dictionary saves copying every
/// string out, and reading each distinct value once a batch.
fn parquet_metadata<T: parquet::file::reader::ChunkReader + 'static>(
    reader: &T,
) -> Result<ArrowReaderMetadata, parquet::errors::ParquetError> {
    let meta = ArrowReaderMetadata::load(reader, ArrowReaderOptions::new())?;
    let fields: Vec<Field> = meta
        .schema()
        .fields()
        .iter()
        .map(|f| as_dictionary(f, meta.metadata()))
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        meta.schema().metadata().clone(),
    ));
    ArrowReaderMetadata::try_new(
        meta.metadata().clone(),
        ArrowReaderOptions::new().with_schema(schema),
    )
}

/// Whether the statistics of every row group say the top-level column
/// `name` holds only nulls (`ChargeClass` in most exports). Such a column is
/// read as plain text: as a dictionary, parquet builds a new one for every
/// batch by hashing and comparing each null slot, which was half of the
/// benchmark file's decoding.
fn all_null(meta: &parquet::file::metadata::ParquetMetaData, name: &str) -> bool {
    let columns = meta.file_metadata().schema_descr().columns();
    let Some(c) = columns.iter().position(|c| c.path().parts() == [name]) else {
        return false;
    };
    meta.row_groups().iter().all(|g| {
        let rows = u64::try_from(g.num_rows()).unwrap_or(u64::MAX);
        g.column(c)
            .statistics()
            .and_then(parquet::file::statistics::Statistics::null_count_opt)
            .is_some_and(|nulls| nulls == rows)
    })
}

/// A text field as a dictionary, unless it is all null; a map of text to
/// text (or BigQuery's list of key and value structs) with both sides as
/// dictionaries, so that a row's entries are known by their ids (see
/// [`MapIds`]).
fn as_dictionary(f: &Field, meta: &parquet::file::metadata::ParquetMetaData) -> Field {
    let text =
        |t: &DataType| matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View);
    let dictionary = || DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    // The entries' struct with text fields as dictionaries, if it is one of
    // two text fields.
    let entries = |entries: &Arc<Field>| match entries.data_type() {
        DataType::Struct(fields)
            if fields.len() == 2 && fields.iter().all(|e| text(e.data_type())) =>
        {
            let fields: Vec<Field> = fields
                .iter()
                .map(|e| e.as_ref().clone().with_data_type(dictionary()))
                .collect();
            Some(Arc::new(
                entries
                    .as_ref()
                    .clone()
                    .with_data_type(DataType::Struct(fields.into())),
            ))
        }
        _ => None,
    };
    match f.data_type() {
        t if text(t) && !all_null(meta, f.name()) => f.clone().with_data_type(dictionary()),
        DataType::Map(e, sorted) => entries(e).map_or_else(
            || f.clone(),
            |e| f.clone().with_data_type(DataType::Map(e, *sorted)),
        ),
        DataType::List(e) => entries(e).map_or_else(
            || f.clone(),
            |e| f.clone().with_data_type(DataType::List(e)),
        ),
        _ => f.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Part, shares};

    #[test]
    fn a_text_column_null_in_every_row_group_is_read_plain_and_others_as_dictionaries() {
        use std::sync::Arc;

        use arrow_array::cast::AsArray;
        use arrow_array::{ArrayRef, RecordBatch, StringArray};
        use arrow_schema::DataType;
        use parquet::arrow::ArrowWriter;
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

        let column = |v: [Option<&str>; 3]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
        let batch = |half: [Option<&str>; 3]| {
            RecordBatch::try_from_iter(vec![
                ("Empty", column([None; 3])),
                ("Half", column(half)),
                ("Full", column([Some("a"), Some("b"), Some("a")])),
            ])
            .unwrap()
        };
        let (first, second) = (batch([None; 3]), batch([None, Some("x"), Some("y")]));
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(3))
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, first.schema(), Some(props)).unwrap();
        w.write(&first).unwrap();
        w.write(&second).unwrap();
        w.close().unwrap();
        let bytes = bytes::Bytes::from(out);
        let meta = super::parquet_metadata(&bytes).unwrap();
        assert_eq!(meta.metadata().num_row_groups(), 2);
        let types: Vec<DataType> = meta
            .schema()
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
        assert_eq!(types, [DataType::Utf8, dict.clone(), dict]);
        let read: Vec<RecordBatch> =
            ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, meta)
                .build()
                .unwrap()
                .map(Result::unwrap)
                .collect();
        let half: Vec<Option<String>> = read
            .iter()
            .flat_map(|b| {
                let d = b.column(1).as_dictionary::<arrow_array::types::Int32Type>();
                let values = d.values().as_string::<i32>();
                d.keys()
                    .iter()
                    .map(|k| k.map(|k| values.value(k as usize).to_owned()))
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(
            half,
            [None, None, None, None, Some("x".into()), Some("y".into())]
        );
        assert!(
            read.iter()
                .all(|b| b.column(0).null_count() == b.num_rows())
        );
    }

    #[test]
    fn batches_of_one_row_group_share_an_epoch_and_equal_text_shares_a_key() {
        use std::sync::Arc;

        use arrow_array::builder::{MapBuilder, StringBuilder};
        use arrow_array::{ArrayRef, RecordBatch, StringArray};
        use parquet::arrow::ArrowWriter;
        use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

        let teams = ["ml", "research", "ml", "ml", "research", "infra"];
        let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
        for team in teams {
            tags.keys().append_value("team");
            tags.values().append_value(team);
            tags.append(true).unwrap();
        }
        let batch = RecordBatch::try_from_iter(vec![
            (
                "Region",
                Arc::new(StringArray::from(vec![
                    Some("us-east-1"),
                    Some("eu-west-1"),
                    Some("us-east-1"),
                    None,
                    Some("us-east-1"),
                    Some("eu-west-1"),
                ])) as ArrayRef,
            ),
            ("Tags", Arc::new(tags.finish()) as ArrayRef),
        ])
        .unwrap();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_max_row_group_row_count(Some(4))
            .build();
        let mut out = Vec::new();
        let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let bytes = bytes::Bytes::from(out);
        let meta = super::parquet_metadata(&bytes).unwrap();
        let mut rows = Vec::new();
        for group in 0..2 {
            let reader =
                ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta.clone())
                    .with_row_groups(vec![group])
                    .with_batch_size(2)
                    .build()
                    .unwrap();
            let mut dictionaries = super::Dictionaries::default();
            for b in reader {
                let b = b.unwrap();
                let cols: Vec<super::Col<'_>> = b
                    .columns()
                    .iter()
                    .map(|a| super::Col::of(a).unwrap())
                    .collect();
                let epoch = dictionaries.epoch(&cols);
                let batch = super::Batch {
                    cols,
                    rows: b.num_rows(),
                    serial: 0,
                    epoch,
                };
                let mut regions = Vec::new();
                let bound = batch.ids(0, &mut regions).unwrap();
                assert!(regions.iter().all(|&id| id < bound), "{regions:?} {bound}");
                let tags = batch.map_ids(1).unwrap();
                let values = tags.value_count().unwrap();
                for (row, region) in regions.into_iter().enumerate() {
                    let (key, team) = tags.row(row).unwrap().next().unwrap();
                    assert_eq!(tags.key_text(key), Some("team"));
                    let team = team.unwrap();
                    assert!(team < values);
                    assert_eq!(tags.value_text(team), Some(teams[rows.len()]));
                    rows.push((epoch, region, team));
                }
            }
        }
        // Rows 0-3 are one row group read in two batches, rows 4-5 another.
        let epochs: Vec<u64> = rows.iter().map(|r| r.0).collect();
        assert!(epochs[..4].iter().all(|e| *e == epochs[0]), "{rows:?}");
        assert!(
            epochs[4..]
                .iter()
                .all(|e| *e == epochs[4] && *e != epochs[0])
        );
        let (region, team): (Vec<u32>, Vec<u32>) = rows.iter().map(|r| (r.1, r.2)).unzip();
        // Equal text, equal key; a null region is 0.
        assert_eq!(region[0], region[2]);
        assert_ne!(region[0], region[1]);
        assert_eq!(region[3], 0);
        assert_ne!(region[0], 0);
        assert_eq!((team[0], team[2], team[3]), (team[0], team[0], team[0]));
        assert_ne!(team[0], team[1]);
        assert_ne!(team[4], team[5]);
    }

    #[test]
    fn shares_are_equal_runs_cut_along_row_groups() {
        let part = |group, skip, rows, line| Part {
            group,
            skip,
            rows,
            line,
        };
        // 5 groups, 23 rows: the cut at row 11 falls inside the third group.
        let s = shares(&[5, 5, 5, 5, 3], 2);
        assert_eq!(
            s,
            vec![
                vec![part(0, 0, 5, 1), part(1, 0, 5, 6), part(2, 0, 1, 11)],
                vec![part(2, 1, 4, 12), part(3, 0, 5, 16), part(4, 0, 3, 21)],
            ]
        );
        // Fewer rows than workers: a worker may have none; no row is lost.
        let s = shares(&[1], 2);
        assert_eq!(s, vec![vec![], vec![part(0, 0, 1, 1)]]);
        assert_eq!(shares(&[], 2), vec![Vec::<Part>::new(), vec![]]);
    }
}
