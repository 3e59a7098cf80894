//! What the bills say is already bought, as a plan takes it: reservations of
//! a known instance type and region become owned capacity (their hourly
//! quantity as the count); spend-based commitments (savings plans, spend
//! CUDs), and reservations the bills do not place, are listed as held but
//! not modelled, with their hourly amount. Nothing found is dropped unsaid.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::bills::time::{DAY, to_utc};
use crate::optimizer::Owned;
use crate::store::{Store, StoreError};

/// A reservation the plan counts as owned.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelledCommitment {
    pub commitment: String,
    pub source: String,
    /// `provider/region/instance_type`.
    pub offer: String,
    /// Instances per hour, from its latest hour in the bills.
    pub count: f64,
    pub last_hour: DateTime<Utc>,
    /// The bills give no end date: it is taken to last the whole horizon.
    pub remaining: &'static str,
}

/// A commitment the plan does not model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HeldCommitment {
    pub commitment: String,
    pub source: String,
    pub provider: String,
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub region: Option<String>,
    pub instance_type: Option<String>,
    /// Its amortized cost per hour (used plus unused), in `currency`.
    pub hourly_amount: f64,
    pub currency: String,
    pub last_hour: DateTime<Utc>,
    pub why: String,
}

/// The commitments of the bills, split by whether a plan can model them.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct FromBills {
    pub modelled: Vec<ModelledCommitment>,
    pub not_modelled: Vec<HeldCommitment>,
    /// The owned entries for the plan (options chosen from the catalog).
    #[serde(skip)]
    pub owned: Vec<Owned>,
}

/// Commitments seen in the last `ACTIVE_DAYS` days of commitment hours count
/// as still held; older ones ended and are left out of both lists.
const ACTIVE_DAYS: i64 = 2;

/// Reads the commitments still held at the end of the bills.
///
/// # Errors
/// On a store error.
pub fn owned_from_bills(store: &dyn Store) -> Result<FromBills, StoreError> {
    let latest = store.bill_commitment_latest()?;
    let Some(newest) = latest.iter().map(|l| l.start).max() else {
        return Ok(FromBills::default());
    };
    let since = newest - ACTIVE_DAYS * DAY;
    let records = store.bill_commitments(&[], since, newest + 1)?;
    let mut out = FromBills::default();
    for l in latest.iter().filter(|l| l.start >= since) {
        let Some(r) = records
            .iter()
            .find(|r| r.source == l.source && r.id == l.id)
        else {
            continue;
        };
        let quantity = l.used_quantity.unwrap_or(0.0) + l.unused_quantity.unwrap_or(0.0);
        let held = |why: &str| HeldCommitment {
            commitment: r.id.clone(),
            source: r.source.clone(),
            provider: r.provider.clone(),
            kind: r.kind.clone(),
            region: r.region.clone(),
            instance_type: r.instance_type.clone(),
            hourly_amount: l.used_cost + l.unused_cost,
            currency: r.currency.clone(),
            last_hour: to_utc(l.start),
            why: why.to_owned(),
        };
        let reservation = r.kind.as_deref() == Some("reservation");
        match (&r.region, &r.instance_type) {
            _ if !reservation => out.not_modelled.push(held(
                "spend-based: it discounts any usage up to an hourly amount, not instances",
            )),
            (Some(region), Some(instance_type))
                if l.used_quantity.is_some() || l.unused_quantity.is_some() =>
            {
                if quantity <= 0.0 {
                    out.not_modelled
                        .push(held("its latest hour in the bills reserves no instances"));
                    continue;
                }
                let offer = format!("{}/{region}/{instance_type}", r.provider);
                out.owned.push(Owned {
                    offer: offer.clone(),
                    option: String::new(),
                    count: quantity,
                    remaining_hours: None,
                });
                out.modelled.push(ModelledCommitment {
                    commitment: r.id.clone(),
                    source: r.source.clone(),
                    offer,
                    count: quantity,
                    last_hour: to_utc(l.start),
                    remaining: "the whole horizon (the bills give no end date)",
                });
            }
            (Some(_), Some(_)) => out
                .not_modelled
                .push(held("the bills give its cost but not how many instances")),
            _ => out.not_modelled.push(held(
                "the bills do not name one region and instance type for it",
            )),
        }
    }
    Ok(out)
}
