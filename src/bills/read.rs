//! Files as rows of cells: CSV, gzipped CSV and Parquet, read column by
//! name. Only the columns a mapping asks for are decoded (a Parquet file is
//! read with a projection), and a cell borrows from the file's buffers, so a
//! row costs no allocation.

use std::fs::File;
use std::io::{BufReader, Read};
use std::sync::Arc;

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
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
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

/// A row as a mapping sees it: cells by the position of the wanted column.
pub trait RowCells {
    /// The cell of wanted column `i`; `Null` when the file lacks the column.
    fn cell(&self, i: usize) -> Cell<'_>;
    /// 1-based, counting the header as line 1.
    fn line(&self) -> u64;
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
    Parquet(Box<ParquetRecordBatchReaderBuilder<File>>),
    ParquetInMemory(Box<ParquetRecordBatchReaderBuilder<bytes::Bytes>>),
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
        let parquet_header = |schema: &arrow_schema::SchemaRef| -> Vec<String> {
            schema.fields().iter().map(|f| f.name().clone()).collect()
        };
        let not_parquet =
            |e: parquet::errors::ParquetError| fail(format!("not a readable Parquet file: {e}"));
        let reader: Box<dyn Read> = match contents {
            Contents::Local(_) | Contents::Spooled(_) => {
                let path = contents.path().unwrap_or(std::path::Path::new(""));
                let file = File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
                if name.ends_with(".parquet") {
                    let b = parquet_builder(file).map_err(not_parquet)?;
                    let header = parquet_header(b.schema());
                    return Ok(Self {
                        shown: shown.to_owned(),
                        header,
                        inner: Inner::Parquet(Box::new(b)),
                    });
                }
                Box::new(BufReader::new(file))
            }
            Contents::Memory(bytes) => {
                if name.ends_with(".parquet") {
                    let b = parquet_builder(bytes).map_err(not_parquet)?;
                    let header = parquet_header(b.schema());
                    return Ok(Self {
                        shown: shown.to_owned(),
                        header,
                        inner: Inner::ParquetInMemory(Box::new(b)),
                    });
                }
                Box::new(std::io::Cursor::new(bytes))
            }
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
    /// when absent. A Parquet file's batches go to the workers in turn
    /// (batch i to worker i mod n), each on a thread of its own; a CSV file
    /// is read in order by the first.
    ///
    /// # Errors
    /// The first error of a worker (the lowest line where several failed),
    /// or a `File` error when the file is cut short or malformed.
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
            Inner::Parquet(builder) => {
                parquet_rows(&self.shown, &self.header, *builder, wanted, workers)
            }
            Inner::ParquetInMemory(builder) => {
                parquet_rows(&self.shown, &self.header, *builder, wanted, workers)
            }
        }
    }
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
            other => match StrCol::of(array) {
                Some(s) => Self::Str(s),
                None => return Err(format!("a column of type {other} gpuplan cannot read")),
            },
        })
    }

    fn cell(&self, i: usize) -> Cell<'a> {
        fn num<T: Array>(a: &T, i: usize, v: impl FnOnce() -> f64) -> Cell<'static> {
            if a.is_valid(i) {
                Cell::Num(v())
            } else {
                Cell::Null
            }
        }
        fn time<T: Array>(a: &T, i: usize, v: impl FnOnce() -> i64) -> Cell<'static> {
            if a.is_valid(i) {
                Cell::Time(v())
            } else {
                Cell::Null
            }
        }
        match self {
            Self::Missing => Cell::Null,
            Self::Str(s) => match s.get(i) {
                Some(t) if !t.is_empty() && !t.eq_ignore_ascii_case("null") => Cell::Text(t),
                _ => Cell::Null,
            },
            Self::F64(a) => num(*a, i, || a.value(i)),
            Self::F32(a) => num(*a, i, || f64::from(a.value(i))),
            #[allow(clippy::cast_precision_loss)]
            Self::I64(a) => num(*a, i, || a.value(i) as f64),
            Self::I32(a) => num(*a, i, || f64::from(a.value(i))),
            #[allow(clippy::cast_precision_loss)]
            Self::Decimal(a, scale) => num(*a, i, || a.value(i) as f64 / 10f64.powi(*scale)),
            Self::TsS(a) => time(*a, i, || a.value(i)),
            Self::TsMs(a) => time(*a, i, || a.value(i).div_euclid(1000)),
            Self::TsUs(a) => time(*a, i, || a.value(i).div_euclid(1_000_000)),
            Self::TsNs(a) => time(*a, i, || a.value(i).div_euclid(1_000_000_000)),
            Self::Date(a) => time(*a, i, || i64::from(a.value(i)) * 86_400),
            Self::Map(m, k, v) => pairs(*m, i, *k, *v, m.value_offsets()),
            Self::List(l, k, v) => pairs(*l, i, *k, *v, l.value_offsets()),
        }
    }
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
    cols: &'a [Col<'a>],
    row: usize,
    line: u64,
}

impl RowCells for BatchRow<'_> {
    fn cell(&self, i: usize) -> Cell<'_> {
        self.cols.get(i).map_or(Cell::Null, |c| c.cell(self.row))
    }

    fn line(&self) -> u64 {
        self.line
    }
}

