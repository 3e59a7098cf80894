//! EC2 Capacity Blocks for ML: instances of one type in one zone reserved for
//! a fixed window and paid in full up front. Their prices exist only in
//! `DescribeCapacityBlockOfferings` (credentials needed); the price list holds
//! just a fee row per block, which is never a price.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};

use super::{AwsConfig, PROVIDER, gpus};
use crate::ProviderError;
use crate::snapshot::{PriceKind, PriceRecord, Snapshot, Window};

/// The families AWS sells Capacity Blocks of, one instance at a time.
/// UltraServers (p6e) and Trainium are sold by the server and not asked for.
const FAMILIES: &[&str] = &["p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"];

/// The types of `types` AWS may offer Capacity Blocks of.
pub(super) fn eligible<'a>(types: &[&'a str]) -> Vec<&'a str> {
    types
        .iter()
        .copied()
        .filter(|t| FAMILIES.contains(&gpus::family(t)))
        .collect()
}

/// Every offering for each eligible type, count and duration of `config` in
/// `region`, each page to its end. No date range is sent: AWS then searches
/// its whole sell window (up to 8 weeks ahead) for the cheapest offerings.
pub(super) async fn offerings(
    ec2: &aws_sdk_ec2::Client,
    region: &str,
    types: &[&str],
    config: &AwsConfig,
    out: &mut Snapshot,
) -> Result<(), ProviderError> {
    let call = format!("ec2 DescribeCapacityBlockOfferings in {region}");
    let mut seen = BTreeSet::new();
    for t in eligible(types) {
        for count in &config.capacity_block_counts {
            for hours in &config.capacity_block_hours {
                let pages: Vec<_> = ec2
                    .describe_capacity_block_offerings()
                    .instance_type(t)
                    .instance_count(i32::try_from(*count).unwrap_or(i32::MAX))
                    .capacity_duration_hours(i32::try_from(*hours).unwrap_or(i32::MAX))
                    .max_results(100)
                    .into_paginator()
                    .send()
                    .collect()
                    .await;
                for page in pages {
                    crate::progress::answered();
                    let page = page.map_err(|e| super::sdk::sdk_error(&call, &e))?;
                    for o in page.capacity_block_offerings() {
                        let id = o.capacity_block_offering_id().unwrap_or_default();
                        // One offering may answer several requests.
                        if !seen.insert(id.to_owned()) {
                            continue;
                        }
                        match record(region, o) {
                            Ok(r) => out.prices.push(r),
                            Err(reason) => {
                                tracing::warn!(provider = PROVIDER, offering = %format!("offering:{id}"), reason, "Capacity Block offering not read.");
                                out.skip(reason);
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

fn time(t: Option<&aws_sdk_ec2::primitives::DateTime>) -> Option<DateTime<Utc>> {
    let t = t?;
    DateTime::from_timestamp(t.secs(), t.subsec_nanos())
}

/// The record of one offering, or why it is not one.
fn record(
    region: &str,
    o: &aws_sdk_ec2::types::CapacityBlockOffering,
) -> Result<PriceRecord, &'static str> {
    if o.tenancy().is_some_and(|t| t.as_str() != "default") {
        return Err("tenancy_not_default");
    }
    if o.currency_code().is_some_and(|c| c != "USD") {
        return Err("currency_not_usd");
    }
    let (Some(id), Some(instance_type), Some(zone), Some(start), Some(end), Some(count)) = (
        o.capacity_block_offering_id(),
        o.instance_type(),
        o.availability_zone(),
        time(o.start_date()),
        time(o.end_date()),
        o.instance_count().and_then(|n| u32::try_from(n).ok()),
    ) else {
        return Err("incomplete_offering");
    };
    let window = Window {
        start,
        end,
        instance_count: count,
    };
    if count == 0 || window.hours() <= 0.0 {
        return Err("incomplete_offering");
    }
    // A string, and the total for the whole block: all instances, all hours.
    let fee: f64 = match o.upfront_fee().map(|f| f.trim().parse()) {
        Some(Ok(fee)) if f64::is_finite(fee) && fee > 0.0 => fee,
        _ => return Err("zero_price"),
    };
    let usd_per_hour = fee / (f64::from(count) * window.hours());
    Ok(PriceRecord {
        region: region.to_owned(),
        zone: Some(zone.to_owned()),
        instance_type: instance_type.to_owned(),
        price_kind: PriceKind::CapacityBlock,
        offering_class: None,
        usd_per_hour,
        upfront_usd: fee,
        recurring_usd_per_hour: 0.0,
        source: Some(id.to_owned()),
        available_regions: Vec::new(),
        max_instances: None,
        price_scope: crate::PriceScope::Instance,
        window: Some(window),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_families_sold_as_blocks_are_asked_for() {
        let types = [
            "p5.48xlarge",
            "p5en.48xlarge",
            "g6.xlarge",
            "p6e-gb200.36xlarge",
            "trn1.32xlarge",
        ];
        assert_eq!(eligible(&types), ["p5.48xlarge", "p5en.48xlarge"]);
    }

    /// An instant block that starts at 08:55 ends at 11:30 the next day: 26 h
    /// 35 min, priced over every minute; its duration fields (26 and 35)
    /// are not read.
    #[test]
    fn an_instant_block_is_priced_over_its_minutes() {
        let at = |s: &str| {
            aws_sdk_ec2::primitives::DateTime::from_str(
                s,
                aws_sdk_ec2::primitives::DateTimeFormat::DateTime,
            )
            .unwrap()
        };
        let offering = aws_sdk_ec2::types::CapacityBlockOffering::builder()
            .capacity_block_offering_id("cb-instant2635")
            .instance_type("p5.48xlarge")
            .availability_zone("us-east-2b")
            .instance_count(2)
            .start_date(at("2027-03-09T08:55:00Z"))
            .end_date(at("2027-03-10T11:30:00Z"))
            .capacity_block_duration_hours(26)
            .capacity_block_duration_minutes(35)
            .upfront_fee("2126.67")
            .currency_code("USD")
            .tenancy(aws_sdk_ec2::types::CapacityReservationTenancy::Default)
            .build();
        let r = record("us-east-2", &offering).unwrap();
        let w = r.window.unwrap();
        assert!((w.hours() - (26.0 + 35.0 / 60.0)).abs() < 1e-12);
        assert!((r.usd_per_hour - 2126.67 / (2.0 * w.hours())).abs() < 1e-12);
        assert_eq!((r.upfront_usd, w.instance_count), (2126.67, 2));
    }
}
