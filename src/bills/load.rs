//! One load of a bill source: list the files that count, parse the new or
//! changed ones (and the unchanged files of every period they touch, since a
//! period is replaced whole), and write each period in its own transaction.
//! A bad file fails only the periods it holds; their stored rows stay.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};

use chrono::{DateTime, Utc};
use foldhash::HashMap;
use serde::Serialize;

use super::aggregate::{Aggregator, Plain};
use super::charge::{self, Cells};
use super::cur2::{self, Cur2};
use super::files::{self, DataFile, Folder};
use super::focus::{self, BatchRows, Focus, Shape};
use super::gpus::{GpuTables, GpuTypes};
use super::read::{RowCells, RowFn, Table};
use super::time::{DAY, period_name};
use super::{BillError, BillFormat, BillProvider, BillSource};
use crate::store::bills::{Deltas, FileRecord, LoadResult};
use crate::store::{Fence, Pool, StoreError};

/// What happened to one period.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PeriodOutcome {
    pub billing_account: String,
    pub billing_period: String,
    /// loaded, unchanged, updated, restated or failed.
    pub result: String,
    pub generation: Option<i64>,
    pub rows: u64,
    pub gpu_rows: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deltas: Option<Deltas>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// What one load of one source did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SourceReport {
    pub source: String,
    pub files_read: usize,
    pub files_skipped: usize,
    /// Data files no current manifest lists (older deliveries).
    pub files_excluded: usize,
    pub periods: Vec<PeriodOutcome>,
    pub unmapped: BTreeMap<String, u64>,
    /// Problems not tied to one period: an unreadable folder or manifest, a
    /// bad file whose periods are unknown, the store.
    pub errors: Vec<String>,
    pub seconds: f64,
}

impl PeriodOutcome {
    fn failed((billing_account, billing_period): PeriodKey, error: String) -> Self {
        Self {
            billing_account,
            billing_period,
            result: "failed".to_owned(),
            generation: None,
            rows: 0,
            gpu_rows: 0,
            deltas: None,
            error: Some(error),
        }
    }
}

impl SourceReport {
    #[must_use]
    pub fn failed(&self) -> bool {
        !self.errors.is_empty() || self.periods.iter().any(|p| p.result == "failed")
    }

    /// Every failure: the source's own, then each failed period's, named by
    /// its account and period (what the log says when a load fails).
    #[must_use]
    pub fn problems(&self) -> Vec<String> {
        let periods = self.periods.iter().filter_map(|p| {
            let error = p.error.as_deref()?;
            Some(format!(
                "{} {}: {error}",
                p.billing_account, p.billing_period
            ))
        });
        self.errors.iter().cloned().chain(periods).collect()
    }
}

/// Every source's report.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LoadReport {
    pub sources: Vec<SourceReport>,
}

impl LoadReport {
    #[must_use]
    pub fn failed(&self) -> bool {
        self.sources.iter().any(SourceReport::failed)
    }
}

/// A period's state at `now`: `open` before its end, `closing` during the
/// provider's grace, then `final`.
#[must_use]
pub fn state_of(now: i64, period_end: i64, grace_days: u32) -> &'static str {
    if now < period_end {
        "open"
    } else if now < period_end + i64::from(grace_days) * DAY {
        "closing"
    } else {
        "final"
    }
}

type PeriodKey = (String, String);

// Both formats' column lists start alike: the billing account, the billing
// period's start, its end, the charge's start and end.
const ACCOUNT: usize = 0;
const PERIOD_START: usize = 1;
const END: usize = 4;

/// Threads that decode and map a Parquet file's rows, each its own share:
/// the machine's two cores.
const WORKERS: usize = 2;

/// How far a load has got, for a progress line: files to read and read,
/// their bytes, rows read and periods written. Only counted, never read
/// back by the load.
#[derive(Debug, Default)]
pub struct Tally {
    pub files: AtomicU64,
    pub files_read: AtomicU64,
    pub bytes: AtomicU64,
    pub rows: AtomicU64,
    pub periods: AtomicU64,
}

