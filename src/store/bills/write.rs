//! Writing a billing load: a period's rows replaced whole, its digest and
//! restatements, the files read and the periods pruned.

use std::collections::{BTreeSet, HashMap};

use super::period::{READER, UsageKey, UsageValue};
use super::*;
use crate::store::ts;

/// Tolerance for comparing sums of many small costs: float sums of the
/// same rows in the same order are equal, but a digest must not flap on the
/// last bits either.
fn same(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-6_f64.max(1e-9 * a.abs().max(b.abs()))
}

const CHILD_TABLES: &[&str] = &[
    "bill_usage_hours",
    "bill_usage_days",
    "bill_spend_days",
    "bill_commitments",
    "bill_commitment_hours",
    "bill_corrections",
];

/// The main currency of a period: the one most rows carry.
fn main_total(totals: &[Total]) -> Total {
    totals
        .iter()
        .max_by_key(|t| t.rows)
        .cloned()
        .unwrap_or_default()
}

pub(in crate::store) fn write_period(
    db: &dyn Db,
    source: &str,
    data: &PeriodData,
    state: &str,
    now: DateTime<Utc>,
) -> Result<PeriodWrite, StoreError> {
    db.check_fence()?;
    let key = [
        Val::from(source),
        Val::from(data.billing_account.as_str()),
        Val::from(data.period.as_str()),
    ];
    let old = db
        .rows(
            "SELECT generation, row_count, gpu_hours, totals_json, state, reader FROM bill_loads
             WHERE source = $1 AND billing_account = $2 AND billing_period = $3",
            &key,
        )?
        .into_iter()
        .next();
    let totals: Vec<Total> = data.totals.values().cloned().collect();
    let totals_json =
        serde_json::to_string(&totals).map_err(|e| StoreError::Corrupt(format!("totals: {e}")))?;
    let unmapped_json = serde_json::to_string(&data.unmapped)
        .map_err(|e| StoreError::Corrupt(format!("unmapped: {e}")))?;
    #[allow(clippy::cast_possible_wrap)]
    let rows = data.rows as i64;
    let (result, generation, deltas) = match &old {
        None => (LoadResult::Loaded, 1, None),
        Some(o) => {
            let generation = o[0].int()?;
            let old_rows = o[1].int()?;
            let old_gpu = o[2].real()?;
            let old_totals: Vec<Total> = serde_json::from_str(&o[3].text()?)
                .map_err(|e| StoreError::Corrupt(format!("bill_loads.totals_json: {e}")))?;
            // A period an older reading made is rewritten whatever its sums.
            let older = o[5].int()? < READER;
            let unchanged = !older
                && old_rows == rows
                && same(old_gpu, data.gpu_hours)
                && old_totals.len() == totals.len()
                && old_totals.iter().zip(&totals).all(|(a, b)| {
                    a.currency == b.currency
                        && a.rows == b.rows
                        && same(a.billed_cost, b.billed_cost)
                        && same(a.effective_cost, b.effective_cost)
                });
            if unchanged {
                db.exec(
                    "UPDATE bill_loads SET checked_at = $4, state = $5
                     WHERE source = $1 AND billing_account = $2 AND billing_period = $3",
                    &[
                        key[0].clone(),
                        key[1].clone(),
                        key[2].clone(),
                        ts(now).into(),
                        state.into(),
                    ],
                )?;
                return Ok(PeriodWrite {
                    result: LoadResult::Unchanged,
                    generation,
                    deltas: None,
                });
            }
            let new_main = main_total(&totals);
            let old_main = old_totals
                .iter()
                .find(|t| t.currency == new_main.currency)
                .cloned()
                .unwrap_or_default();
            let deltas = Deltas {
                rows: rows - old_rows,
                billed_cost: new_main.billed_cost - old_main.billed_cost,
                effective_cost: new_main.effective_cost - old_main.effective_cost,
                gpu_hours: data.gpu_hours - old_gpu,
                currency: new_main.currency,
            };
            let result = if state == "open" || older {
                LoadResult::Updated
            } else {
                LoadResult::Restated
            };
            (result, generation + 1, Some(deltas))
        }
    };
    for table in CHILD_TABLES {
        db.exec(
            &format!(
                "DELETE FROM {table} WHERE source = $1 AND billing_account = $2 AND billing_period = $3"
            ),
            &key,
        )?;
    }
    insert_children(db, source, data)?;
    #[allow(clippy::cast_possible_wrap)]
    let gpu_rows = data.gpu_rows as i64;
    db.exec(
        "INSERT INTO bill_loads (source, billing_account, billing_period, provider, period_start,
             period_end, generation, state, row_count, gpu_rows, gpu_hours, totals_json,
             unmapped_json, loaded_at, checked_at, reader)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $14, $15)
         ON CONFLICT (source, billing_account, billing_period) DO UPDATE SET
             provider = excluded.provider, period_start = excluded.period_start,
             period_end = excluded.period_end, generation = excluded.generation,
             state = excluded.state, row_count = excluded.row_count,
             gpu_rows = excluded.gpu_rows, gpu_hours = excluded.gpu_hours,
             totals_json = excluded.totals_json, unmapped_json = excluded.unmapped_json,
             loaded_at = excluded.loaded_at, checked_at = excluded.checked_at,
             reader = excluded.reader",
        &[
            key[0].clone(),
            key[1].clone(),
            key[2].clone(),
            data.provider().into(),
            data.period_start.into(),
            data.period_end.into(),
            generation.into(),
            state.into(),
            rows.into(),
            gpu_rows.into(),
            data.gpu_hours.into(),
            totals_json.into(),
            unmapped_json.into(),
            ts(now).into(),
            READER.into(),
        ],
    )?;
    if let (LoadResult::Restated, Some(d)) = (result, &deltas) {
        db.exec(
            "INSERT INTO bill_restatements (source, billing_account, billing_period, generation,
                 restated_at, state, currency, row_count, billed_cost, effective_cost, gpu_hours)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                key[0].clone(),
                key[1].clone(),
                key[2].clone(),
                generation.into(),
                ts(now).into(),
                state.into(),
                d.currency.as_str().into(),
                d.rows.into(),
                d.billed_cost.into(),
                d.effective_cost.into(),
                d.gpu_hours.into(),
            ],
        )?;
    }
    Ok(PeriodWrite {
        result,
        generation,
        deltas,
    })
}

