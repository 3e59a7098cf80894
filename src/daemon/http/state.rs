//! What the HTTP API and the dashboard share: the handlers' state, the
//! catalog cache, reads off the async runtime and the token comparison. Both
//! import from here (and the error answer and query parameters from their
//! own files); neither imports the other, and `http` puts their routes
//! together.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use axum::body::Bytes;
use chrono::Utc;
use gpuplan_providers::secret::Secret;
use gpuplan_providers::{PriceKind, PriceScope};
use tokio::sync::Notify;

use crate::catalog::{self, Freshness, PriceFilter};
use crate::config::FxRates;
use crate::daemon::metrics::Metrics;
use crate::plan::PlanService;
use crate::store::{Generation, Pool, PricePart, StoreError};

use super::error::ApiError;
use super::history::KeptHistory;
use super::params::Params;

/// What the handlers share.
pub struct AppState {
    pub pool: Arc<Pool>,
    pub metrics: Arc<Metrics>,
    /// Per source: the trigger that makes it sync now.
    pub triggers: BTreeMap<String, Arc<Notify>>,
    /// Per source: its sync interval, for staleness.
    pub intervals: BTreeMap<String, Duration>,
    pub token: Option<Secret>,
    /// Whether the listener is on loopback: then `Host` must name loopback.
    pub loopback: bool,
    pub cache: Arc<Mutex<CatalogCache>>,
    /// Plans are made here, on its capped solver pool.
    pub planning: Arc<PlanService>,
    /// Rates for showing prices in another currency.
    pub fx: FxRates,
    /// The alert rules, for the dashboard to list.
    pub rules: Vec<crate::alerts::rules::Rule>,
    /// This replica's duties, for `GET /v1/cluster`.
    pub cluster: Arc<crate::daemon::duties::Cluster>,
    /// Grace days of each bill source, for the state of its periods.
    pub bill_grace: BTreeMap<String, u32>,
    /// Budgets, bill sources and allocation, for `/v1/budgets` and `/v1/spend`.
    pub bills: crate::bills::budgets::BillsSetup,
}

#[cfg(test)]
impl AppState {
    /// A daemon's state on `pool` with the default configuration, no
    /// source and no token.
    pub(crate) fn for_tests(pool: Arc<Pool>) -> Self {
        let config = crate::config::Config::default();
        Self {
            pool: pool.clone(),
            cluster: crate::daemon::duties::Cluster::new(pool.clone()),
            metrics: Arc::default(),
            triggers: BTreeMap::new(),
            intervals: BTreeMap::new(),
            token: None,
            loopback: true,
            cache: Arc::default(),
            planning: Arc::new(PlanService::new(
                Some(pool),
                &config.planner,
                BTreeMap::new(),
            )),
            fx: config.fx.clone(),
            rules: Vec::new(),
            bill_grace: BTreeMap::new(),
            bills: crate::bills::budgets::BillsSetup::default(),
        }
    }
}

/// The largest request body read: a problem with the most offers and the
/// longest horizon the optimizer takes fits in well under this.
pub const MAX_BODY_BYTES: usize = 4 << 20;

/// Compares a presented token with ours in time independent of where they differ.
pub(crate) fn token_matches(given: &str, token: &Secret) -> bool {
    constant_time_eq(given.as_bytes(), token.expose().as_bytes())
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// What the API remembers between requests for one state of the catalog, which
/// [`crate::store::Store::catalog_generation`] identifies exactly, whichever
/// process wrote it, within [`ANSWERS_BUDGET_BYTES`] and
/// [`RECORDS_BUDGET_BYTES`]: when an entry would pass its budget, the least
/// recently used of its kind go (see [`Slot::evicted_to`]).
#[derive(Default)]
pub struct CatalogCache {
    generation: Option<Generation>,
    last_good: BTreeMap<String, chrono::DateTime<Utc>>,
    entries: HashMap<(Slot, RecordsKey), Entry>,
    /// Bytes kept of answers, records and history (see [`Slot::class`]).
    cached_bytes: [usize; 3],
    /// Counts uses, to tell the least recently used entries.
    clock: u64,
    /// Records being read, so that requests that miss together wait for
    /// one read instead of each reading the same records.
    reading: HashMap<(Slot, RecordsKey), Arc<Mutex<()>>>,
    /// The cheapest prices of a time before now, by how long before.
    past: PastCheapest,
    /// The current spot prices last read, which the next read patches.
    spot_base: Option<SpotBase>,
}

/// An order of [`Records::all`] (see [`ranked`]), kept under the addresses
/// of the parts it was computed from: a part is never changed, and its
/// address is not reused while a weak pointer to it is held.
struct Rank {
    list: Weak<Part>,
    spot: Weak<Part>,
    order: Arc<[u32]>,
}

/// Current spot records and what they were read for.
#[derive(Clone)]
struct SpotBase {
    /// The sources stale when they were read: their records say so.
    stale: Vec<String>,
    list_prices: i64,
    last_good: BTreeMap<String, chrono::DateTime<Utc>>,
    /// The [`Generation::spot`] read before the records.
    spot: i64,
    part: Arc<Part>,
}

/// The cheapest prices of a time before now (24 h, 7 d), each as read for
/// a minute. A time before now reads the same whatever a sync adds later,
/// so they outlive every sync. When the minute turns, the last minute's stay
/// in use while one thread reads the new minute's: on a whole market that
/// read takes a second or more, and no request should wait for it.
#[derive(Default)]
struct PastCheapest {
    kept: HashMap<i64, Past>,
}

struct Past {
    minute: i64,
    cheapest: Arc<catalog::Cheapest>,
    refreshing: bool,
}

/// What [`PastCheapest::lookup`] found.
enum Lookup {
    Current(Arc<catalog::Cheapest>),
    /// An earlier minute's, to use while the caller reads the new minute's.
    Refresh(Arc<catalog::Cheapest>),
    /// An earlier minute's while another thread reads the new one.
    Earlier(Arc<catalog::Cheapest>),
    Missing,
}

/// How old an earlier minute's cheapest prices may be and still be shown
/// while the new minute's are read: older, a request waits for the read.
const PAST_STAYS_MINUTES: i64 = 10;

/// The times before now the overview compares the cheapest prices with.
pub(crate) const COMPARED: [chrono::TimeDelta; 2] =
    [chrono::TimeDelta::hours(24), chrono::TimeDelta::days(7)];

/// How often the daemon reads the cheapest prices of [`COMPARED`] whether
/// or not anyone asks: within [`PAST_STAYS_MINUTES`], so that a request
/// always finds some to answer with.
const PAST_READ_EVERY: Duration = Duration::from_secs(5 * 60);

impl PastCheapest {
    fn lookup(&mut self, back_secs: i64, minute: i64) -> Lookup {
        match self.kept.get_mut(&back_secs) {
            // A request that read the clock before the newest minute was kept
            // takes that minute's too.
            Some(p) if p.minute >= minute => Lookup::Current(p.cheapest.clone()),
            Some(p) if (0..=PAST_STAYS_MINUTES).contains(&(minute - p.minute)) => {
                if p.refreshing {
                    Lookup::Earlier(p.cheapest.clone())
                } else {
                    p.refreshing = true;
                    Lookup::Refresh(p.cheapest.clone())
                }
            }
            _ => Lookup::Missing,
        }
    }

    /// Keeps what was read for `minute`, unless a later minute's is kept.
    fn keep(&mut self, back_secs: i64, minute: i64, cheapest: Arc<catalog::Cheapest>) {
        if self.kept.get(&back_secs).is_some_and(|p| p.minute > minute) {
            return;
        }
        self.kept.insert(
            back_secs,
            Past {
                minute,
                cheapest,
                refreshing: false,
            },
        );
    }

    /// A read of a new minute failed: the next request tries again.
    fn failed(&mut self, back_secs: i64) {
        if let Some(p) = self.kept.get_mut(&back_secs) {
            p.refreshing = false;
        }
    }
}

/// A question (a query string, say) and the sources stale when it was asked.
type RecordsKey = (String, Vec<String>);

/// What an entry holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Slot {
    /// An encoded `/v1/prices` answer.
    Answer,
    /// List-price records the dashboard asked for: kept while only spot
    /// prices change.
    List,
    /// Spot records the dashboard asked for.
    Spot,
    /// Spot history one question read (see [`KeptHistory`]).
    History,
    /// An encoded spot-history answer, keyed by the state it answers for,
    /// which a prune before its window does not change (see
    /// [`spot_history_answer`]).
    HistoryAnswer,
    /// An order of current records a table sorts by (see [`ranked`]).
    Rank,
}

