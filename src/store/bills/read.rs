//! The answers read back from the billing aggregates.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use chrono::TimeZone as _;

use super::*;

/// A stored Unix time as UTC (0 for one out of range, which no stored
/// period holds).
fn utc(t: i64) -> DateTime<Utc> {
    Utc.timestamp_opt(t, 0).single().unwrap_or_default()
}

pub(in crate::store) fn loads(
    db: &dyn Db,
    source: Option<&str>,
) -> Result<Vec<StoredLoad>, StoreError> {
    let src = [Val::from(source)];
    let mut restatements: HashMap<(String, String, String), Vec<Restatement>> = HashMap::new();
    for r in db.rows(
        "SELECT source, billing_account, billing_period, generation, restated_at, state, currency,
                row_count, billed_cost, effective_cost, gpu_hours
         FROM bill_restatements WHERE CAST($1 AS TEXT) IS NULL OR source = $1
         ORDER BY source, billing_account, billing_period, generation",
        &src,
    )? {
        restatements
            .entry((r[0].text()?, r[1].text()?, r[2].text()?))
            .or_default()
            .push(Restatement {
                generation: r[3].int()?,
                at: r[4].text()?,
                state: r[5].text()?,
                deltas: Deltas {
                    currency: r[6].text()?,
                    rows: r[7].int()?,
                    billed_cost: r[8].real()?,
                    effective_cost: r[9].real()?,
                    gpu_hours: r[10].real()?,
                },
            });
    }
    let mut corrections: HashMap<(String, String, String), Vec<CorrectionRow>> = HashMap::new();
    let mut corrects: HashMap<(String, String, String), Vec<CorrectionRow>> = HashMap::new();
    for r in db.rows(
        "SELECT source, billing_account, corrects, billing_period, currency, row_count,
                billed_cost, effective_cost
         FROM bill_corrections WHERE CAST($1 AS TEXT) IS NULL OR source = $1
         ORDER BY source, billing_account, corrects, billing_period, currency",
        &src,
    )? {
        let (source, account) = (r[0].text()?, r[1].text()?);
        let row = CorrectionRow {
            corrects: r[2].text()?,
            billed_in: r[3].text()?,
            currency: r[4].text()?,
            rows: r[5].int()?,
            billed_cost: r[6].real()?,
            effective_cost: r[7].real()?,
        };
        corrects
            .entry((source.clone(), account.clone(), row.billed_in.clone()))
            .or_default()
            .push(row.clone());
        corrections
            .entry((source, account, row.corrects.clone()))
            .or_default()
            .push(row);
    }
    let mut out = Vec::new();
    for r in db.rows(
        "SELECT source, billing_account, billing_period, provider, period_end, state, generation,
                row_count, gpu_rows, gpu_hours, totals_json, unmapped_json, loaded_at, checked_at
         FROM bill_loads WHERE CAST($1 AS TEXT) IS NULL OR source = $1
         ORDER BY source, billing_account, billing_period",
        &src,
    )? {
        let key = (r[0].text()?, r[1].text()?, r[2].text()?);
        out.push(StoredLoad {
            restatements: restatements.remove(&key).unwrap_or_default(),
            corrections: corrections.remove(&key).unwrap_or_default(),
            corrects: corrects.remove(&key).unwrap_or_default(),
            source: key.0,
            billing_account: key.1,
            billing_period: key.2,
            provider: r[3].text()?,
            period_end: r[4].int()?,
            state: r[5].text()?,
            generation: r[6].int()?,
            rows: r[7].int()?,
            gpu_rows: r[8].int()?,
            gpu_hours: r[9].real()?,
            totals: serde_json::from_str(&r[10].text()?)
                .map_err(|e| StoreError::Corrupt(format!("bill_loads.totals_json: {e}")))?,
            unmapped: serde_json::from_str(&r[11].text()?)
                .map_err(|e| StoreError::Corrupt(format!("bill_loads.unmapped_json: {e}")))?,
            loaded_at: r[12].text()?,
            checked_at: r[13].text()?,
        });
    }
    Ok(out)
}