impl Tally {
    fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Rows a worker reads before it adds them to the [`Tally`]: one shared
/// counter touched per row would cost the workers more than the count is worth.
const ROWS_PER_TALLY: u64 = 4096;

/// One worker's share of a file: its mapping state, its own aggregates and
/// the periods its rows named.
struct Worker<'s> {
    focus: Focus<'s>,
    cur: Cur2<'s>,
    agg: Aggregator<'s>,
    seen: BTreeSet<PeriodKey>,
    last: Option<(String, i64)>,
    /// FOCUS rows of this epoch by shape: what a plain one added (`None`
    /// for the others). Most rows of an export repeat an earlier row's text
    /// with other amounts, and adding those needs no other cell.
    shapes: HashMap<Shape, Option<Plain>>,
    epoch: u64,
    /// The shapes and amounts of the batch being read: the one numbered
    /// `serial`, and whether it has them.
    batch: BatchRows,
    serial: u64,
    shaped: bool,
    /// Rows read and not yet added to the tally.
    untallied: u64,
}

/// Shapes kept before the memo starts over.
const SHAPES_LIMIT: usize = 100_000;

impl<'s> Worker<'s> {
    fn new(source: &'s BillSource, gpus: &'s GpuTables) -> Self {
        Self {
            focus: Focus::new(source.provider, &source.team_tags),
            cur: Cur2::new(&source.team_tags),
            agg: Aggregator::new(source, gpus),
            seen: BTreeSet::new(),
            last: None,
            shapes: HashMap::default(),
            epoch: 0,
            batch: BatchRows::default(),
            serial: 0,
            shaped: false,
            untallied: 0,
        }
    }

    fn row(&mut self, format: BillFormat, cells: &Cells<'_>) -> Result<(), BillError> {
        let shape = match format {
            BillFormat::Focus => self.shape(cells),
            BillFormat::Cur2 => None,
        };
        let known = shape.and_then(|(s, _)| self.shapes.get(&s)).copied();
        if let (Some(Some(plain)), Some((_, row))) = (known, shape)
            // Amounts that do not read, another billing period, or usage
            // without a quantity: read in full, as a new row.
            && let Some(a) = self.batch.amounts(row)
            && plain.fits(a.period_start, a.period_end, a.quantity)
        {
            return self
                .agg
                .add_plain(&plain, &a)
                .map_err(|why| cells.bad(END, why));
        }
        let charge = match format {
            BillFormat::Focus => self.focus.charge(cells),
            BillFormat::Cur2 => self.cur.charge(cells),
        };
        let ch = match charge {
            Ok(ch) => ch,
            Err(e) => return Err(self.failed(cells, e)),
        };
        let same = self
            .last
            .as_ref()
            .is_some_and(|(a, p)| a == ch.billing_account && *p == ch.period_start);
        if !same {
            self.seen
                .insert((ch.billing_account.to_owned(), period_name(ch.period_start)));
            self.last = Some((ch.billing_account.to_owned(), ch.period_start));
        }
        let plain = self.agg.add(&ch).map_err(|why| cells.bad(END, why))?;
        if let Some((shape, _)) = shape
            && known.is_none()
        {
            if self.shapes.len() >= SHAPES_LIMIT {
                self.shapes.clear();
            }
            self.shapes.insert(shape, plain);
        }
        Ok(())
    }

    /// The row's shape and its place in its batch, when the batch has
    /// shapes; the first row of a batch reads the batch's, and a new epoch
    /// forgets the shapes of the last.
    fn shape(&mut self, cells: &Cells<'_>) -> Option<(Shape, usize)> {
        let (batch, row) = cells.row.batch()?;
        if batch.serial() != self.serial {
            self.serial = batch.serial();
            if batch.epoch() != self.epoch {
                self.shapes.clear();
                self.epoch = batch.epoch();
            }
            self.shaped = self.batch.read(&mut self.focus, batch);
        }
        self.shaped.then(|| (self.batch.shape(row), row))
    }

    /// A bad row's error; its own period fails, when the row says which.
    fn failed(&mut self, cells: &Cells<'_>, e: BillError) -> BillError {
        if let (Ok(account), Ok(start)) = (
            cells.required_text(ACCOUNT),
            cells.required_time(PERIOD_START),
        ) {
            self.seen.insert((account.to_owned(), period_name(start)));
        }
        e
    }
}