impl Slot {
    /// Answers, records and spot history have budgets of their own: the
    /// answers to distinct questions must not push out the one copy of the
    /// catalog, nor a long window of history they all trim.
    fn class(self) -> usize {
        match self {
            Self::Answer | Self::HistoryAnswer => 0,
            Self::List | Self::Spot | Self::Rank => 1,
            Self::History => 2,
        }
    }

    fn budget(self) -> usize {
        match self {
            Self::Answer | Self::HistoryAnswer => ANSWERS_BUDGET_BYTES,
            Self::List | Self::Spot | Self::Rank => RECORDS_BUDGET_BYTES,
            Self::History => HISTORY_BUDGET_BYTES,
        }
    }

    /// How many bytes of `budget` this kind keeps at most, with the entry
    /// being kept, once it has passed the budget. Answers and history are
    /// many entries: half the budget goes at once, so that a full cache
    /// does not sort them on every entry. Records are the catalog's copy,
    /// whose list part alone is most of their budget on a whole market:
    /// freeing half would drop it whenever the parts of two states of the
    /// catalog overlap (a request that read the state before a commit keeps
    /// its records after one that read the state after it), and reading it
    /// again takes a second; they go only until the entry fits.
    fn evicted_to(self, budget: usize) -> usize {
        match self {
            Self::List | Self::Spot | Self::Rank => budget,
            Self::Answer | Self::HistoryAnswer | Self::History => budget / 2,
        }
    }
}

#[derive(Clone)]
enum Value {
    Answer(Bytes),
    Records(Arc<Part>),
    History(Arc<KeptHistory>),
    Rank(Arc<Rank>),
}

/// Records as kept, each with its JSON once an answer has sent it: a
/// filter that is asked for the first time then costs the filter and the
/// copying of bytes, not the encoding of every record it matches again.
pub(crate) struct Part {
    /// Shared with the part this one was patched from: a spot sync replaces
    /// the records of the series it touched, and the others keep their JSON.
    kept: Vec<Arc<Kept>>,
    /// Where each GPU model's records are: most questions name a GPU, and
    /// one model is a fortieth of a market.
    by_gpu: HashMap<String, Model>,
}

/// The positions of one GPU model's records in a part.
struct Model {
    at: Vec<usize>,
    /// `at` in the catalog's order, sorted the first time the model is
    /// asked for: an answer then merges sorted runs instead of sorting
    /// thousands of records each time.
    in_order: OnceLock<Box<[usize]>>,
}

/// A record, and its JSON once an answer has sent it.
struct Kept {
    record: catalog::CatalogRecord,
    json: OnceLock<Box<[u8]>>,
}

impl Part {
    fn new(records: Vec<catalog::CatalogRecord>) -> Self {
        Self::of(records.into_iter().map(Kept::new).collect())
    }

    fn of(kept: Vec<Arc<Kept>>) -> Self {
        let mut by_gpu: HashMap<String, Model> = HashMap::new();
        for (i, k) in kept.iter().enumerate() {
            match by_gpu.get_mut(&k.record.gpu_model) {
                Some(model) => model.at.push(i),
                None => {
                    let model = Model {
                        at: vec![i],
                        in_order: OnceLock::new(),
                    };
                    by_gpu.insert(k.record.gpu_model.clone(), model);
                }
            }
        }
        Self { kept, by_gpu }
    }

    fn record(&self, i: usize) -> &catalog::CatalogRecord {
        &self.kept[i].record
    }

    fn records(&self) -> impl Iterator<Item = &catalog::CatalogRecord> {
        self.kept.iter().map(|k| &k.record)
    }

    /// This part of spot prices with the series spot writes numbered past
    /// `after` touched read again: their records replaced, and the records
    /// of series it did not hold added.
    fn patched(
        &self,
        store: &dyn crate::store::Store,
        fresh: &Freshness,
        after: i64,
    ) -> Result<Self, StoreError> {
        fn series(r: &catalog::CatalogRecord) -> (&str, Option<&str>, &str) {
            (&r.provider, r.zone.as_deref(), &r.instance_type)
        }
        let at: HashMap<_, usize> = self
            .records()
            .enumerate()
            .map(|(i, r)| (series(r), i))
            .collect();
        let changed = catalog::spot_changed_after(store, fresh, after, |q| {
            let key = (
                q.provider.as_str(),
                q.zone.as_deref(),
                q.instance_type.as_str(),
            );
            at.get(&key).map(|&i| self.record(i))
        })?;
        let mut kept = self.kept.clone();
        for record in changed {
            match at.get(&series(&record)).copied() {
                Some(i) => kept[i] = Kept::new(record),
                None => kept.push(Kept::new(record)),
            }
        }
        Ok(Self::of(kept))
    }

    /// Where the records matching `filter` are: in the catalog's order when
    /// it names a GPU, else in the part's order.
    fn matching(&self, filter: &PriceFilter) -> Vec<usize> {
        if filter.gpus.is_empty() {
            let mut found: Vec<usize> = (0..self.kept.len()).collect();
            if !filter.is_empty() {
                found.retain(|&i| filter.matches(self.record(i)));
            }
            return found;
        }
        let mut found = Vec::new();
        let mut models = 0;
        for (name, model) in &self.by_gpu {
            if filter.gpus.iter().any(|g| catalog::gpu_matches(name, g)) {
                found.extend_from_slice(model.in_order(self));
                models += 1;
            }
        }
        if models > 1 {
            self.sort(&mut found);
        }
        // Every record found has a GPU asked for: the rest of the filter
        // is checked on each.
        let rest = PriceFilter {
            gpus: Vec::new(),
            ..filter.clone()
        };
        if !rest.is_empty() {
            found.retain(|&i| rest.matches(self.record(i)));
        }
        found
    }

    /// Sorts positions of this part in the catalog's order. A stable sort:
    /// runs already in order, as each model's are, are merged, not sorted.
    fn sort(&self, positions: &mut [usize]) {
        positions.sort_by(|&i, &j| catalog::catalog_order(self.record(i), self.record(j)));
    }

    /// Record `i`'s JSON, encoded the first time it is asked for.
    fn json(&self, i: usize) -> Result<&[u8], serde_json::Error> {
        let kept = &self.kept[i];
        if let Some(done) = kept.json.get() {
            return Ok(done);
        }
        let encoded = serde_json::to_vec(&kept.record)?.into_boxed_slice();
        // Another request may have encoded it meanwhile: the same bytes.
        Ok(kept.json.get_or_init(|| encoded))
    }
}

impl Model {
    fn in_order(&self, part: &Part) -> &[usize] {
        self.in_order.get_or_init(|| {
            let mut at = self.at.clone();
            part.sort(&mut at);
            at.into_boxed_slice()
        })
    }
}

impl Kept {
    fn new(record: catalog::CatalogRecord) -> Arc<Self> {
        Arc::new(Self {
            record,
            json: OnceLock::new(),
        })
    }
}

struct Entry {
    value: Value,
    bytes: usize,
    used: u64,
}

/// What one cached record is counted as against the budget: the record
/// (688 bytes today), about 300 bytes of its strings and about 800
/// of its JSON once an answer has sent it.
const RECORD_BYTES: usize = std::mem::size_of::<catalog::CatalogRecord>()
    + std::mem::size_of::<OnceLock<Box<[u8]>>>()
    + 1100;

