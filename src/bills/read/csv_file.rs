//! CSV and gzipped CSV files, read in order.

use super::*;

pub(super) fn csv_why(e: &csv::Error) -> String {
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

pub(super) fn csv_rows(
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