/// Reads one file into `agg`; the periods it held so far, and how it ended.
/// Workers' shares are added to `agg` in worker order, so the same file
/// always sums the same way.
pub(super) fn read_file<'s>(
    source: &'s BillSource,
    gpus: &'s GpuTables,
    folder: &dyn Folder,
    file: &DataFile,
    agg: &mut Aggregator<'s>,
    tally: &Tally,
) -> (BTreeSet<PeriodKey>, Result<(), BillError>) {
    let mut workers: Vec<Worker<'s>> = (0..WORKERS).map(|_| Worker::new(source, gpus)).collect();
    let result = (|| {
        let contents = folder
            .open(&file.rel)
            .map_err(|why| BillError::file(&file.rel, why))?;
        Tally::add(&tally.bytes, contents.size());
        let table = Table::open(contents, &file.rel)?;
        let columns = match source.format {
            BillFormat::Focus => focus::COLUMNS,
            BillFormat::Cur2 => cur2::COLUMNS,
        };
        let wanted = charge::resolve(&file.rel, table.header(), columns, source.format)?;
        let format = source.format;
        let shown = file.rel.as_str();
        let mut fns: Vec<Box<RowFn<'_>>> = workers
            .iter_mut()
            .map(|w| {
                Box::new(move |row: &dyn RowCells| {
                    w.untallied += 1;
                    if w.untallied == ROWS_PER_TALLY {
                        Tally::add(&tally.rows, std::mem::take(&mut w.untallied));
                    }
                    w.row(
                        format,
                        &Cells {
                            row,
                            shown,
                            names: columns,
                        },
                    )
                }) as Box<RowFn<'_>>
            })
            .collect();
        let mut refs: Vec<&mut RowFn<'_>> = fns.iter_mut().map(|f| &mut **f).collect();
        table.rows(&wanted, &mut refs)
    })();
    let mut seen = BTreeSet::new();
    for w in workers {
        Tally::add(&tally.rows, w.untallied);
        seen.extend(w.seen);
        agg.merge(w.agg);
    }
    Tally::add(&tally.files_read, 1);
    (seen, result)
}

/// Loads `source` into the store. Blocking: run it off the async runtime.
pub fn load_source(
    pool: &Pool,
    source: &BillSource,
    fence: Option<&Fence>,
    now: DateTime<Utc>,
    tally: &Tally,
) -> SourceReport {
    let started = std::time::Instant::now();
    let span = tracing::info_span!("bills_load", source = %source.name);
    let _entered = span.enter();
    let mut report = SourceReport {
        source: source.name.clone(),
        ..SourceReport::default()
    };
    match load(pool, source, fence, now, tally, &mut report) {
        Ok(()) => {}
        Err(e) => report.errors.push(e.to_string()),
    }
    report.seconds = started.elapsed().as_secs_f64();
    if report.failed() {
        tracing::warn!(errors = ?report.problems(), "Bill load had failures.");
    } else {
        tracing::info!(
            files_read = report.files_read,
            files_skipped = report.files_skipped,
            periods = report.periods.len(),
            "Bill load done."
        );
    }
    report
}