impl CatalogCache {
    /// Forgets what `generation` makes out of date: everything when list
    /// prices moved, else all but the list-price records and spot history,
    /// and spot-history answers too when only prunes of spot history came
    /// between.
    fn follow(&mut self, generation: Generation) {
        let list_moved = self
            .generation
            .is_none_or(|g| g.list_prices != generation.list_prices);
        let only_pruned = self.generation.is_some_and(|g| {
            !list_moved && g.data - g.spot_prunes == generation.data - generation.spot_prunes
        });
        self.entries
            .retain(|(slot, _), entry| match (slot, &entry.value) {
                // Spot history says which state it holds (see
                // `spot_history_answer`): a read that later spot writes only
                // appended to is extended instead of read again.
                (Slot::List | Slot::History, _) => !list_moved,
                // Each names the state it answers for: one whose window a
                // prune left as it was answers for the pruned state too.
                (Slot::HistoryAnswer, _) => only_pruned,
                // Orders outlive a change that left their records as they were.
                (Slot::Rank, Value::Rank(rank)) => {
                    rank.list.strong_count() > 0 && rank.spot.strong_count() > 0
                }
                _ => false,
            });
        self.cached_bytes = [0; 3];
        for ((slot, _), e) in &self.entries {
            self.cached_bytes[slot.class()] += e.bytes;
        }
        self.generation = Some(generation);
    }

    fn get(&mut self, slot: Slot, key: &RecordsKey) -> Option<Value> {
        self.clock += 1;
        let entry = self.entries.get_mut(&(slot, key.clone()))?;
        entry.used = self.clock;
        Some(entry.value.clone())
    }

    fn keep(&mut self, slot: Slot, key: RecordsKey, value: Value, bytes: usize) {
        self.keep_within(slot, key, value, bytes, slot.budget());
    }

    fn keep_within(
        &mut self,
        slot: Slot,
        key: RecordsKey,
        value: Value,
        bytes: usize,
        budget: usize,
    ) {
        let class = slot.class();
        if self.cached_bytes[class] + bytes > budget {
            let mut by_use: Vec<(u64, (Slot, RecordsKey))> = self
                .entries
                .iter()
                .filter(|((s, _), _)| s.class() == class)
                .map(|(k, e)| (e.used, k.clone()))
                .collect();
            by_use.sort_unstable_by_key(|(used, _)| *used);
            for (_, k) in by_use {
                if self.cached_bytes[class] + bytes <= slot.evicted_to(budget) {
                    break;
                }
                if let Some(gone) = self.entries.remove(&k) {
                    self.cached_bytes[class] -= gone.bytes;
                }
            }
        }
        self.clock += 1;
        let entry = Entry {
            value,
            bytes,
            used: self.clock,
        };
        if let Some(old) = self.entries.insert((slot, key), entry) {
            self.cached_bytes[class] -= old.bytes;
        }
        self.cached_bytes[class] += bytes;
    }

    /// A cached `/v1/prices` answer.
    pub(crate) fn answer(&mut self, key: &RecordsKey) -> Option<Bytes> {
        self.body(Slot::Answer, key)
    }

    fn body(&mut self, slot: Slot, key: &RecordsKey) -> Option<Bytes> {
        match self.get(slot, key)? {
            Value::Answer(body) => Some(body),
            Value::Records(_) | Value::History(_) | Value::Rank(_) => None,
        }
    }

    /// Keeps a `/v1/prices` answer.
    pub(crate) fn keep_answer(&mut self, key: RecordsKey, body: Bytes) {
        let bytes = body.len();
        self.keep(Slot::Answer, key, Value::Answer(body), bytes);
    }

    fn records(&mut self, slot: Slot, key: &RecordsKey) -> Option<Arc<Part>> {
        match self.get(slot, key)? {
            Value::Records(records) => Some(records),
            Value::Answer(_) | Value::History(_) | Value::Rank(_) => None,
        }
    }

    /// The spot history a question last read, in whatever state.
    fn history(&mut self, key: &RecordsKey) -> Option<Arc<KeptHistory>> {
        match self.get(Slot::History, key)? {
            Value::History(kept) => Some(kept),
            Value::Answer(_) | Value::Records(_) | Value::Rank(_) => None,
        }
    }

    fn rank(&mut self, key: &RecordsKey) -> Option<Arc<[u32]>> {
        match self.get(Slot::Rank, key)? {
            Value::Rank(rank) => Some(rank.order.clone()),
            Value::Answer(_) | Value::Records(_) | Value::History(_) => None,
        }
    }
}

/// Records the dashboard and the API asked for: list prices and spot
/// prices, each as read for its own state of the catalog.
pub(crate) struct Records {
    list: Arc<Part>,
    spot: Arc<Part>,
}

impl Records {
    /// Every record, list prices first, in no particular order: what the
    /// positions of [`ranked`] orders count.
    pub(crate) fn all(&self) -> impl Iterator<Item = &catalog::CatalogRecord> {
        self.list.records().chain(self.spot.records())
    }

    /// The record at `position` of [`Records::all`].
    pub(crate) fn at(&self, position: u32) -> &catalog::CatalogRecord {
        let i = position as usize;
        match i.checked_sub(self.list.kept.len()) {
            None => self.list.record(i),
            Some(i) => self.spot.record(i),
        }
    }

    /// The records matching `filter`, list prices first, in no particular
    /// order.
    pub(crate) fn filtered(
        &self,
        filter: &PriceFilter,
    ) -> impl Iterator<Item = &catalog::CatalogRecord> {
        [&*self.list, &*self.spot]
            .into_iter()
            .flat_map(|part| part.matching(filter).into_iter().map(|i| part.record(i)))
    }

    /// Where each record matching `filter` is, in the catalog's order: a
    /// stable sort, which merges the parts' answers when they come in order.
    fn matching(&self, filter: &PriceFilter) -> Vec<(&Part, usize)> {
        let mut found: Vec<(&Part, usize)> = [&*self.list, &*self.spot]
            .into_iter()
            .flat_map(|part| part.matching(filter).into_iter().map(move |i| (part, i)))
            .collect();
        found.sort_by(|(a, i), (b, j)| catalog::catalog_order(a.record(*i), b.record(*j)));
        found
    }

    /// The records matching `filter`, in the catalog's order: what
    /// [`catalog::prices`] reads from the store.
    pub(crate) fn prices(&self, filter: &PriceFilter) -> Vec<catalog::CatalogRecord> {
        self.matching(filter)
            .into_iter()
            .map(|(part, i)| part.record(i).clone())
            .collect()
    }

    /// [`Records::prices`] as a JSON array, from each record's kept JSON.
    ///
    /// # Errors
    /// When a record cannot be encoded.
    pub(crate) fn prices_json(&self, filter: &PriceFilter) -> Result<Vec<u8>, serde_json::Error> {
        let found = self.matching(filter);
        let mut out = Vec::with_capacity(2 + found.len() * 800);
        out.push(b'[');
        for (n, (part, i)) in found.into_iter().enumerate() {
            if n > 0 {
                out.push(b',');
            }
            out.extend_from_slice(part.json(i)?);
        }
        out.push(b']');
        Ok(out)
    }
}

/// Records computed with `compute` (called with the part of the prices it
/// is to read), from the cache while that part is unchanged. `key` names the
/// question; which sources are stale is added to it, as their records say so.
///
/// # Errors
/// What `compute` fails with.
fn cached_records(
    fresh: &Freshness,
    cache: &Mutex<CatalogCache>,
    (key, generation): (&str, Generation),
    (list, spot): (Slot, Slot),
    compute: impl Fn(PricePart, &RecordsKey) -> Result<Arc<Part>, StoreError>,
) -> Result<Records, StoreError> {
    let stale = fresh.stale_sources();
    let part = |part: PricePart, slot: Slot| {
        // Keyed by the state of the catalog the caller saw, so that nobody
        // takes records read before a commit it has seen: a slow read that
        // started earlier is neither waited for nor used.
        let stamp = match slot {
            Slot::List => generation.list_prices,
            _ => generation.data,
        };
        let key = (format!("{key}@{stamp}"), stale.clone());
        kept_or_read(
            cache,
            (slot, key),
            |cache, key| cache.records(slot, key),
            |key| {
                let records = compute(part, key)?;
                let bytes = records.kept.len() * RECORD_BYTES;
                Ok((records.clone(), Value::Records(records), bytes))
            },
        )
    };
    Ok(Records {
        list: part(PricePart::List, list)?,
        spot: part(PricePart::Spot, spot)?,
    })
}