fn parquet_rows<T: parquet::file::reader::ChunkReader + 'static>(
    shown: &str,
    header: &[String],
    builder: ParquetRecordBatchReaderBuilder<T>,
    wanted: &[Option<usize>],
    workers: &mut [&mut RowFn<'_>],
) -> Result<(), BillError> {
    let fail = |why: String| BillError::file(shown, why);
    let mut roots: Vec<usize> = wanted.iter().flatten().copied().collect();
    roots.sort_unstable();
    roots.dedup();
    let mask = ProjectionMask::roots(builder.parquet_schema(), roots.iter().copied());
    let reader = builder
        .with_projection(mask)
        .with_batch_size(BATCH_ROWS)
        .build()
        .map_err(|e| fail(format!("cannot read: {e}")))?;
    let n = workers.len();
    // Decoding runs on a thread of its own, a couple of batches ahead of
    // the workers, which map rows on theirs. A worker that stops (an error)
    // hangs up, and the decoder stops with it.
    std::thread::scope(|scope| {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..n)
            .map(|_| std::sync::mpsc::sync_channel::<Decoded>(DECODED_AHEAD))
            .unzip();
        scope.spawn(move || {
            let mut line: u64 = 1;
            for (i, batch) in reader.enumerate() {
                let stop = batch.is_err();
                let rows = batch.as_ref().map_or(0, RecordBatch::num_rows) as u64;
                if senders[i % n].send((line, batch)).is_err() || stop {
                    break;
                }
                line += rows;
            }
        });
        let handles: Vec<_> = workers
            .iter_mut()
            .zip(receivers)
            .map(|(f, rx)| {
                scope.spawn(move || rows_of_batches(shown, header, wanted, rx.into_iter(), *f))
            })
            .collect();
        let mut first: Option<BillError> = None;
        for h in handles {
            let outcome = h
                .join()
                .unwrap_or_else(|_| Err(fail("a reading thread failed".to_owned())));
            if let Err(e) = outcome {
                let line = |e: &BillError| match e {
                    BillError::Cell(c) => c.line,
                    BillError::File { .. } => u64::MAX,
                };
                if first.as_ref().is_none_or(|f| line(&e) < line(f)) {
                    first = Some(e);
                }
            }
        }
        first.map_or(Ok(()), Err)
    })
}

/// A decoded batch and the line of its first row.
type Decoded = (u64, Result<RecordBatch, arrow_schema::ArrowError>);

/// Batches a Parquet file's decoder runs ahead of each worker.
const DECODED_AHEAD: usize = 2;

fn rows_of_batches(
    shown: &str,
    header: &[String],
    wanted: &[Option<usize>],
    batches: impl Iterator<Item = Decoded>,
    f: &mut RowFn<'_>,
) -> Result<(), BillError> {
    let fail = |why: String| BillError::file(shown, why);
    for (first_line, batch) in batches {
        let batch: RecordBatch = batch.map_err(|e| {
            fail(format!(
                "cannot decode the rows from line {}: {e}; a file cut short?",
                first_line + 1
            ))
        })?;
        let arrays: Vec<Option<Arc<dyn Array>>> = wanted
            .iter()
            .map(|w| {
                w.and_then(|at| header.get(at))
                    .and_then(|name| batch.column_by_name(name).cloned())
            })
            .collect();
        let mut cols = Vec::with_capacity(arrays.len());
        for (array, w) in arrays.iter().zip(wanted) {
            cols.push(match array {
                None => Col::Missing,
                Some(a) => Col::of(a).map_err(|why| {
                    let name = w.and_then(|at| header.get(at)).map_or("?", String::as_str);
                    fail(format!("column {name}: {why}"))
                })?,
            });
        }
        for row in 0..batch.num_rows() {
            f(&BatchRow {
                cols: &cols,
                row,
                line: first_line + 1 + row as u64,
            })?;
        }
    }
    Ok(())
}

/// A reader that decodes text columns as dictionaries: exports repeat a few
/// values (categories, accounts, regions) on millions of rows, and keeping
/// them as keys into one dictionary saves copying every string out.
fn parquet_builder<T: parquet::file::reader::ChunkReader + 'static>(
    reader: T,
) -> Result<ParquetRecordBatchReaderBuilder<T>, parquet::errors::ParquetError> {
    let meta = ArrowReaderMetadata::load(&reader, ArrowReaderOptions::new())?;
    let dictionary = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    let fields: Vec<Field> = meta
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => {
                f.as_ref().clone().with_data_type(dictionary.clone())
            }
            _ => f.as_ref().clone(),
        })
        .collect();
    let schema = Arc::new(Schema::new_with_metadata(
        fields,
        meta.schema().metadata().clone(),
    ));
    let meta = ArrowReaderMetadata::try_new(
        meta.metadata().clone(),
        ArrowReaderOptions::new().with_schema(schema),
    )?;
    Ok(ParquetRecordBatchReaderBuilder::new_with_metadata(
        reader, meta,
    ))
}
