use super::*;

fn rule(kind: RuleKind, cooldown: Option<std::time::Duration>) -> Rule {
    Rule {
        name: "r".into(),
        kind,
        gpu_models: vec![],
        price_kinds: vec![],
        price_scopes: vec![gpuplan_providers::PriceScope::Instance],
        providers: vec![],
        regions: vec![],
        threshold: Some(Threshold::PerGpuHour(2.0)),
        every_offer: false,
        hysteresis: 0.05,
        cooldown,
        channels: vec!["hook".into(), "chat".into()],
        plans: vec![],
        percent: None,
        amount: None,
        days: 0,
        min_days: None,
    }
}

/// A catalog holding `snap` as a sync of `aws` at hour 0 wrote it, and its
/// freshness then.
fn synced(
    snap: &gpuplan_providers::Snapshot,
) -> (tempfile::TempDir, crate::store::SqliteStore, Freshness) {
    let (dir, store) = crate::store::test_support::synced(snap);
    let fresh =
        Freshness::read(&store, BTreeMap::new(), crate::store::test_support::at(0)).unwrap();
    (dir, store, fresh)
}

/// A `price_below` observation of the rule's threshold of 2, crossed and
/// re-armed by the rule's own hysteresis.
fn obs(rule: &Rule, value: f64) -> Observation {
    let (active, rearm) = crossing(true, value, 2.0, rule.hysteresis);
    Observation {
        key: "cheapest".into(),
        value,
        active,
        rearm,
        message: String::new(),
        details: Value::Null,
    }
}

/// Runs the state machine over a series of values; returns how many times it fired.
fn fires(rule: &Rule, values: &[f64]) -> Vec<usize> {
    let mut states: Vec<AlertState> = Vec::new();
    let mut fired_at = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let now = DateTime::from_timestamp(1_800_000_000 + i as i64 * 600, 0).unwrap();
        let d = decide(rule, &states, &[obs(rule, *v)], now);
        if !d.messages.is_empty() {
            assert_eq!(d.messages.len(), 2, "one message per channel");
            fired_at.push(i);
        }
        for s in d.states {
            states.retain(|x| x.key != s.key);
            states.push(s);
        }
    }
    fired_at
}

#[test]
fn a_crossing_fires_once_and_rearms_only_past_the_hysteresis() {
    let r = rule(RuleKind::PriceBelow, None);
    // Below at 1; stays below; 2.05 is above 2 but within 5% -> not re-armed;
    // 2.2 re-arms; below again at 6 fires again.
    let series = [2.5, 1.5, 1.4, 1.6, 2.05, 1.9, 2.2, 1.8];
    assert_eq!(fires(&r, &series), vec![1, 7]);
    // With 2% hysteresis, 2.05 is past 2.04 and re-arms: 1.9 fires again.
    let narrow = Rule {
        hysteresis: 0.02,
        ..r.clone()
    };
    assert_eq!(fires(&narrow, &series), vec![1, 5, 7]);
    // Above rules re-arm below the threshold by the hysteresis.
    assert_eq!(crossing(false, 1.95, 2.0, 0.05), (false, false));
    assert_eq!(crossing(false, 1.9, 2.0, 0.05), (false, true));
}

#[test]
fn price_rules_ignore_gpu_only_prices_unless_they_ask_for_them() {
    use crate::store::test_support::snapshot;
    // gpu0 at 1.0/h; gpu1 at 2.0/h is a price of the GPU alone.
    let mut snap = snapshot(2, 1.0);
    for p in snap
        .prices
        .iter_mut()
        .filter(|p| p.instance_type == "gpu1.xlarge")
    {
        p.price_scope = gpuplan_providers::PriceScope::GpuOnly;
        p.usd_per_hour = 0.1;
    }
    let (_dir, store, fresh) = synced(&snap);
    let mut r = rule(RuleKind::PriceBelow, None);
    r.price_kinds = vec![gpuplan_providers::PriceKind::OnDemand];
    r.every_offer = true;
    let keys = |r: &Rule| -> Vec<String> {
        observe(&store, &fresh, r, &[])
            .unwrap()
            .into_iter()
            .filter(|o| o.active)
            .map(|o| o.key)
            .collect()
    };
    assert_eq!(keys(&r), ["aws/us-east-1/gpu0.xlarge/-/on_demand"]);
    r.price_scopes.push(gpuplan_providers::PriceScope::GpuOnly);
    assert_eq!(keys(&r).len(), 2);
}