/// An order of `records` (positions in [`Records::all`]) that `rank` puts
/// them in, computed once for these records and kept while they are the
/// current ones: a table sorted the same way again, on any page and with
/// any filter, walks the order instead of sorting the whole market.
///
/// # Errors
/// None: the order is computed, not read.
pub(crate) fn ranked(
    cache: &Mutex<CatalogCache>,
    records: &Records,
    key: &str,
    rank: impl FnOnce(&Records) -> Vec<u32>,
) -> Result<Arc<[u32]>, StoreError> {
    let (list, spot) = (Arc::as_ptr(&records.list), Arc::as_ptr(&records.spot));
    kept_or_read(
        cache,
        (Slot::Rank, (format!("{key}@{list:p}+{spot:p}"), Vec::new())),
        CatalogCache::rank,
        |_| {
            let order: Arc<[u32]> = rank(records).into();
            let rank = Rank {
                list: Arc::downgrade(&records.list),
                spot: Arc::downgrade(&records.spot),
                order: order.clone(),
            };
            let bytes = std::mem::size_of_val(&*order);
            Ok((order, Value::Rank(Arc::new(rank)), bytes))
        },
    )
}

/// What `cache` keeps under `key` in `slot`, as `take` finds it there, else
/// what `read` reads, kept (as a value of `bytes`): requests that miss
/// together wait for one read instead of each reading the same.
///
/// # Errors
/// What `read` fails with; a failed read is not kept.
fn kept_or_read<T>(
    cache: &Mutex<CatalogCache>,
    (slot, key): (Slot, RecordsKey),
    take: impl Fn(&mut CatalogCache, &RecordsKey) -> Option<T>,
    read: impl FnOnce(&RecordsKey) -> Result<(T, Value, usize), StoreError>,
) -> Result<T, StoreError> {
    let reading = {
        let mut cache = lock(cache);
        if let Some(hit) = take(&mut cache, &key) {
            return Ok(hit);
        }
        cache
            .reading
            .entry((slot, key.clone()))
            .or_default()
            .clone()
    };
    let _turn = reading
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Whoever read before us while we waited has kept what we need.
    if let Some(hit) = take(&mut lock(cache), &key) {
        return Ok(hit);
    }
    let read = read(&key);
    let mut cache = lock(cache);
    cache.reading.remove(&(slot, key.clone()));
    let (found, value, bytes) = read?;
    cache.keep(slot, key, value, bytes);
    Ok(found)
}

/// The answer to `q` as JSON: from the spot history its question last read,
/// trimmed to `q`'s window, when that read holds the state `generation` the
/// caller read before any of it; else that read extended by what spot
/// writes appended since, when they only appended; else read and kept.
/// The answer itself is kept for the same question, window and `now` in
/// the same state, or one that since pruned only what is older than the
/// window.
///
/// # Errors
/// On a store error; `TooLarge` past `q.max_observations`.
pub(crate) fn spot_history_answer(
    store: &dyn crate::store::Store,
    fresh: &Freshness,
    cache: &Mutex<CatalogCache>,
    generation: Generation,
    q: &catalog::SpotQuery,
) -> Result<Bytes, StoreError> {
    let question = [&q.provider, &q.region, &q.zone]
        .iter()
        .fold(q.instance_type.clone(), |key, part| {
            format!("{key}\n{}", part.as_deref().unwrap_or("\u{0}"))
        });
    // A prune of what is older than the window leaves the answer as it was:
    // keyed by the other changes alone, it outlives the prune's batches.
    let state = if generation.pruned_before(q.since) {
        format!("{}~", generation.data - generation.spot_prunes)
    } else {
        generation.data.to_string()
    };
    let answer = (
        format!(
            "spot-history\n{question}\n{}\n{}\n{:?}@{state}",
            q.since.timestamp_micros(),
            fresh.now.timestamp_micros(),
            q.max_observations,
        ),
        fresh.stale_sources(),
    );
    // Requests that miss together wait for one answer: each is megabytes
    // of statistics and copying, as the first after a sync is.
    let take = |cache: &mut CatalogCache, key: &RecordsKey| cache.body(Slot::HistoryAnswer, key);
    kept_or_read(cache, (Slot::HistoryAnswer, answer), take, |_| {
        let body =
            Bytes::from(history_answer(store, cache, generation, q, question)?.answer(q, fresh)?);
        let bytes = body.len();
        Ok((body.clone(), Value::Answer(body), bytes))
    })
}

/// The spot history `question` last read, for `q` in the state
/// `generation`: see [`spot_history_answer`].
fn history_answer(
    store: &dyn crate::store::Store,
    cache: &Mutex<CatalogCache>,
    generation: Generation,
    q: &catalog::SpotQuery,
    question: String,
) -> Result<Arc<KeptHistory>, StoreError> {
    kept_or_read(
        cache,
        (Slot::History, (question, Vec::new())),
        |cache, key| {
            cache
                .history(key)
                .filter(|k| k.holds(q.since) && k.is_current_in(generation))
        },
        |key| {
            let now = Utc::now();
            let earlier = lock(cache)
                .history(key)
                .filter(|k| k.holds(q.since) && k.extends_to(generation, now));
            let appended = match &earlier {
                // Only prunes before its window since: a prune's batches
                // ask nothing of the store.
                Some(k) if k.spot_writes() == generation.spot => Some(HashMap::new()),
                Some(k) => catalog::spot_series_appended(store, q, k.spot_writes(), &k.newest())?,
                None => None,
            };
            let encoded = match (earlier, appended) {
                (Some(k), Some(points)) => k.extended(&points, generation),
                _ => KeptHistory::new(catalog::spot_series(store, q)?, q.since, generation, now),
            };
            let kept = Arc::new(encoded.map_err(|e| StoreError::Corrupt(e.to_string()))?);
            let bytes = kept.bytes();
            Ok((kept.clone(), Value::History(kept), bytes))
        },
    )
}

/// Where current records are kept: list prices until they change, spot
/// prices until the next sync.
const NOW: (Slot, Slot) = (Slot::List, Slot::Spot);

/// Every current price record, as the dashboard filters them in memory: one
/// copy of the catalog, whatever the questions asked, its list prices read
/// again only when they changed. `generation` is the catalog's state the
/// caller read, before any of the records.
///
/// # Errors
/// On a store error.
pub(crate) fn current_records(
    store: &dyn crate::store::Store,
    fresh: &Freshness,
    state: &AppState,
    generation: Generation,
) -> Result<Records, StoreError> {
    cached_records(
        fresh,
        &state.cache,
        ("current", generation),
        NOW,
        |part, key| match part {
            PricePart::Spot => current_spot(store, fresh, &state.cache, &key.1, generation),
            _ => whole_part(store, fresh, part),
        },
    )
}

/// Every current record of `part`, read whole.
fn whole_part(
    store: &dyn crate::store::Store,
    fresh: &Freshness,
    part: PricePart,
) -> Result<Arc<Part>, StoreError> {
    let records = catalog::price_part_at(store, fresh, &PriceFilter::default(), None, part)?;
    Ok(Arc::new(Part::new(records)))
}

/// The current spot prices: the last ones read, with the series spot writes
/// touched since read again, while list prices, instance types and the
/// freshness of sources are as they were; else all of them.
fn current_spot(
    store: &dyn crate::store::Store,
    fresh: &Freshness,
    cache: &Mutex<CatalogCache>,
    stale: &[String],
    now: Generation,
) -> Result<Arc<Part>, StoreError> {
    // `now` was read before the records: whatever is written after it is
    // read again next time, so nothing written is missed.
    let base = lock(cache).spot_base.clone().filter(|b| {
        b.stale == stale
            && b.list_prices == now.list_prices
            && b.last_good == fresh.last_good
            && b.spot <= now.spot
    });
    let part = match base {
        Some(b) if b.spot == now.spot => b.part,
        Some(b) => Arc::new(b.part.patched(store, fresh, b.spot)?),
        None => whole_part(store, fresh, PricePart::Spot)?,
    };
    lock(cache).spot_base = Some(SpotBase {
        stale: stale.to_vec(),
        list_prices: now.list_prices,
        last_good: fresh.last_good.clone(),
        spot: now.spot,
        part: part.clone(),
    });
    Ok(part)
}