pub(in crate::store) fn files(
    db: &dyn Db,
    source: &str,
) -> Result<BTreeMap<String, FileRecord>, StoreError> {
    let mut out = BTreeMap::new();
    for r in db.rows(
        "SELECT path, fingerprint, periods_json FROM bill_files WHERE source = $1",
        &[source.into()],
    )? {
        let periods: Vec<(String, String)> = serde_json::from_str(&r[2].text()?)
            .map_err(|e| StoreError::Corrupt(format!("bill_files.periods_json: {e}")))?;
        out.insert(
            r[0].text()?,
            FileRecord {
                fingerprint: r[1].text()?,
                periods,
            },
        );
    }
    Ok(out)
}

/// `col IN ($n, ...)` for a non-empty list, binding its values.
fn any_of(col: &str, values: &[String], params: &mut Vec<Val>, sql: &mut String) {
    if values.is_empty() {
        return;
    }
    let marks: Vec<String> = values
        .iter()
        .map(|v| {
            params.push(v.as_str().into());
            format!("${}", params.len())
        })
        .collect();
    sql.push_str(&format!(" AND {col} IN ({})", marks.join(", ")));
}

/// A GPU model or its family (`H100` matches `H100-80GB`), as the price
/// filters match them.
fn gpu_of(values: &[String], params: &mut Vec<Val>, sql: &mut String) {
    if values.is_empty() {
        return;
    }
    let tests: Vec<String> = values
        .iter()
        .map(|v| {
            let v = v.trim().to_ascii_lowercase();
            params.push(v.clone().into());
            params.push(format!("{v}-%").into());
            format!(
                "lower(gpu_model) = ${} OR lower(gpu_model) LIKE ${}",
                params.len() - 1,
                params.len()
            )
        })
        .collect();
    sql.push_str(&format!(" AND ({})", tests.join(" OR ")));
}

/// A grouped row: its bucket, grouped fields, currency and sums.
type Grouped = (i64, BTreeMap<String, String>, String, Vec<Val>);

/// Runs a grouped query over `table`: the bucket, the grouped fields, the
/// currency, then `sums`, ordered the same way. One row more than the limit
/// means `TooLarge`.
fn grouped(
    db: &dyn Db,
    table_hours: &str,
    table_days: &str,
    q: &BillQuery,
    sums: &[&str],
    what: &'static str,
) -> Result<Vec<Grouped>, StoreError> {
    let (table, bucket) = match q.by.unwrap_or(Bucket::Day) {
        Bucket::Hour => (table_hours, "start".to_owned()),
        Bucket::Day => (table_days, "start".to_owned()),
        Bucket::Month => (table_days, db.dialect().month_of("start")),
    };
    let mut params: Vec<Val> = vec![q.since.into(), q.until.into()];
    let mut filter = String::from("start >= $1 AND start < $2");
    any_of("team", &q.teams, &mut params, &mut filter);
    any_of("provider", &q.providers, &mut params, &mut filter);
    gpu_of(&q.gpus, &mut params, &mut filter);
    any_of("price_kind", &q.price_kinds, &mut params, &mut filter);
    if q.gpu_only {
        filter.push_str(" AND gpu = 1");
    }
    if !q.accounts.is_empty() {
        let (mut sub, mut billing) = (String::new(), String::new());
        any_of("account", &q.accounts, &mut params, &mut sub);
        any_of("billing_account", &q.accounts, &mut params, &mut billing);
        let or = |t: &str| t.trim_start_matches(" AND ").to_owned();
        filter.push_str(&format!(" AND ({} OR {})", or(&sub), or(&billing)));
    }
    let mut cols = vec!["b".to_owned()];
    cols.extend(q.group.iter().cloned());
    cols.push("currency".to_owned());
    let keys = cols[1..].join(", ");
    let sum_sql: Vec<String> = sums.iter().map(|s| format!("SUM({s})")).collect();
    params.push(i64::try_from(q.limit + 1).unwrap_or(i64::MAX).into());
    let sql = format!(
        "SELECT b, {keys}, {sums} FROM (SELECT {bucket} AS b, * FROM {table} WHERE {filter}) t
         GROUP BY b, {keys} ORDER BY b, {keys} LIMIT ${}",
        params.len(),
        sums = sum_sql.join(", "),
    );
    let rows = db.rows(&sql, &params)?;
    if rows.len() > q.limit {
        return Err(StoreError::TooLarge {
            what,
            limit: q.limit,
        });
    }
    let n = q.group.len();
    rows.into_iter()
        .map(|r| {
            let mut fields = BTreeMap::new();
            for (i, name) in q.group.iter().enumerate() {
                fields.insert(name.clone(), r[1 + i].text()?);
            }
            Ok((r[0].int()?, fields, r[1 + n].text()?, r[2 + n..].to_vec()))
        })
        .collect()
}