#[test]
fn a_suspicious_price_rule_fires_once_per_run_naming_the_rows_it_matches() {
    use crate::store::test_support::{at, snapshot};
    use crate::store::{Suspicion, SuspiciousPrice, Writes as _};
    let dir = tempfile::tempdir().unwrap();
    let mut store = crate::store::SqliteStore::open(&dir.path().join("c.db")).unwrap();
    let row = |instance_type: &str, gpu_model: &str| SuspiciousPrice {
        region: "us-east-1".into(),
        zone: None,
        instance_type: instance_type.into(),
        gpu_model: gpu_model.into(),
        price_kind: "on_demand".into(),
        offering_class: None,
        price_scope: "instance".into(),
        usd_per_hour: 0.032,
        usd_per_gpu_hour: 0.004,
        reason: Suspicion::BelowPrevious,
        reference_usd: 32.7726,
    };
    let run = store
        .begin_run("aws", gpuplan_providers::Scope::Full, at(0))
        .unwrap();
    let flagged = [
        row("p4d.24xlarge", "A100-40GB"),
        row("p5.48xlarge", "H100-80GB"),
    ];
    store
        .write_snapshot(run, "aws", &snapshot(1, 1.0), &flagged, at(0), at(0))
        .unwrap();
    // A later run (a spot-only sync overlapping the full one) that lists
    // the same p4d price again, and a new one.
    let later = store
        .begin_run("aws", gpuplan_providers::Scope::SpotHistory, at(0))
        .unwrap();
    let mut spot = snapshot(1, 1.0);
    spot.scope = gpuplan_providers::Scope::SpotHistory;
    spot.prices.clear();
    let again = [
        row("p4d.24xlarge", "A100-40GB"),
        row("p4de.24xlarge", "A100-80GB"),
    ];
    store
        .write_snapshot(later, "aws", &spot, &again, at(0), at(0))
        .unwrap();
    let fresh = Freshness::read(&store, BTreeMap::new(), at(1)).unwrap();
    let mut r = rule(RuleKind::SuspiciousPrice, None);
    r.threshold = None;
    r.gpu_models = vec!["A100".into()];
    let sources = ["aws".to_owned()];
    let seen = observe(&store, &fresh, &r, &sources).unwrap();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[0].key, format!("aws/run/{run}"));
    assert_eq!(seen[1].key, format!("aws/run/{later}"));
    assert!(
        seen[1].message.contains("p4de.24xlarge") && !seen[1].message.contains("p4d.24xlarge "),
        "{}",
        seen[1].message
    );
    assert!(
        seen[0]
            .message
            .contains("p4d.24xlarge on_demand in us-east-1 at 0.0320 USD/h, was 32.7726")
            && !seen[0].message.contains("p5.48xlarge"),
        "{}",
        seen[0].message
    );
    assert_eq!(seen[0].details["prices"].as_array().unwrap().len(), 1);
    let first = decide(&r, &[], &seen, fresh.now);
    assert_eq!(first.messages.len(), 4, "one per run and channel");
    let again = observe(&store, &fresh, &r, &sources).unwrap();
    assert!(
        decide(&r, &first.states, &again, fresh.now)
            .messages
            .is_empty()
    );
    // Other sources' runs, and rows the rule does not match, say nothing.
    assert!(
        observe(&store, &fresh, &r, &["azure".to_owned()])
            .unwrap()
            .is_empty()
    );
    r.gpu_models = vec!["L4".into()];
    assert!(observe(&store, &fresh, &r, &sources).unwrap().is_empty());
}

#[test]
fn a_cooldown_keeps_a_re_armed_key_quiet() {
    let r = rule(
        RuleKind::PriceBelow,
        Some(std::time::Duration::from_secs(3600)),
    );
    // Each step is 10 minutes: re-armed and below again at step 3 is within
    // the hour, so it fires only once the hour has passed (step 6).
    assert_eq!(
        fires(&r, &[1.5, 2.5, 2.5, 1.5, 1.5, 1.5, 1.5, 1.5]),
        vec![0, 6]
    );
}

