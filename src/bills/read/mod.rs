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

mod csv_file;
mod parquet_file;

use csv_file::{csv_rows, csv_why};
pub use parquet_file::Batch;
use parquet_file::{StrCol, parquet_metadata, parquet_rows};

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
        // Records end at `\n` alone: the csv crate's line count misses the
        // `\n` of a CRLF end (Azure writes them), which would name the line
        // before a bad row's. The `\r` left on a row's last cell goes with
        // the trimming every cell and header gets.
        let mut csv = csv::ReaderBuilder::new()
            .has_headers(true)
            .flexible(false)
            .terminator(csv::Terminator::Any(b'\n'))
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

#[cfg(test)]
mod tests;