pub(in crate::store) fn usage(db: &dyn Db, q: &BillQuery) -> Result<Vec<UsageRow>, StoreError> {
    grouped(
        db,
        "bill_usage_hours",
        "bill_usage_days",
        q,
        &[
            "instance_hours",
            "gpu_hours",
            "billed_cost",
            "effective_cost",
        ],
        "usage rows",
    )?
    .into_iter()
    .map(|(start, fields, currency, sums)| {
        Ok(UsageRow {
            start: utc(start),
            fields,
            instance_hours: sums[0].opt_real()?,
            gpu_hours: sums[1].real()?,
            billed_cost: sums[2].real()?,
            effective_cost: sums[3].real()?,
            currency,
        })
    })
    .collect()
}

pub(in crate::store) fn spend(db: &dyn Db, q: &BillQuery) -> Result<Vec<SpendRow>, StoreError> {
    let q = BillQuery {
        by: Some(match q.by {
            Some(Bucket::Month) => Bucket::Month,
            _ => Bucket::Day,
        }),
        ..q.clone()
    };
    grouped(
        db,
        "bill_spend_days",
        "bill_spend_days",
        &q,
        &["billed_cost", "effective_cost"],
        "spend rows",
    )?
    .into_iter()
    .map(|(start, fields, currency, sums)| {
        Ok(SpendRow {
            start: utc(start),
            fields,
            billed_cost: sums[0].real()?,
            effective_cost: sums[1].real()?,
            currency,
            allocated_billed_cost: None,
            allocated_effective_cost: None,
        })
    })
    .collect()
}

/// What every period of one commitment says about it.
#[derive(Default)]
struct Seen {
    provider: String,
    kind: Option<String>,
    category: Option<String>,
    unit: Option<String>,
    regions: BTreeSet<String>,
    instance_types: BTreeSet<String>,
    untyped_cover: bool,
    first_seen: Option<i64>,
    last_seen: Option<i64>,
    currency: String,
}

