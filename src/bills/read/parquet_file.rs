//! Parquet files: each worker decodes its own share of the row groups,
//! only the wanted columns, and maps each batch's rows in place.

use super::*;

/// A string column of any of Arrow's string layouts.
#[derive(Debug, Clone, Copy)]
pub(super) enum StrCol<'a> {
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

    pub(super) fn get(&self, i: usize) -> Option<&'a str> {
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
pub(super) enum Col<'a> {
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
    pub(super) fn of(array: &'a ArrayRef) -> Result<Self, String> {
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
    pub(super) cols: Vec<Col<'a>>,
    pub(super) rows: usize,
    pub(super) serial: u64,
    pub(super) epoch: u64,
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

    /// Whether the file has wanted column `i`.
    pub fn has(&self, i: usize) -> bool {
        !matches!(self.cols.get(i), None | Some(Col::Missing))
    }

    /// The text of id `id` of text column `i` (see [`Batch::ids`]); `None`
    /// for id 0 and for a column without ids.
    pub fn id_text(&self, i: usize, id: u32) -> Option<&'a str> {
        match self.cols.get(i)? {
            Col::Dict { values, .. } => *values.get(usize::try_from(id).ok()?.checked_sub(1)?)?,
            _ => None,
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
pub(super) struct Dictionaries {
    held: Vec<ArrayRef>,
    addresses: Vec<(usize, usize, usize)>,
    epoch: u64,
}

impl Dictionaries {
    /// The epoch of a batch with these columns.
    pub(super) fn epoch(&mut self, cols: &[Col<'_>]) -> u64 {
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

pub(super) fn parquet_rows(
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
pub(super) struct Part {
    pub(super) group: usize,
    /// The group's rows before the run.
    pub(super) skip: u64,
    pub(super) rows: u64,
    /// The line before the run's first row (the header is line 1).
    pub(super) line: u64,
}

/// Each worker's share of a file's rows: `n` contiguous runs of nearly
/// equal length, cut along row groups. Equal shares keep both cores busy
/// to the end whatever the file's row groups, and only the group a cut
/// falls in is read by two workers (each decoding its own rows of it).
pub(super) fn shares(group_rows: &[u64], n: usize) -> Vec<Vec<Part>> {
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
pub(super) fn parquet_metadata<T: parquet::file::reader::ChunkReader + 'static>(
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