/// The cheapest instance price per (GPU model, price group) now, or `back`
/// before now. Now's is kept per catalog state, from [`current_records`]; a
/// time before now's per minute (see [`PastCheapest`]), so the overview and
/// each scrape of `/metrics` read the whole catalog of a time before now
/// once a minute at most, however often syncs commit, and wait for that read
/// only when nothing of the last minutes is kept.
///
/// # Errors
/// On a store error.
pub(crate) fn cheapest_at(
    store: &dyn crate::store::Store,
    (fresh, generation): (&Freshness, Generation),
    state: &AppState,
    back: Option<chrono::Duration>,
) -> Result<catalog::Cheapest, StoreError> {
    let Some(back) = back else {
        let current = current_records(store, fresh, state, generation)?;
        let filter = instances();
        let kept = cached_records(
            fresh,
            &state.cache,
            ("cheapest:now", generation),
            NOW,
            |part, _| {
                let records = match part {
                    PricePart::List => &current.list,
                    _ => &current.spot,
                };
                let instances = records.records().filter(|r| filter.matches(r));
                Ok(Arc::new(Part::new(
                    catalog::cheapest(instances).into_values().collect(),
                )))
            },
        )?;
        return Ok(catalog::cheapest(kept.filtered(&PriceFilter::default())));
    };
    let (secs, minute) = (back.num_seconds(), fresh.now.timestamp() / 60);
    let found = lock(&state.cache).past.lookup(secs, minute);
    match found {
        Lookup::Current(kept) | Lookup::Earlier(kept) => Ok((*kept).clone()),
        Lookup::Refresh(kept) => {
            let (pool, cache, fresh) = (state.pool.clone(), state.cache.clone(), fresh.clone());
            std::thread::spawn(move || {
                let read = pool.read(|store| cheapest_then(store, &fresh, back));
                let mut cache = lock(&cache);
                match read {
                    Ok(then) => cache.past.keep(secs, minute, Arc::new(then)),
                    Err(e) => {
                        tracing::warn!(error = %e, "reading the cheapest prices of {secs} s ago failed");
                        cache.past.failed(secs);
                    }
                }
            });
            Ok((*kept).clone())
        }
        Lookup::Missing => {
            let then = cheapest_then(store, fresh, back)?;
            lock(&state.cache)
                .past
                .keep(secs, minute, Arc::new(then.clone()));
            Ok(then)
        }
    }
}

/// Reads the cheapest prices of each time in [`COMPARED`] at start, then
/// every [`PAST_READ_EVERY`] until `cancel`: on a whole market each read
/// takes a second or more (several on PostgreSQL), which neither the first
/// view of the overview after a start nor one after ten quiet minutes
/// should wait for.
pub(crate) async fn keep_the_past(
    state: Arc<AppState>,
    cancel: tokio_util::sync::CancellationToken,
) {
    loop {
        let reading = state.clone();
        let read = tokio::task::spawn_blocking(move || read_the_past(&reading));
        tokio::select! {
            () = cancel.cancelled() => return,
            read = read => match read {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "Reading the past cheapest prices failed."),
                Err(e) => tracing::warn!(error = %e, "Reading the past cheapest prices stopped."),
            },
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(PAST_READ_EVERY) => {}
        }
    }
}

/// The cheapest prices of each time in [`COMPARED`], read now and kept for
/// this minute.
fn read_the_past(state: &AppState) -> Result<(), StoreError> {
    let _span = tracing::debug_span!("past_cheapest").entered();
    state.pool.read(|store| {
        let fresh = Freshness::read(store, state.intervals.clone(), Utc::now())?;
        let minute = fresh.now.timestamp() / 60;
        for back in COMPARED {
            let then = cheapest_then(store, &fresh, back)?;
            lock(&state.cache)
                .past
                .keep(back.num_seconds(), minute, Arc::new(then));
        }
        Ok(())
    })
}

/// Instance prices: what the cheapest compare.
fn instances() -> PriceFilter {
    PriceFilter {
        scopes: vec![PriceScope::Instance],
        ..PriceFilter::default()
    }
}

/// The cheapest instance prices as they stood `back` before now.
fn cheapest_then(
    store: &dyn crate::store::Store,
    fresh: &Freshness,
    back: chrono::Duration,
) -> Result<catalog::Cheapest, StoreError> {
    catalog::cheapest_as_of(store, fresh, &instances(), fresh.now - back)
}

/// Bytes of encoded answers kept at most, so distinct queries cannot grow
/// memory.
const ANSWERS_BUDGET_BYTES: usize = 16 << 20;

/// Bytes of spot history kept at most: a month of an instance type's history
/// in every zone of a whole market is about 2.5 MiB.
const HISTORY_BUDGET_BYTES: usize = 32 << 20;

/// Bytes of records kept at most: room for a whole-market catalog (about
/// 120,000 offers, 217 MB) and the cheapest prices beside it.
const RECORDS_BUDGET_BYTES: usize = 256 << 20;

// A record kept small (a per-work figure inline would double it), so that a
// whole market fits the budget.
const _: () = assert!(std::mem::size_of::<catalog::CatalogRecord>() <= 720);
const _: () = assert!(120_000 * RECORD_BYTES < RECORDS_BUDGET_BYTES * 9 / 10);

/// Runs a store read off the async runtime, with the catalog's freshness.
pub(crate) async fn read<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&dyn crate::store::Store, Freshness, &AppState) -> Result<T, StoreError>
    + Send
    + 'static,
) -> Result<T, ApiError> {
    read_in(state, move |store, fresh, state, _| f(store, fresh, state)).await
}

/// [`read`], with the catalog's state as read before its freshness: what
/// copies of the catalog and answers from them are kept by. One read of it
/// per request: on PostgreSQL each is a round trip.
pub(crate) async fn read_in<T: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&dyn crate::store::Store, Freshness, &AppState, Generation) -> Result<T, StoreError>
    + Send
    + 'static,
) -> Result<T, ApiError> {
    let state = state.clone();
    tokio::task::spawn_blocking(move || {
        state.pool.read(|store| {
            let generation = store.catalog_generation()?;
            let last_good = {
                let mut cache = lock(&state.cache);
                if cache.generation != Some(generation) {
                    cache.last_good = store.last_good_syncs()?;
                    cache.follow(generation);
                }
                cache.last_good.clone()
            };
            let fresh = Freshness::new(last_good, state.intervals.clone(), Utc::now());
            f(store, fresh, &state, generation)
        })
    })
    .await
    .map_err(|e| ApiError::internal(&e))?
    .map_err(ApiError::from)
}

pub(crate) fn lock(m: &Mutex<CatalogCache>) -> std::sync::MutexGuard<'_, CatalogCache> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The query parameters that filter prices, as `/v1/prices` and the
/// dashboard's price table take them.
pub(crate) const PRICE_FILTERS: &[&str] = &[
    "gpu",
    "provider",
    "region",
    "kind",
    "scope",
    "form_factor",
    "max_usd_per_gpu_hour",
    "country",
];