pub(in crate::store) fn commitments(
    db: &dyn Db,
    providers: &[String],
    since: i64,
    until: i64,
) -> Result<Vec<CommitmentRecord>, StoreError> {
    let mut params: Vec<Val> = Vec::new();
    let mut filter = String::from("1 = 1");
    any_of("provider", providers, &mut params, &mut filter);
    let mut seen: BTreeMap<(String, String), Seen> = BTreeMap::new();
    for r in db.rows(
        &format!(
            "SELECT source, commitment_id, provider, kind, category, unit, regions_json,
                    instance_types_json, untyped_cover, first_seen, last_seen, currency
             FROM bill_commitments WHERE {filter}
             ORDER BY source, commitment_id, billing_period"
        ),
        &params,
    )? {
        let s = seen.entry((r[0].text()?, r[1].text()?)).or_default();
        s.provider = r[2].text()?;
        s.kind = s.kind.take().or(r[3].opt_text()?);
        s.category = s.category.take().or(r[4].opt_text()?);
        s.unit = s.unit.take().or(r[5].opt_text()?);
        let set = |v: &Val| -> Result<BTreeSet<String>, StoreError> {
            serde_json::from_str(&v.text()?)
                .map_err(|e| StoreError::Corrupt(format!("bill_commitments: {e}")))
        };
        s.regions.extend(set(&r[6])?);
        s.instance_types.extend(set(&r[7])?);
        s.untyped_cover |= r[8].int()? == 1;
        let first = r[9].int()?;
        s.first_seen = Some(s.first_seen.map_or(first, |f| f.min(first)));
        if let Some(last) = r[10].opt_int()? {
            s.last_seen = Some(s.last_seen.map_or(last, |l| l.max(last)));
        }
        s.currency = r[11].text()?;
    }
    let mut used: HashMap<(String, String), Vec<Val>> = HashMap::new();
    for r in db.rows(
        "SELECT source, commitment_id, SUM(used_quantity), SUM(unused_quantity), SUM(used_cost),
                SUM(unused_cost), SUM(covered_instance_hours), SUM(covered_gpu_hours)
         FROM bill_commitment_hours WHERE start >= $1 AND start < $2
         GROUP BY source, commitment_id",
        &[since.into(), until.into()],
    )? {
        used.insert((r[0].text()?, r[1].text()?), r[2..].to_vec());
    }
    let mut out = Vec::new();
    for ((source, id), s) in seen {
        let sums = used.remove(&(source.clone(), id.clone()));
        let first_seen = s.first_seen.unwrap_or_default();
        let bought_in_window = (since..until).contains(&first_seen);
        let Some(sums) = sums.or_else(|| bought_in_window.then(|| vec![Val::Null; 6])) else {
            continue;
        };
        let used_q = sums[0].opt_real()?;
        let unused_q = sums[1].opt_real()?;
        let (used_c, unused_c) = (sums[2].real()?, sums[3].real()?);
        let utilization = if used_q.is_some() || unused_q.is_some() {
            let (u, n) = (used_q.unwrap_or(0.0), unused_q.unwrap_or(0.0));
            (u + n > 0.0).then(|| u / (u + n))
        } else {
            (used_c + unused_c > 0.0).then(|| used_c / (used_c + unused_c))
        };
        let single = |set: &BTreeSet<String>| {
            (set.len() == 1)
                .then(|| set.iter().next().cloned())
                .flatten()
        };
        out.push(CommitmentRecord {
            id,
            provider: s.provider,
            source,
            kind: s.kind,
            category: s.category,
            unit: s.unit,
            region: single(&s.regions),
            instance_type: if s.untyped_cover {
                None
            } else {
                single(&s.instance_types)
            },
            first_seen: utc(first_seen),
            last_seen: s.last_seen.map(utc),
            used_quantity: used_q,
            unused_quantity: unused_q,
            utilization,
            covered_instance_hours: sums[4].real()?,
            covered_gpu_hours: sums[5].real()?,
            currency: s.currency,
        });
    }
    Ok(out)
}

pub(in crate::store) fn coverage(
    db: &dyn Db,
    providers: &[String],
    since: i64,
    until: i64,
) -> Result<Vec<CoverageRow>, StoreError> {
    let mut params: Vec<Val> = vec![since.into(), until.into()];
    let mut filter = String::from("start >= $1 AND start < $2 AND price_kind <> 'spot'");
    any_of("provider", providers, &mut params, &mut filter);
    let mut rows: BTreeMap<(String, String, String), (f64, f64)> = BTreeMap::new();
    for r in db.rows(
        &format!(
            "SELECT provider, region, instance_type, price_kind,
                    SUM(COALESCE(instance_hours, gpu_hours))
             FROM bill_usage_days WHERE {filter}
             GROUP BY provider, region, instance_type, price_kind"
        ),
        &params,
    )? {
        let e = rows
            .entry((r[0].text()?, r[1].text()?, r[2].text()?))
            .or_default();
        let hours = r[4].real()?;
        if r[3].text()? == "on_demand" {
            e.0 += hours;
        } else {
            e.1 += hours;
        }
    }
    Ok(rows
        .into_iter()
        .map(
            |((provider, region, instance_type), (on_demand, covered))| CoverageRow {
                provider,
                region,
                instance_type,
                on_demand_hours: on_demand,
                covered_hours: covered,
                coverage: (on_demand + covered > 0.0).then(|| covered / (on_demand + covered)),
            },
        )
        .collect())
}

pub(in crate::store) fn count_periods_before(db: &dyn Db, before: &str) -> Result<u64, StoreError> {
    let rows = db.rows(
        "SELECT count(*) FROM bill_loads WHERE billing_period < $1",
        &[before.into()],
    )?;
    Ok(rows.first().map_or(Ok(0), |r| r[0].int())?.unsigned_abs())
}

/// The first and last hour of stored GPU usage.
pub(in crate::store) fn usage_span(db: &dyn Db) -> Result<Option<(i64, i64)>, StoreError> {
    let rows = db.rows("SELECT min(start), max(start) FROM bill_usage_hours", &[])?;
    match rows.first() {
        Some(r) => Ok(r[0].opt_int()?.zip(r[1].opt_int()?)),
        None => Ok(None),
    }
}