/// The columns of `bill_usage_hours` and `bill_usage_days`, those every row
/// of a load shares first.
const USAGE_COLUMNS: &[&str] = &[
    "source",
    "billing_account",
    "billing_period",
    "start",
    "provider",
    "account",
    "team",
    "region",
    "instance_type",
    "gpu_model",
    "price_kind",
    "currency",
    "instance_hours",
    "gpu_hours",
    "billed_cost",
    "effective_cost",
];

fn insert_children(db: &dyn Db, source: &str, data: &PeriodData) -> Result<(), StoreError> {
    let head = [
        Arg::from(source),
        Arg::from(data.billing_account.as_str()),
        Arg::from(data.period.as_str()),
    ];
    let mut hours: Vec<(&UsageKey, &UsageValue)> = data.usage.iter().collect();
    hours.sort_unstable_by(|a, b| a.0.cmp(b.0));
    let mut values = Vec::with_capacity(hours.len() * (USAGE_COLUMNS.len() - head.len()));
    for (k, v) in &hours {
        usage_row(&mut values, k.start, k, v);
    }
    db.insert_many("bill_usage_hours", USAGE_COLUMNS, &head, &values)?;

    // A day's key is its hours' key at the day's start: (day, the hour's key
    // less its start) orders days as their keys would.
    let mut days: HashMap<(i64, DayKey<'_>), (&UsageKey, UsageValue)> = HashMap::new();
    for (k, v) in hours {
        let (_, d) = days
            .entry((k.start.div_euclid(86_400) * 86_400, DayKey(k)))
            .or_insert_with(|| (k, UsageValue::default()));
        if let Some(h) = v.instance_hours {
            d.instance_hours = Some(d.instance_hours.unwrap_or(0.0) + h);
        }
        d.gpu_hours += v.gpu_hours;
        d.billed_cost += v.billed_cost;
        d.effective_cost += v.effective_cost;
    }
    let mut days: Vec<_> = days.into_iter().collect();
    days.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    values.clear();
    for ((start, _), (k, v)) in &days {
        usage_row(&mut values, *start, k, v);
    }
    db.insert_many("bill_usage_days", USAGE_COLUMNS, &head, &values)?;

    let mut values = Vec::with_capacity(data.spend.len() * 10);
    for s in &data.spend {
        values.extend([
            Arg::from(s.day),
            s.provider.as_str().into(),
            s.account.as_str().into(),
            s.team.as_str().into(),
            s.service_category.as_str().into(),
            s.charge_category.as_str().into(),
            i64::from(s.gpu).into(),
            s.currency.as_str().into(),
            s.billed_cost.into(),
            s.effective_cost.into(),
        ]);
    }
    db.insert_many(
        "bill_spend_days",
        &[
            "source",
            "billing_account",
            "billing_period",
            "start",
            "provider",
            "account",
            "team",
            "service_category",
            "charge_category",
            "gpu",
            "currency",
            "billed_cost",
            "effective_cost",
        ],
        &head,
        &values,
    )?;

    let json = |set: &BTreeSet<String>| serde_json::to_string(set).unwrap_or_else(|_| "[]".into());
    let sets: Vec<(String, String)> = data
        .commitments
        .values()
        .map(|c| (json(&c.regions), json(&c.instance_types)))
        .collect();
    let mut values = Vec::new();
    for (c, (regions, types)) in data.commitments.values().zip(&sets) {
        values.extend([
            Arg::from(c.provider.as_str()),
            c.id.as_str().into(),
            c.kind.map(|k| k.as_str()).into(),
            c.category.as_deref().into(),
            c.unit.as_deref().into(),
            regions.as_str().into(),
            types.as_str().into(),
            i64::from(c.untyped_cover).into(),
            c.first_seen.into(),
            c.last_seen.into(),
            c.currency.as_str().into(),
        ]);
    }
    db.insert_many(
        "bill_commitments",
        &[
            "source",
            "billing_account",
            "billing_period",
            "provider",
            "commitment_id",
            "kind",
            "category",
            "unit",
            "regions_json",
            "instance_types_json",
            "untyped_cover",
            "first_seen",
            "last_seen",
            "currency",
        ],
        &head,
        &values,
    )?;

    let mut values = Vec::with_capacity(data.commitment_hours.len() * 8);
    for ((id, start), h) in &data.commitment_hours {
        values.extend([
            Arg::from(id.as_str()),
            (*start).into(),
            h.used_quantity.into(),
            h.unused_quantity.into(),
            h.used_cost.into(),
            h.unused_cost.into(),
            h.covered_instance_hours.into(),
            h.covered_gpu_hours.into(),
        ]);
    }
    db.insert_many(
        "bill_commitment_hours",
        &[
            "source",
            "billing_account",
            "billing_period",
            "commitment_id",
            "start",
            "used_quantity",
            "unused_quantity",
            "used_cost",
            "unused_cost",
            "covered_instance_hours",
            "covered_gpu_hours",
        ],
        &head,
        &values,
    )?;

    let mut values = Vec::new();
    for c in &data.corrections {
        #[allow(clippy::cast_possible_wrap)]
        values.extend([
            Arg::from(c.corrects.as_str()),
            c.currency.as_str().into(),
            (c.rows as i64).into(),
            c.billed_cost.into(),
            c.effective_cost.into(),
        ]);
    }
    db.insert_many(
        "bill_corrections",
        &[
            "source",
            "billing_account",
            "billing_period",
            "corrects",
            "currency",
            "row_count",
            "billed_cost",
            "effective_cost",
        ],
        &head,
        &values,
    )
}

/// Appends the row of `bill_usage_hours` or `bill_usage_days` for key `k`
/// at `start`, less the columns a load's rows share.
fn usage_row<'a>(out: &mut Vec<Arg<'a>>, start: i64, k: &'a UsageKey, v: &UsageValue) {
    out.extend([
        Arg::from(start),
        k.provider.as_str().into(),
        k.account.as_str().into(),
        k.team.as_str().into(),
        k.region.as_str().into(),
        k.instance_type.as_str().into(),
        k.gpu_model.as_str().into(),
        k.price_kind.as_str().into(),
        k.currency.as_str().into(),
        v.instance_hours.into(),
        v.gpu_hours.into(),
        v.billed_cost.into(),
        v.effective_cost.into(),
    ]);
}