fn load(
    pool: &Pool,
    source: &BillSource,
    fence: Option<&Fence>,
    now: DateTime<Utc>,
    tally: &Tally,
    report: &mut SourceReport,
) -> Result<(), StoreError> {
    let folder = match super::folder(source) {
        Ok(f) => f,
        Err(why) => {
            report.errors.push(why);
            return Ok(());
        }
    };
    let listing = match files::list(folder.as_ref()) {
        Ok(l) => l,
        Err(why) => {
            report.errors.push(why);
            return Ok(());
        }
    };
    report.files_excluded = listing.excluded;
    report.errors.extend(listing.errors);
    let stored = pool.read(|s| s.bill_files(&source.name))?;
    // Every cloud's: a FOCUS file may hold several providers' rows.
    let mut tables = Vec::with_capacity(BillProvider::ALL.len());
    for provider in BillProvider::ALL {
        let (types, skus) = pool.read(|s| s.gpu_catalog(provider.as_str()))?;
        tables.push(GpuTypes::new(provider, &types, &skus));
    }
    let gpus = GpuTables::new(tables);

    let present: BTreeSet<&str> = listing.files.iter().map(|f| f.rel.as_str()).collect();
    let removed: Vec<String> = stored
        .keys()
        .filter(|p| !present.contains(p.as_str()))
        .cloned()
        .collect();
    let (changed, unchanged): (Vec<&DataFile>, Vec<&DataFile>) =
        listing.files.iter().partition(|f| {
            stored
                .get(&f.rel)
                .is_none_or(|r| r.fingerprint != f.fingerprint)
        });

    let mut agg = Aggregator::new(source, &gpus);
    let mut held: BTreeMap<String, BTreeSet<PeriodKey>> = BTreeMap::new();
    let mut failed: BTreeMap<PeriodKey, String> = BTreeMap::new();
    let mut affected: BTreeSet<PeriodKey> = BTreeSet::new();
    for path in &removed {
        affected.extend(stored[path].periods.iter().cloned());
    }
    let mut read_one = |file: &DataFile,
                        held: &mut BTreeMap<String, BTreeSet<PeriodKey>>,
                        affected: &mut BTreeSet<PeriodKey>,
                        report: &mut SourceReport| {
        report.files_read += 1;
        let (mut seen, result) = read_file(source, &gpus, folder.as_ref(), file, &mut agg, tally);
        if let Some(r) = stored.get(&file.rel) {
            seen.extend(r.periods.iter().cloned());
        }
        if let Err(e) = result {
            tracing::warn!(file = %file.rel, error = %e, "Bill file failed.");
            if seen.is_empty() {
                report.errors.push(e.to_string());
            }
            for key in &seen {
                failed.entry(key.clone()).or_insert_with(|| e.to_string());
            }
        }
        affected.extend(seen.iter().cloned());
        held.insert(file.rel.clone(), seen);
    };
    Tally::add(&tally.files, changed.len() as u64);
    for file in &changed {
        read_one(file, &mut held, &mut affected, report);
    }
    // An unchanged file read again brings all its periods into the load,
    // and with them the other files of those periods: close over that
    // before reading, so no period is written from part of its files.
    loop {
        let before = affected.len();
        for file in &unchanged {
            let periods = &stored[&file.rel].periods;
            if periods.iter().any(|p| affected.contains(p)) {
                affected.extend(periods.iter().cloned());
            }
        }
        if affected.len() == before {
            break;
        }
    }
    for file in &unchanged {
        let touches = stored[&file.rel]
            .periods
            .iter()
            .any(|p| affected.contains(p));
        if touches {
            Tally::add(&tally.files, 1);
            read_one(file, &mut held, &mut affected, report);
        } else {
            report.files_skipped += 1;
        }
    }

    let periods = agg.finish();
    let mut written: BTreeSet<PeriodKey> = BTreeSet::new();
    for data in &periods {
        let key = (data.billing_account.clone(), data.period.clone());
        if !affected.contains(&key) {
            continue;
        }
        if let Some(error) = failed.remove(&key) {
            report.periods.push(PeriodOutcome::failed(key, error));
            continue;
        }
        let state = state_of(now.timestamp(), data.period_end, source.grace_days);
        let write = pool.write_fenced(fence, |s| {
            s.write_bill_period(&source.name, data, state, now)
        });
        match write {
            Ok(w) => {
                Tally::add(&tally.periods, 1);
                for (t, n) in &data.unmapped {
                    *report.unmapped.entry(t.clone()).or_default() += n;
                }
                report.periods.push(PeriodOutcome {
                    billing_account: key.0.clone(),
                    billing_period: key.1.clone(),
                    result: match w.result {
                        LoadResult::Loaded => "loaded",
                        LoadResult::Unchanged => "unchanged",
                        LoadResult::Updated => "updated",
                        LoadResult::Restated => "restated",
                    }
                    .to_owned(),
                    generation: Some(w.generation),
                    rows: data.rows,
                    gpu_rows: data.gpu_rows,
                    deltas: (w.result == LoadResult::Restated)
                        .then_some(w.deltas)
                        .flatten(),
                    error: None,
                });
                written.insert(key);
            }
            Err(e @ StoreError::Fenced { .. }) => return Err(e),
            Err(e) => report
                .periods
                .push(PeriodOutcome::failed(key, e.to_string())),
        }
    }
    // Periods a failed file held that no good row reached.
    for (key, error) in failed {
        report.periods.push(PeriodOutcome::failed(key, error));
    }
    // A file is recorded as read only when every period it holds is stored
    // as it is now; otherwise the next load reads it again.
    let by_path: BTreeMap<&str, &DataFile> =
        listing.files.iter().map(|f| (f.rel.as_str(), f)).collect();
    let records: Vec<(String, FileRecord)> = held
        .into_iter()
        .filter(|(_, periods)| !periods.is_empty() && periods.iter().all(|p| written.contains(p)))
        .filter_map(|(path, periods)| {
            let file = by_path.get(path.as_str())?;
            Some((
                path,
                FileRecord {
                    fingerprint: file.fingerprint.clone(),
                    periods: periods.into_iter().collect(),
                },
            ))
        })
        .collect();
    pool.write_fenced(fence, |s| {
        s.record_bill_files(&source.name, &records, &removed, now)
    })?;
    // Every load reports the unmapped types of the source's periods
    // (docs/bills.md), also of those it did not read again.
    for load in pool.read(|s| s.bill_loads(Some(&source.name)))? {
        if !affected.contains(&(load.billing_account, load.billing_period)) {
            for (t, n) in load.unmapped {
                *report.unmapped.entry(t).or_default() += n;
            }
        }
    }
    report.periods.sort_by(|a, b| {
        (&a.billing_account, &a.billing_period).cmp(&(&b.billing_account, &b.billing_period))
    });
    Ok(())
}