#[test]
fn a_new_offer_rule_learns_the_catalog_silently_first() {
    let r = rule(RuleKind::NewOffer, None);
    let o = |k: &str| Observation {
        key: k.into(),
        value: 1.0,
        active: true,
        rearm: false,
        message: String::new(),
        details: Value::Null,
    };
    let now = Utc::now();
    let first = decide(&r, &[], &[o("a"), o("b")], now);
    assert_eq!((first.states.len(), first.messages.len()), (2, 0));
    let second = decide(&r, &first.states, &[o("a"), o("b"), o("c")], now);
    assert_eq!((second.states.len(), second.messages.len()), (1, 2));
}

#[test]
fn a_changed_plan_alerts_its_rules_and_an_unchanged_one_does_not() {
    let r = rule(RuleKind::PlanChanged, None);
    let change = |changed| crate::optimizer::PlanChange {
        changed,
        reasons: vec!["reserved portfolio changed in 1 entry".into()],
        reserved_diff: BTreeMap::new(),
    };
    let result = json!({"status": "optimal", "objective": 1200.0});
    let d = plan_changed(
        std::slice::from_ref(&r),
        &[],
        "weekly",
        &change(true),
        &result,
        Utc::now(),
    );
    assert_eq!(d.messages.len(), 2);
    assert!(
        d.messages[0].payload["message"]
            .as_str()
            .unwrap()
            .contains("plan weekly changed")
    );
    assert!(
        plan_changed(&[r], &[], "weekly", &change(false), &result, Utc::now())
            .messages
            .is_empty()
    );
}

#[test]
fn globs_match_whole_names() {
    assert!(glob("azure*", "azure"));
    assert!(glob("us-*-1", "us-east-1"));
    assert!(glob("file:?nprem", "file:onprem"));
    assert!(!glob("us-*", "eu-west-1"));
}

#[test]
fn a_window_rule_fires_once_per_offering_long_and_cheap_enough_and_forgets_ended_ones() {
    use crate::store::test_support::{at, block, snapshot};
    // One L4 per instance: 24-hour windows at 10.0, 11.0 and 9.375 USD per GPU-hour.
    let mut snap = snapshot(1, 1.0);
    snap.prices.extend([
        block(48, 1, 240.0),
        block(72, 1, 264.0),
        block(48, 4, 900.0),
    ]);
    let (_dir, store, fresh) = synced(&snap);
    let mut r = rule(RuleKind::WindowOffered, None);
    r.threshold = Some(Threshold::PerGpuHour(10.0));
    r.min_days = Some(1.0);
    let seen = observe(&store, &fresh, &r, &[]).unwrap();
    let keys: Vec<&str> = seen.iter().map(|o| o.key.as_str()).collect();
    assert_eq!(
        keys,
        [
            "aws/us-east-1/gpu0.xlarge/us-east-1a/x4/2027-01-17T08:00:00Z..2027-01-18T08:00:00Z",
            "aws/us-east-1/gpu0.xlarge/us-east-1a/x1/2027-01-17T08:00:00Z..2027-01-18T08:00:00Z",
        ]
    );
    assert!(
        seen[1]
            .message
            .contains("capacity_block window of 1 x gpu0.xlarge (1 x L4) in us-east-1a")
            && seen[1]
                .message
                .contains("(24.0 hours), 240.00 USD up front, 10.0000 USD/GPU-hour"),
        "{}",
        seen[1].message
    );
    // The first evaluation reports what is on offer; later ones stay quiet.
    let first = decide(&r, &[], &seen, fresh.now);
    assert_eq!(first.messages.len(), 4, "two offerings, two channels");
    let again = observe(&store, &fresh, &r, &[]).unwrap();
    let second = decide(&r, &first.states, &again, fresh.now);
    assert!(second.messages.is_empty() && second.forget.is_empty());

    // Too short, too dear, or another GPU: nothing.
    r.min_days = Some(1.5);
    assert!(observe(&store, &fresh, &r, &[]).unwrap().is_empty());
    r.min_days = None;
    r.threshold = Some(Threshold::PerGpuHour(9.0));
    assert!(observe(&store, &fresh, &r, &[]).unwrap().is_empty());
    r.threshold = None;
    r.gpu_models = vec!["H100".into()];
    assert!(observe(&store, &fresh, &r, &[]).unwrap().is_empty());

    // Once the windows have ended, they are no longer observed and their
    // states are forgotten; states of windows still ahead are kept.
    let ended = decide(&r, &first.states, &[], at(73));
    assert_eq!(ended.forget.len(), 2);
    assert!(ended.messages.is_empty());
    assert!(decide(&r, &first.states, &[], at(71)).forget.is_empty());
}
