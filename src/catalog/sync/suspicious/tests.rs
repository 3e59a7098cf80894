use gpuplan_providers::{InstanceType, PriceRecord, SpotObservation};

use super::*;
use crate::store::test_support::{at, snapshot};

/// The catalog before the sync: `snapshot(3, 1.0)` of this source (L4 types
/// at 1, 2 and 3 an hour on demand; spot of gpu0 in us-east-1a last seen at
/// 1.333 at hour 1), and other sources' L4s on demand at 0.8 to 1.2: an L4
/// on-demand median of 1.05.
fn baseline() -> Baseline {
    let mut b = Baseline::default();
    let before = snapshot(3, 1.0);
    for t in &before.instance_types {
        b.types
            .insert(t.instance_type.clone(), (t.gpu_model.clone(), t.gpu_count));
    }
    for p in &before.prices {
        b.previous.insert(
            (
                p.region.clone(),
                None,
                p.instance_type.clone(),
                p.price_kind.to_string(),
                None,
                None,
            ),
            (p.usd_per_hour, None),
        );
    }
    b.previous.insert(
        (
            "us-east-1".into(),
            Some("us-east-1a".into()),
            "gpu0.xlarge".into(),
            "spot".into(),
            None,
            None,
        ),
        (1.0 / 3.0 + 1.0, Some(at(1))),
    );
    b.medians.insert(
        ("L4".into(), "on_demand".into()),
        median(vec![0.8, 0.9, 1.0, 1.1, 1.2, 1.0, 2.0, 3.0]),
    );
    b
}

fn on_demand(snap: &mut Snapshot, instance_type: &str, usd: f64) {
    let p = snap
        .prices
        .iter_mut()
        .find(|p| p.instance_type == instance_type && p.price_kind == PriceKind::OnDemand)
        .unwrap();
    p.usd_per_hour = usd;
    p.recurring_usd_per_hour = usd;
}

fn found(snap: &Snapshot) -> Vec<(String, String, Suspicion)> {
    find(&baseline(), snap)
        .into_iter()
        .map(|s| (s.instance_type, s.price_kind, s.reason))
        .collect()
}

#[test]
fn the_same_prices_again_are_not_suspicious() {
    assert!(found(&snapshot(3, 1.0)).is_empty());
}

#[test]
fn a_fall_below_a_tenth_of_the_previous_price_is_suspicious_and_a_cut_is_not() {
    let mut snap = snapshot(3, 1.0);
    // $1 to $0.05: the Capacity Block shape. $2 to $1: a price cut.
    on_demand(&mut snap, "gpu0.xlarge", 0.05);
    on_demand(&mut snap, "gpu1.xlarge", 1.0);
    let flagged = find(&baseline(), &snap);
    assert_eq!(flagged.len(), 1);
    let f = &flagged[0];
    assert_eq!(
        (f.instance_type.as_str(), f.reason, f.reference_usd),
        ("gpu0.xlarge", Suspicion::BelowPrevious, 1.0)
    );
    assert_eq!(f.usd_per_hour, 0.05);
    assert_eq!(
        f.to_string(),
        "gpu0.xlarge on_demand in us-east-1 at 0.0500 USD/h, was 1.0000"
    );
}

#[test]
fn a_new_price_far_below_the_median_for_its_gpu_and_kind_is_suspicious() {
    let mut snap = snapshot(3, 1.0);
    // A new 8-GPU type at 0.6 an hour: 0.075 per GPU-hour, under a tenth of
    // the L4 on-demand median.
    snap.instance_types.push(InstanceType {
        instance_type: "gpu8.48xlarge".into(),
        gpu_count: 8.0,
        ..snap.instance_types[0].clone()
    });
    snap.prices.push(PriceRecord {
        instance_type: "gpu8.48xlarge".into(),
        usd_per_hour: 0.6,
        recurring_usd_per_hour: 0.6,
        ..snap.prices[0].clone()
    });
    // A new type at 0.2: cheap, but not below a tenth of the median.
    snap.instance_types.push(InstanceType {
        instance_type: "gpu9.xlarge".into(),
        ..snap.instance_types[0].clone()
    });
    snap.prices.push(PriceRecord {
        instance_type: "gpu9.xlarge".into(),
        usd_per_hour: 0.2,
        recurring_usd_per_hour: 0.2,
        ..snap.prices[0].clone()
    });
    let flagged = find(&baseline(), &snap);
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    let f = &flagged[0];
    assert_eq!(f.instance_type, "gpu8.48xlarge");
    assert_eq!(f.reason, Suspicion::BelowMedian);
    assert!((f.usd_per_gpu_hour - 0.075).abs() < 1e-12);
    // The catalog before the sync, without the prices being judged.
    assert!(
        (f.reference_usd - 1.05).abs() < 1e-12,
        "{}",
        f.reference_usd
    );
    assert!(f.to_string().contains("the L4 median is 1.0500"), "{f}");
}

#[test]
fn medians_are_the_middle_value_or_the_mean_of_the_two() {
    assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 2.5);
    assert_eq!(median(vec![7.0]), 7.0);
}

/// A family poisoned in every region at once is judged against the catalog
/// before the sync, not against its own prices.
#[test]
fn prices_poisoned_together_are_not_their_own_reference() {
    let mut snap = snapshot(3, 1.0);
    snap.instance_types.clear();
    snap.prices.clear();
    snap.spot_observations.clear();
    let template = snapshot(1, 1.0);
    for i in 0..50 {
        let name = format!("new{i}.xlarge");
        snap.instance_types.push(InstanceType {
            instance_type: name.clone(),
            ..template.instance_types[0].clone()
        });
        snap.prices.push(PriceRecord {
            instance_type: name,
            usd_per_hour: 0.03,
            recurring_usd_per_hour: 0.03,
            ..template.prices[0].clone()
        });
    }
    assert_eq!(find(&baseline(), &snap).len(), 50);
}

#[test]
fn a_new_spot_observation_is_judged_and_an_old_one_is_not() {
    let mut snap = snapshot(3, 1.0);
    snap.spot_observations = vec![
        // Older than the stored newest: history, not a new price.
        SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: 0.001,
            observed_at: at(0),
        },
        SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: 0.01,
            observed_at: at(5),
        },
    ];
    assert_eq!(
        found(&snap),
        [(
            "gpu0.xlarge".into(),
            "spot".into(),
            Suspicion::BelowPrevious
        )]
    );
    snap.spot_observations.pop();
    assert!(found(&snap).is_empty());
}

#[test]
fn zero_prices_are_taken_out_and_counted() {
    let mut snap = snapshot(2, 1.0);
    on_demand(&mut snap, "gpu1.xlarge", 0.0);
    snap.spot_observations[0].usd_per_hour = 0.0;
    assert_eq!(drop_zero_prices(&mut snap), 2);
    assert_eq!(snap.prices.len(), 3);
    assert_eq!(snap.spot_observations.len(), 1);
    assert_eq!(snap.skipped["zero_price"], 2);
    assert_eq!(drop_zero_prices(&mut snap), 0);
}