/// The duty of loading a bill source, among replicas.
#[must_use]
pub fn duty(source: &str) -> String {
    format!("bills:{source}")
}

/// One stored period as `bills status` shows it, its state as of now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatusRow {
    pub source: String,
    pub billing_account: String,
    pub billing_period: String,
    pub state: String,
    pub generation: i64,
    pub rows: i64,
    pub gpu_rows: i64,
    /// The sums in the period's main currency; others are listed apart.
    pub billed_cost: f64,
    pub effective_cost: f64,
    pub currency: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_currencies: Vec<crate::bills::aggregate::Total>,
    pub gpu_hours: f64,
    pub loaded_at: String,
    pub checked_at: String,
    pub restatements: Vec<crate::store::bills::Restatement>,
    /// Rows billed later that correct this period.
    pub corrections: Vec<crate::store::bills::CorrectionRow>,
    /// Rows billed in this period that correct earlier ones (each also
    /// listed under the period it corrects, when that one is loaded).
    pub corrects: Vec<crate::store::bills::CorrectionRow>,
    pub unmapped: BTreeMap<String, u64>,
}

/// Shapes stored periods for `bills status`; `grace` gives each configured
/// source's grace days (others keep the state of their last load).
#[must_use]
pub fn status_rows(
    loads: Vec<crate::store::bills::StoredLoad>,
    grace: &BTreeMap<String, u32>,
    now: DateTime<Utc>,
) -> Vec<StatusRow> {
    loads
        .into_iter()
        .map(|l| {
            let state = grace.get(&l.source).map_or(l.state.clone(), |g| {
                state_of(now.timestamp(), l.period_end, *g).to_owned()
            });
            let mut totals = l.totals;
            totals.sort_by(|a, b| b.rows.cmp(&a.rows).then(a.currency.cmp(&b.currency)));
            let main = if totals.is_empty() {
                crate::bills::aggregate::Total::default()
            } else {
                totals.remove(0)
            };
            StatusRow {
                source: l.source,
                billing_account: l.billing_account,
                billing_period: l.billing_period,
                state,
                generation: l.generation,
                rows: l.rows,
                gpu_rows: l.gpu_rows,
                billed_cost: main.billed_cost,
                effective_cost: main.effective_cost,
                currency: main.currency,
                other_currencies: totals,
                gpu_hours: l.gpu_hours,
                loaded_at: l.loaded_at,
                checked_at: l.checked_at,
                restatements: l.restatements,
                corrections: l.corrections,
                corrects: l.corrects,
                unmapped: l.unmapped,
            }
        })
        .collect()
}