/// A usage key less its start, ordered as the key is.
struct DayKey<'a>(&'a UsageKey);

impl DayKey<'_> {
    #[allow(clippy::type_complexity)]
    fn rest(&self) -> (&str, &str, &str, &str, &str, &str, UsageKind, &str) {
        let k = self.0;
        (
            &k.provider,
            &k.account,
            &k.team,
            &k.region,
            &k.instance_type,
            &k.gpu_model,
            k.price_kind,
            &k.currency,
        )
    }
}

impl PartialEq for DayKey<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.rest() == other.rest()
    }
}

impl Eq for DayKey<'_> {}

impl std::hash::Hash for DayKey<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.rest().hash(state);
    }
}

impl PartialOrd for DayKey<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for DayKey<'_> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.rest().cmp(&other.rest())
    }
}

pub(in crate::store) fn record_files(
    db: &dyn Db,
    source: &str,
    files: &[(String, FileRecord)],
    removed: &[String],
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    db.check_fence()?;
    for path in removed {
        db.exec(
            "DELETE FROM bill_files WHERE source = $1 AND path = $2",
            &[source.into(), path.as_str().into()],
        )?;
    }
    for (path, f) in files {
        let periods = serde_json::to_string(&f.periods)
            .map_err(|e| StoreError::Corrupt(format!("periods: {e}")))?;
        db.exec(
            "INSERT INTO bill_files (source, path, fingerprint, periods_json, read_at)
             VALUES ($1, $2, $3, $4, $5)
             ON CONFLICT (source, path) DO UPDATE SET fingerprint = excluded.fingerprint,
                 periods_json = excluded.periods_json, read_at = excluded.read_at",
            &[
                source.into(),
                path.as_str().into(),
                f.fingerprint.as_str().into(),
                periods.into(),
                ts(now).into(),
            ],
        )?;
    }
    Ok(())
}

pub(in crate::store) fn prune_periods_before(db: &dyn Db, before: &str) -> Result<u64, StoreError> {
    let n = count_periods_before(db, before)?;
    for table in CHILD_TABLES
        .iter()
        .chain(&["bill_restatements", "bill_loads"])
    {
        db.exec(
            &format!("DELETE FROM {table} WHERE billing_period < $1"),
            &[before.into()],
        )?;
    }
    Ok(n)
}