/// The filter [`PRICE_FILTERS`] describe.
///
/// # Errors
/// A 400 naming the parameter that is malformed.
pub(crate) fn price_filter(p: &Params) -> Result<PriceFilter, ApiError> {
    let scopes = p
        .all("scope")
        .iter()
        .map(|s| {
            s.parse::<PriceScope>()
                .map_err(|e| ApiError::bad_parameter("scope", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let kinds = p
        .all("kind")
        .iter()
        .map(|k| {
            k.parse::<PriceKind>()
                .map_err(|e| ApiError::bad_parameter("kind", e.to_string()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let form_factors = p
        .all("form_factor")
        .iter()
        .map(|f| {
            f.parse::<gpuplan_providers::FormFactor>()
                .map_err(|e| ApiError::bad_parameter("form_factor", e))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let max = p.parsed::<f64>("max_usd_per_gpu_hour", "a price in USD")?;
    if max.is_some_and(|m| !m.is_finite() || m < 0.0) {
        return Err(ApiError::bad_parameter(
            "max_usd_per_gpu_hour",
            "must be a number >= 0",
        ));
    }
    Ok(PriceFilter {
        gpus: p.all("gpu"),
        providers: p.all("provider"),
        regions: p.all("region"),
        kinds,
        scopes,
        form_factors,
        max_usd_per_gpu_hour: max,
        countries: p.all("country"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> RecordsKey {
        (name.to_owned(), Vec::new())
    }

    fn answer(n: usize) -> Value {
        Value::Answer(Bytes::from(vec![b'x'; n]))
    }

    #[test]
    fn an_order_is_kept_for_the_parts_it_was_computed_from() {
        let cache = Mutex::new(CatalogCache::default());
        let part = |prices: &[f64]| {
            Arc::new(Part::new(
                prices
                    .iter()
                    .map(|&p| catalog::test_record("aws", "H100-80GB", p))
                    .collect(),
            ))
        };
        let records = Records {
            list: part(&[3.0, 1.0]),
            spot: part(&[2.0]),
        };
        let computed = std::cell::Cell::new(0);
        let by_price = |r: &Records| {
            computed.set(computed.get() + 1);
            let mut at: Vec<u32> = (0..3).collect();
            at.sort_by(|&i, &j| r.at(i).usd_per_hour.total_cmp(&r.at(j).usd_per_hour));
            at
        };
        let order =
            |records: &Records, key: &str| ranked(&cache, records, key, by_price).unwrap().to_vec();
        assert_eq!(order(&records, "price"), [1, 2, 0]);
        assert_eq!(order(&records, "price"), [1, 2, 0]);
        assert_eq!(computed.get(), 1);
        // Another key, or another part, is another order.
        order(&records, "other");
        let patched = Records {
            list: records.list.clone(),
            spot: part(&[0.5]),
        };
        assert_eq!(order(&patched, "price"), [2, 1, 0]);
        assert_eq!(computed.get(), 3);
        // A change of the catalog keeps the orders of parts still in use.
        drop(records);
        lock(&cache).follow(Generation {
            data: 2,
            list_prices: 1,
            spot: 2,
            spot_prunes: 0,
            spot_pruned_before: 0,
        });
        assert_eq!(order(&patched, "price"), [2, 1, 0]);
        assert_eq!(computed.get(), 3);
        assert_eq!(lock(&cache).entries.len(), 1);
    }

    #[test]
    fn the_least_recently_used_go_first_until_half_the_budget_is_free() {
        let mut cache = CatalogCache::default();
        for name in ["a", "b", "c", "d"] {
            cache.keep_within(Slot::Answer, key(name), answer(25), 25, 100);
        }
        assert_eq!(cache.cached_bytes, [100, 0, 0]);
        // "a" is used again, so "b", "c" and "d" are the oldest, and go
        // until "e" leaves half the budget free.
        assert!(cache.answer(&key("a")).is_some());
        cache.keep_within(Slot::Answer, key("e"), answer(25), 25, 100);
        let kept: Vec<bool> = ["a", "b", "c", "d", "e"]
            .iter()
            .map(|k| cache.answer(&key(k)).is_some())
            .collect();
        assert_eq!(kept, [true, false, false, false, true]);
        assert_eq!(cache.cached_bytes, [50, 0, 0]);
        // Kept again under the same key, an entry is counted once.
        cache.keep_within(Slot::Answer, key("e"), answer(10), 10, 100);
        assert_eq!(cache.cached_bytes, [35, 0, 0]);
        // Records are not answers: they go by their own budget.
        cache.keep_within(
            Slot::List,
            key("a"),
            Value::Records(Arc::new(Part::new(Vec::new()))),
            90,
            100,
        );
        assert_eq!(cache.cached_bytes, [35, 90, 0]);
        // One larger than the budget is kept alone among answers.
        cache.keep_within(Slot::Answer, key("big"), answer(150), 150, 100);
        assert_eq!(cache.entries.len(), 2);
        assert!(cache.records(Slot::List, &key("a")).is_some());
        assert_eq!(cache.cached_bytes, [150, 90, 0]);
    }

    #[test]
    fn the_catalog_copy_outlives_the_spot_records_of_two_states() {
        let mut cache = CatalogCache::default();
        let part = || Value::Records(Arc::new(Part::new(Vec::new())));
        cache.keep_within(Slot::List, key("list@1"), part(), 70, 100);
        cache.keep_within(Slot::Spot, key("spot@2"), part(), 15, 100);
        // A request that read state 1 keeps its spot records after one that
        // read state 2, having used the list part last.
        assert!(cache.records(Slot::List, &key("list@1")).is_some());
        cache.keep_within(Slot::Spot, key("spot@1"), part(), 20, 100);
        let kept: Vec<bool> = [
            (Slot::List, "list@1"),
            (Slot::Spot, "spot@2"),
            (Slot::Spot, "spot@1"),
        ]
        .iter()
        .map(|(slot, k)| cache.records(*slot, &key(k)).is_some())
        .collect();
        assert_eq!(kept, [true, false, true]);
        assert_eq!(cache.cached_bytes, [0, 90, 0]);
    }

    fn record(provider: &str, gpu: &str, usd: f64, window: Option<i64>) -> catalog::CatalogRecord {
        let mut r = catalog::test_record(provider, gpu, usd);
        r.window_start = window.map(|h| chrono::DateTime::from_timestamp(h * 3600, 0).unwrap());
        r
    }

    fn fresh() -> Freshness {
        Freshness::new(BTreeMap::new(), BTreeMap::new(), Utc::now())
    }

    #[test]
    fn prices_from_the_copy_are_the_matching_records_in_the_catalog_order() {
        let list = vec![
            record("aws", "H100-80GB", 9.0, None),
            record("gcp", "H100-80GB", 3.0, Some(2)),
            record("aws", "A100-80GB", 1.0, None),
            // Alike but for their windows: the window orders them.
            record("gcp", "H100-80GB", 3.0, Some(1)),
        ];
        let spot = vec![
            record("aws", "H100-80GB", 2.0, None),
            record("vast", "H100-94GB", 4.0, None),
        ];
        let copy = Records {
            list: Arc::new(Part::new(list.clone())),
            spot: Arc::new(Part::new(spot.clone())),
        };
        let filter = PriceFilter {
            gpus: vec!["h100-80gb".into()],
            ..PriceFilter::default()
        };
        let mut expected: Vec<_> = list
            .into_iter()
            .chain(spot)
            .filter(|r| filter.matches(r))
            .collect();
        expected.sort_by(catalog::catalog_order);
        let usd: Vec<f64> = expected.iter().map(|r| r.usd_per_hour).collect();
        assert_eq!(usd, [2.0, 3.0, 3.0, 9.0]);
        assert!(expected[1].window_start < expected[2].window_start);
        assert_eq!(copy.prices(&filter), expected);
        // Twice: the second answer is made of the JSON the first one kept.
        for _ in 0..2 {
            assert_eq!(
                copy.prices_json(&filter).unwrap(),
                serde_json::to_vec(&expected).unwrap()
            );
        }
        assert_eq!(
            copy.list
                .kept
                .iter()
                .filter(|k| k.json.get().is_some())
                .count(),
            3
        );
        let none = PriceFilter {
            gpus: vec!["B200".into()],
            ..PriceFilter::default()
        };
        assert_eq!(copy.prices_json(&none).unwrap(), b"[]");
        // Several models in both parts, and a filter past the model.
        for filter in [
            PriceFilter {
                gpus: vec!["H100".into(), "A100-80GB".into()],
                ..PriceFilter::default()
            },
            PriceFilter {
                gpus: vec!["H100".into()],
                max_usd_per_gpu_hour: Some(3.5),
                ..PriceFilter::default()
            },
        ] {
            let mut expected: Vec<_> = copy.all().filter(|r| filter.matches(r)).cloned().collect();
            expected.sort_by(catalog::catalog_order);
            assert!(expected.len() >= 3, "{filter:?}");
            assert_eq!(copy.prices(&filter), expected);
            // Each part answers a GPU in the catalog's order, for the
            // answer to merge.
            for part in [&copy.list, &copy.spot] {
                let found = part.matching(&filter);
                assert!(found.len() >= 2, "{filter:?}");
                assert!(
                    found.windows(2).all(|w| {
                        catalog::catalog_order(part.record(w[0]), part.record(w[1])).is_le()
                    }),
                    "{filter:?}"
                );
            }
            assert_eq!(
                copy.prices_json(&filter).unwrap(),
                serde_json::to_vec(&expected).unwrap()
            );
        }
    }

    #[test]
    fn requests_that_miss_together_wait_for_one_read() {
        let cache = Mutex::new(CatalogCache::default());
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let fresh = fresh();
        let generation = Generation {
            data: 1,
            list_prices: 1,
            spot: 1,
            spot_prunes: 0,
            spot_pruned_before: 0,
        };
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    let got = cached_records(&fresh, &cache, ("q", generation), NOW, |_, _| {
                        reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(100));
                        Ok(Arc::new(Part::new(vec![record(
                            "aws",
                            "H100-80GB",
                            1.0,
                            None,
                        )])))
                    })
                    .unwrap();
                    assert_eq!(got.filtered(&PriceFilter::default()).count(), 2);
                });
            }
        });
        // One read of each part (list and spot), whoever asked.
        assert_eq!(reads.load(std::sync::atomic::Ordering::SeqCst), 2);
        // A request that saw a later commit does not take what was read
        // before it: spot records are read again, list prices too once they
        // moved.
        let read_again = |generation| {
            cached_records(&fresh, &cache, ("q", generation), NOW, |_, _| {
                reads.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok(Arc::new(Part::new(Vec::new())))
            })
            .unwrap();
            reads.load(std::sync::atomic::Ordering::SeqCst)
        };
        let spot_sync = Generation {
            data: 2,
            ..generation
        };
        assert_eq!(read_again(spot_sync), 3);
        let full_sync = Generation {
            data: 3,
            list_prices: 2,
            spot: 1,
            spot_prunes: 0,
            spot_pruned_before: 0,
        };
        assert_eq!(read_again(full_sync), 5);
        assert!(lock(&cache).reading.is_empty());
        // A read that fails is not kept: the next request reads again.
        let failed = cached_records(&fresh, &cache, ("bad", generation), NOW, |_, _| {
            Err(StoreError::Corrupt("unreadable".into()))
        });
        assert!(failed.is_err());
        assert!(lock(&cache).reading.is_empty());
    }

    /// A sync of AWS's that observed `zones`' spot prices at `hour`.
    fn write_spot(pool: &Pool, scope: gpuplan_providers::Scope, zones: &[(&str, f64)], hour: i64) {
        write_spot_in(pool, scope, zones, hour, gpuplan_providers::Currency::usd());
    }

    /// [`write_spot`] of 8-GPU instances priced in `currency`.
    fn write_spot_in(
        pool: &Pool,
        scope: gpuplan_providers::Scope,
        zones: &[(&str, f64)],
        hour: i64,
        currency: gpuplan_providers::Currency,
    ) {
        let mut snap = crate::store::test_support::snapshot(1, 1.0);
        snap.instance_types[0].gpu_count = 8.0;
        snap.scope = scope;
        snap.currency = currency;
        snap.spot_observations = zones
            .iter()
            .map(|&(zone, usd)| gpuplan_providers::SpotObservation {
                region: "us-east-1".into(),
                zone: zone.into(),
                instance_type: "gpu0.xlarge".into(),
                usd_per_hour: usd,
                observed_at: crate::store::test_support::at(hour),
            })
            .collect();
        let t = crate::store::test_support::at(hour);
        pool.write(|s| {
            let run = s.begin_run("aws", scope, t).unwrap();
            s.write_snapshot(run, "aws", &snap, &[], t, t).unwrap();
        });
    }

    #[test]
    fn spot_history_is_answered_from_the_last_read_until_the_catalog_changes() {
        use crate::store::test_support::at;
        use gpuplan_providers::Scope;
        let db = crate::store::test_support::TestDb::sqlite();
        let pool = db.pool(0);
        for hour in 0..6 {
            write_spot(
                &pool,
                Scope::SpotHistory,
                &[("us-east-1a", 1.0 + hour as f64), ("us-east-1b", 2.0)],
                hour,
            );
        }
        let cache = Mutex::new(CatalogCache::default());
        let key = ("gpu0.xlarge\n\u{0}\n\u{0}\n\u{0}".to_owned(), Vec::new());
        let kept_since = |since| {
            lock(&cache)
                .history(&key)
                .is_some_and(|k: Arc<KeptHistory>| k.holds(since))
        };
        let question = |since, limit| catalog::SpotQuery {
            instance_type: "gpu0.xlarge".into(),
            provider: None,
            region: None,
            zone: None,
            since,
            max_observations: Some(limit),
        };
        // The catalog's state, which the cache follows as a request does,
        // and its freshness at hour 9.
        let state = |store: &dyn crate::store::Store| {
            let generation = store.catalog_generation()?;
            let mut kept = lock(&cache);
            if kept.generation != Some(generation) {
                kept.follow(generation);
            }
            drop(kept);
            let fresh = Freshness::new(store.last_good_syncs()?, BTreeMap::new(), at(9));
            Ok::<_, StoreError>((generation, fresh))
        };
        // (the cached answer, the store's, the data generation)
        let ask = |since| {
            pool.read(|store| {
                let (generation, fresh) = state(store)?;
                let q = question(since, 100);
                let cached = spot_history_answer(store, &fresh, &cache, generation, &q)?;
                let read = serde_json::to_vec(&catalog::spot_history(store, &q, &fresh)?).unwrap();
                // The same question in the same state and second: the
                // answer kept, not encoded again.
                let again = spot_history_answer(store, &fresh, &cache, generation, &q)?;
                assert_eq!(again.as_ptr(), cached.as_ptr());
                Ok::<_, StoreError>((
                    String::from_utf8(cached.to_vec()).unwrap(),
                    String::from_utf8(read).unwrap(),
                    generation.data,
                ))
            })
            .unwrap()
        };
        let (cached, read, data) = ask(at(2));
        assert_eq!(cached, read);
        // A later window trims what was read: the read from hour 2 stays.
        let (cached, read, _) = ask(at(4) + chrono::Duration::minutes(1));
        assert_eq!(cached, read);
        assert!(kept_since(at(2)), "the read from hour 2 is kept");
        // An earlier window reads again.
        let (cached, read, _) = ask(at(1));
        assert_eq!(cached, read);
        assert!(kept_since(at(1)));
        // A spot sync appends: its observation is in the next answer, and
        // the read from hour 1 was extended by it, not read again.
        write_spot(&pool, Scope::SpotHistory, &[("us-east-1b", 7.5)], 7);
        let (cached, read, moved) = ask(at(4));
        assert_eq!(cached, read);
        assert!(moved > data && cached.contains("7.5"), "{cached}");
        assert!(kept_since(at(1)), "extended");
        let (cached, read, _) = ask(at(1));
        assert_eq!(cached, read);
        // A sync that adds a point before a series' newest: read again.
        write_spot(&pool, Scope::SpotHistory, &[("us-east-1b", 6.5)], 6);
        let (cached, read, _) = ask(at(2));
        assert_eq!(cached, read);
        assert!(cached.contains("6.5") && !kept_since(at(1)), "{cached}");
        // A prune of what is older than a window keeps its answer; a window
        // from before the cutoff is read again.
        let answer = |since| {
            pool.read(|store| {
                let (generation, fresh) = state(store)?;
                spot_history_answer(store, &fresh, &cache, generation, &question(since, 100))
            })
            .unwrap()
        };
        let (_, _, unpruned) = ask(at(2));
        let kept = answer(at(2));
        let retention = crate::store::Retention {
            spot_history: Some(Duration::from_secs(3600)),
            ..crate::store::Retention::default()
        };
        let pruned = crate::store::prune(&pool, &retention, at(3), false).unwrap();
        assert!(pruned.spot_observations + pruned.spot_recent > 0);
        let (cached, read, data) = ask(at(2));
        assert_eq!(cached, read);
        assert!(data > unpruned);
        assert_eq!(
            answer(at(2)).as_ptr(),
            kept.as_ptr(),
            "kept across the prune"
        );
        // A window not answered yet, within the read the prune left: that
        // read, as the pruned state's, answers it.
        let (cached, read, _) = ask(at(3));
        assert_eq!(cached, read);
        assert!(kept_since(at(2)));
        let (cached, read, _) = ask(at(1));
        assert_eq!(cached, read);
        // More observations than asked for are refused, kept or not.
        let refused = pool.read(|store| {
            let fresh = Freshness::new(BTreeMap::new(), BTreeMap::new(), at(9));
            let q = question(at(0), 3);
            spot_history_answer(store, &fresh, &cache, store.catalog_generation()?, &q)
        });
        assert!(
            matches!(refused, Err(StoreError::TooLarge { limit: 3, .. })),
            "{refused:?}"
        );
    }

    #[test]
    fn current_spot_prices_are_patched_with_the_series_written_since_and_read_whole_after_a_full_sync()
     {
        let db = crate::store::test_support::TestDb::sqlite();
        let pool = db.pool(0);
        let write = |scope, zones: &[(&str, f64)], hour| write_spot(&pool, scope, zones, hour);
        let cache = Mutex::new(CatalogCache::default());
        let read = || {
            pool.read(|store| {
                let fresh = Freshness::new(store.last_good_syncs()?, BTreeMap::new(), Utc::now());
                let part = current_spot(store, &fresh, &cache, &[], store.catalog_generation()?)?;
                let mut got: Vec<_> = part.records().cloned().collect();
                let mut whole = catalog::price_part_at(
                    store,
                    &fresh,
                    &PriceFilter::default(),
                    None,
                    PricePart::Spot,
                )?;
                got.sort_by(catalog::catalog_order);
                whole.sort_by(catalog::catalog_order);
                Ok::<_, StoreError>((part, got, whole))
            })
            .unwrap()
        };
        use gpuplan_providers::Scope;
        write(Scope::Full, &[("us-east-1a", 1.0), ("us-east-1b", 2.0)], 0);
        let (first, got, whole) = read();
        assert_eq!((got.len(), &got), (2, &whole));
        // A spot sync, in another currency: one series changes, one is new;
        // the third is shared.
        write_spot_in(
            &pool,
            Scope::SpotHistory,
            &[("us-east-1b", 3.0), ("us-east-1c", 4.0)],
            1,
            gpuplan_providers::Currency {
                code: "CNY".into(),
                per_usd: 7.1,
            },
        );
        let (second, got, whole) = read();
        assert_eq!((got.len(), &got), (3, &whole));
        let zone_b = got.iter().find(|r| r.zone.as_deref() == Some("us-east-1b"));
        let zone_b = zone_b.unwrap();
        assert_eq!(
            (
                zone_b.usd_per_gpu_hour,
                zone_b.currency.as_str(),
                zone_b.fx_rate
            ),
            (3.0 / 8.0, "CNY", 7.1)
        );
        let zone_a = |p: &Part| {
            p.kept
                .iter()
                .find(|k| k.record.zone.as_deref() == Some("us-east-1a"))
                .unwrap()
                .clone()
        };
        assert!(
            Arc::ptr_eq(&zone_a(&first), &zone_a(&second)),
            "zone a is kept, not read again"
        );
        // Nothing written: the same records.
        let (third, _, _) = read();
        assert!(Arc::ptr_eq(&second, &third));
        // A full sync moves the sources' last good sync, which every record
        // carries: all are read again.
        write(Scope::Full, &[("us-east-1a", 5.0)], 2);
        let (fourth, got, whole) = read();
        assert_eq!(got, whole);
        assert!(!Arc::ptr_eq(&zone_a(&second), &zone_a(&fourth)));
        assert!(
            got.iter()
                .all(|r| r.fetched_at == Some(crate::store::test_support::at(2)))
        );
    }

    #[test]
    fn list_prices_outlive_a_spot_sync_and_the_past_outlives_any_change() {
        let mut cache = CatalogCache::default();
        let records = || Value::Records(Arc::new(Part::new(Vec::new())));
        let at = |data, list_prices| Generation {
            data,
            list_prices,
            spot: data,
            spot_prunes: 0,
            spot_pruned_before: 0,
        };
        cache.follow(at(1, 1));
        cache.keep(Slot::List, key("q"), records(), 10);
        cache.keep(Slot::Spot, key("q"), records(), 20);
        cache.keep(Slot::Answer, key("q"), answer(30), 30);
        cache.past.keep(86_400, 7, Arc::default());
        cache.follow(at(2, 1));
        assert!(cache.records(Slot::List, &key("q")).is_some());
        assert!(cache.records(Slot::Spot, &key("q")).is_none());
        assert!(cache.answer(&key("q")).is_none());
        assert_eq!(cache.cached_bytes, [0, 10, 0]);
        cache.follow(at(3, 2));
        assert!(cache.entries.is_empty());
        assert_eq!(cache.cached_bytes, [0, 0, 0]);
        // A time before now reads the same whatever a sync added since.
        assert!(matches!(cache.past.lookup(86_400, 7), Lookup::Current(_)));
    }

    #[tokio::test]
    async fn the_past_cheapest_prices_are_read_before_anyone_asks_and_until_the_daemon_stops() {
        let db = crate::store::test_support::TestDb::sqlite();
        let pool = Arc::new(db.pool(0));
        // List prices from a month ago: the cheapest of a day and of a week ago.
        let month_ago = Utc::now() - chrono::TimeDelta::days(30);
        let snap = crate::store::test_support::snapshot(2, 3.0);
        pool.write(|s| {
            let run = s.begin_run("aws", snap.scope, month_ago).unwrap();
            s.write_snapshot(run, "aws", &snap, &[], month_ago, month_ago)
                .unwrap();
        });
        let state = Arc::new(AppState::for_tests(pool));
        let cancel = tokio_util::sync::CancellationToken::new();
        let keeping = tokio::spawn(keep_the_past(state.clone(), cancel.clone()));
        let kept = |back: chrono::TimeDelta| {
            let minute = Utc::now().timestamp() / 60;
            match lock(&state.cache).past.lookup(back.num_seconds(), minute) {
                Lookup::Current(kept) | Lookup::Refresh(kept) | Lookup::Earlier(kept) => Some(kept),
                Lookup::Missing => None,
            }
        };
        for _ in 0..500 {
            if COMPARED.iter().all(|&back| kept(back).is_some()) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        for back in COMPARED {
            let then = kept(back).expect("read without a request");
            let prices: Vec<_> = then
                .iter()
                .map(|((gpu, group), r)| (gpu.as_str(), *group, r.usd_per_hour))
                .collect();
            // gpu0's on-demand price, and its commitment's effective price.
            assert_eq!(prices, [("L4", "committed", 1.6), ("L4", "on_demand", 3.0)]);
        }
        cancel.cancel();
        tokio::time::timeout(Duration::from_secs(5), keeping)
            .await
            .expect("stops when cancelled")
            .unwrap();
    }

    #[test]
    fn when_the_minute_turns_one_request_reads_the_past_again_and_the_rest_do_not_wait() {
        let mut past = PastCheapest::default();
        let day = 86_400;
        assert!(matches!(past.lookup(day, 100), Lookup::Missing));
        past.keep(day, 100, Arc::default());
        assert!(matches!(past.lookup(day, 100), Lookup::Current(_)));
        // The next minute: the first asker reads it, the others use minute 100's.
        assert!(matches!(past.lookup(day, 101), Lookup::Refresh(_)));
        assert!(matches!(past.lookup(day, 101), Lookup::Earlier(_)));
        // Another time before now is kept apart.
        assert!(matches!(past.lookup(7 * day, 101), Lookup::Missing));
        // A read that failed lets the next request try again.
        past.failed(day);
        assert!(matches!(past.lookup(day, 101), Lookup::Refresh(_)));
        past.keep(day, 101, Arc::default());
        assert!(matches!(past.lookup(day, 101), Lookup::Current(_)));
        // A slow read of an older minute does not replace a newer one.
        past.keep(day, 99, Arc::default());
        assert!(matches!(past.lookup(day, 101), Lookup::Current(_)));
        // After an idle hour, what is kept is too old to show: read it.
        assert!(matches!(
            past.lookup(day, 101 + PAST_STAYS_MINUTES + 1),
            Lookup::Missing
        ));
    }
}