pub(in crate::store) fn commitment_days(
    db: &dyn Db,
    since: i64,
    until: i64,
) -> Result<Vec<CommitmentDay>, StoreError> {
    db.rows(
        "SELECT source, commitment_id, (start / 86400) * 86400 AS day, SUM(used_quantity),
                SUM(unused_quantity), SUM(used_cost), SUM(unused_cost)
         FROM bill_commitment_hours WHERE start >= $1 AND start < $2
         GROUP BY source, commitment_id, (start / 86400) * 86400
         ORDER BY source, commitment_id, day",
        &[since.into(), until.into()],
    )?
    .into_iter()
    .map(|r| {
        Ok(CommitmentDay {
            source: r[0].text()?,
            id: r[1].text()?,
            day: r[2].int()?,
            used_quantity: r[3].opt_real()?,
            unused_quantity: r[4].opt_real()?,
            used_cost: r[5].real()?,
            unused_cost: r[6].real()?,
        })
    })
    .collect()
}

pub(in crate::store) fn commitment_latest(
    db: &dyn Db,
) -> Result<Vec<LatestCommitmentHour>, StoreError> {
    db.rows(
        "SELECT h.source, h.commitment_id, h.start, SUM(h.used_quantity), SUM(h.unused_quantity),
                SUM(h.used_cost), SUM(h.unused_cost)
         FROM bill_commitment_hours h
         JOIN (SELECT source, commitment_id, max(start) AS last
               FROM bill_commitment_hours GROUP BY source, commitment_id) l
           ON h.source = l.source AND h.commitment_id = l.commitment_id AND h.start = l.last
         GROUP BY h.source, h.commitment_id, h.start
         ORDER BY h.source, h.commitment_id",
        &[],
    )?
    .into_iter()
    .map(|r| {
        Ok(LatestCommitmentHour {
            source: r[0].text()?,
            id: r[1].text()?,
            start: r[2].int()?,
            used_quantity: r[3].opt_real()?,
            unused_quantity: r[4].opt_real()?,
            used_cost: r[5].real()?,
            unused_cost: r[6].real()?,
        })
    })
    .collect()
}

/// Per source, the first and last day of stored spend.
pub(in crate::store) fn spend_span(db: &dyn Db) -> Result<BTreeMap<String, SpendSpan>, StoreError> {
    let mut out: BTreeMap<String, SpendSpan> = BTreeMap::new();
    for r in db.rows(
        "SELECT source, provider, min(start), max(start) FROM bill_spend_days
         GROUP BY source, provider",
        &[],
    )? {
        let (first, last) = (r[2].int()?, r[3].int()?);
        let span = out.entry(r[0].text()?).or_insert(SpendSpan {
            first,
            last,
            providers: BTreeMap::new(),
        });
        span.first = span.first.min(first);
        span.last = span.last.max(last);
        span.providers.insert(r[1].text()?, (first, last));
    }
    Ok(out)
}

pub(in crate::store) fn gpu_catalog(db: &dyn Db, provider: &str) -> Result<GpuCatalog, StoreError> {
    let types = db
        .rows(
            "SELECT instance_type, gpu_model, gpu_count FROM instance_types
             WHERE provider = $1 AND gpu_count > 0",
            &[provider.into()],
        )?
        .into_iter()
        .map(|r| Ok((r[0].text()?, r[1].text()?, r[2].real()?)))
        .collect::<Result<_, StoreError>>()?;
    let skus = db
        .rows(
            "SELECT DISTINCT v.source, s.instance_type, t.gpu_model
             FROM price_versions v
             JOIN price_series s ON s.id = v.series_id
             JOIN instance_types t ON t.provider = s.provider AND t.instance_type = s.instance_type
             WHERE s.provider = $1 AND v.source IS NOT NULL AND v.source <> ''
               AND t.gpu_count > 0 AND v.withdrawn = 0",
            &[provider.into()],
        )?
        .into_iter()
        .map(|r| Ok((r[0].text()?, r[1].text()?, r[2].text()?)))
        .collect::<Result<_, StoreError>>()?;
    Ok((types, skus))
}
