//! The store's behaviour, on both backends (`name::sqlite`, `name::postgres`).

use gpuplan_providers::{AvailabilityRecord, AvailabilitySignal, Scope, Snapshot};

use super::test_support::{
    at, block, count, hold_in_recent, last_good_run_id, move_recent_to_history, on_both_backends,
    snapshot, spot_rows, sync,
};
use super::*;

fn current(pool: &Pool) -> Vec<CurrentPrice> {
    let mut prices = pool.read(|s| s.current_prices()).unwrap();
    prices.sort_by(|a, b| {
        (&a.instance_type, &a.price_kind, &a.zone).cmp(&(&b.instance_type, &b.price_kind, &b.zone))
    });
    prices
}

on_both_backends! {
fn the_same_snapshot_twice_adds_no_rows_and_no_versions(db) {
    let pool = db.pool(0);
    let snap = snapshot(5, 1.0);
    let first = sync(&pool, &snap, 0);
    assert_eq!(first.prices_changed, 10);
    assert_eq!(first.spot_added, 2);
    let versions = count(&pool, "price_versions");
    let series = count(&pool, "price_series");

    let second = sync(&pool, &snap, 1);
    assert_eq!(
        (second.prices_seen, second.prices_changed, second.prices_withdrawn),
        (10, 0, 0)
    );
    assert_eq!((second.spot_seen, second.spot_added), (2, 0));
    assert_eq!(count(&pool, "price_versions"), versions);
    assert_eq!(count(&pool, "price_series"), series);
    assert_eq!(spot_rows(&pool), 2);
}

fn a_changed_price_adds_exactly_one_version_and_becomes_current(db) {
    let pool = db.pool(0);
    let mut snap = snapshot(5, 1.0);
    sync(&pool, &snap, 0);
    let versions = count(&pool, "price_versions");

    snap.prices[4].usd_per_hour = 9.5;
    snap.prices[4].recurring_usd_per_hour = 9.5;
    let stats = sync(&pool, &snap, 1);
    assert_eq!(stats.prices_changed, 1);
    assert_eq!(count(&pool, "price_versions"), versions + 1);

    let changed = current(&pool)
        .into_iter()
        .find(|p| p.instance_type == "gpu2.xlarge" && p.price_kind == "on_demand")
        .unwrap();
    assert_eq!(changed.usd_per_hour, 9.5);
    let history = pool.raw_i64(
        "SELECT count(*) FROM price_versions v JOIN price_series s ON s.id = v.series_id
         WHERE s.instance_type = 'gpu2.xlarge' AND s.price_kind = 'on_demand'",
    );
    assert_eq!(history, Some(2));
}

fn a_price_no_longer_listed_is_withdrawn_and_can_come_back(db) {
    let pool = db.pool(0);
    let full = snapshot(3, 1.0);
    sync(&pool, &full, 0);
    let mut fewer = full.clone();
    fewer.prices.retain(|p| p.instance_type != "gpu1.xlarge");
    let stats = sync(&pool, &fewer, 1);
    assert_eq!(stats.prices_withdrawn, 2);
    assert!(current(&pool).iter().all(|p| p.instance_type != "gpu1.xlarge"));

    let back = sync(&pool, &full, 2);
    assert_eq!(back.prices_changed, 2);
    assert_eq!(current(&pool).len(), 3 * 2 + 1);
}

fn a_spot_history_snapshot_leaves_prices_and_availability_alone(db) {
    let pool = db.pool(0);
    let mut full = snapshot(3, 1.0);
    full.availability.push(AvailabilityRecord {
        region: "us-east-1".into(),
        zone: None,
        instance_type: "gpu0.xlarge".into(),
        signal: AvailabilitySignal::InterruptionBucket(2),
    });
    sync(&pool, &full, 0);
    let mut spot_only = snapshot(1, 6.0);
    spot_only.scope = Scope::SpotHistory;
    spot_only.prices.clear();
    for o in &mut spot_only.spot_observations {
        o.observed_at += chrono::Duration::hours(2);
    }
    let stats = sync(&pool, &spot_only, 1);
    assert_eq!((stats.spot_added, stats.prices_withdrawn), (2, 0));
    assert_eq!(count(&pool, "availability"), 1);
    assert_eq!(
        pool.read(|s| s.availability_of("interruption_bucket")).unwrap().len(),
        1
    );
    // Three list prices x 2 kinds, plus the newest spot observation.
    let prices = current(&pool);
    assert_eq!(prices.len(), 7);
    let spot = prices.iter().find(|p| p.price_kind == "spot").unwrap();
    assert_eq!(spot.usd_per_hour, 3.0);
    assert_eq!(spot.observed_at, Some(at(3)));
}

fn an_error_half_way_through_a_snapshot_stores_none_of_it(db) {
    let pool = db.pool(0);
    sync(&pool, &snapshot(10, 1.0), 0);
    let before = current(&pool);
    let versions = count(&pool, "price_versions");

    // New prices for every type, but one in the second half violates the schema.
    let mut bad = snapshot(10, 2.0);
    bad.prices[15].upfront_usd = -1.0;
    let (run, err) = pool.write(|s| {
        let run = s.begin_run("aws", Scope::Full, at(1)).unwrap();
        (run, s.write_snapshot(run, "aws", &bad, &[], at(1), at(1)).unwrap_err())
    });
    assert!(
        matches!(err, StoreError::Db(_) | StoreError::Postgres { .. }),
        "{err}"
    );

    assert_eq!(current(&pool), before);
    assert_eq!(count(&pool, "price_versions"), versions);
    let running = pool.raw_i64(&format!(
        "SELECT count(*) FROM sync_runs WHERE id = {run} AND status = 'running'"
    ));
    assert_eq!(running, Some(1));
}

fn a_run_closed_as_interrupted_cannot_store_its_snapshot_afterwards(db) {
    // A replica that took over a source marks the dead holder's run
    // interrupted; if that holder was only slow, its late write must fail.
    let pool = db.pool(0);
    let run = pool.write(|s| s.begin_run("aws", Scope::Full, at(0))).unwrap();
    let closed = pool
        .write(|s| s.fail_interrupted_runs(Some(("aws", Scope::Full)), at(1)))
        .unwrap();
    assert_eq!(closed, 1);
    let err = pool
        .write(|s| s.write_snapshot(run, "aws", &snapshot(2, 1.0), &[], at(0), at(2)))
        .unwrap_err();
    assert!(matches!(err, StoreError::RunClosed { .. }), "{err}");
    assert_eq!(count(&pool, "price_versions"), 0);
    // Another source's run is not touched.
    let other = pool.write(|s| s.begin_run("azure", Scope::Full, at(0))).unwrap();
    pool.write(|s| s.fail_interrupted_runs(Some(("aws", Scope::Full)), at(1)))
        .unwrap();
    pool.write(|s| s.write_snapshot(other, "azure", &snapshot(1, 1.0), &[], at(0), at(2)))
        .unwrap();
}

fn spot_history_includes_the_price_in_force_at_the_window_start(db) {
    let pool = db.pool(0);
    sync(&pool, &snapshot(1, 3.0), 0);
    pool.read(|store| {
        let points = store
            .spot_history("gpu0.xlarge", None, None, None, at(0) + chrono::Duration::minutes(30), None)
            .unwrap();
        assert_eq!(points.len(), 2);
        assert_eq!(points[0].observed_at, at(0));
        let none = store
            .spot_history("gpu9.xlarge", None, None, None, at(0), None)
            .unwrap();
        assert!(none.is_empty());
        // A bounded read answers up to its limit and refuses past it.
        let since = at(0) + chrono::Duration::minutes(30);
        let read = |limit| store.spot_history("gpu0.xlarge", Some("aws"), None, None, since, Some(limit));
        assert_eq!(read(2).unwrap().len(), 2);
        assert!(matches!(read(1), Err(StoreError::TooLarge { limit: 1, .. })));
    });
}

fn prices_of_some_types_and_at_a_past_time(db) {
    let pool = db.pool(0);
    let mut snap = snapshot(3, 1.0);
    sync(&pool, &snap, 0);
    snap.prices[0].usd_per_hour = 7.0;
    sync(&pool, &snap, 5);
    let only = [("aws".to_owned(), "gpu0.xlarge".to_owned())];
    pool.read(|s| {
        let some = s.current_prices_of(Some(&only)).unwrap();
        assert_eq!(some.len(), 3, "on-demand, commit and spot of gpu0");
        assert!(some.iter().all(|p| p.instance_type == "gpu0.xlarge"));
        let on_demand = |prices: &[CurrentPrice]| {
            prices
                .iter()
                .find(|p| p.price_kind == "on_demand" && p.instance_type == "gpu0.xlarge")
                .map(|p| p.usd_per_hour)
        };
        assert_eq!(on_demand(&some), Some(7.0));
        assert_eq!(on_demand(&s.prices_as_of(None, Some(at(1))).unwrap()), Some(1.0));
        let spot_then = s.prices_as_of(Some(&only), Some(at(0))).unwrap();
        let spot = spot_then.iter().find(|p| p.price_kind == "spot").unwrap();
        assert_eq!(spot.observed_at, Some(at(0)));
        assert_eq!(s.current_price_counts("aws").unwrap()["us-east-1"].len(), 3);
        assert_eq!(s.instance_type_names().unwrap().len(), 3);
        assert_eq!(s.newest_spot_by_region("aws").unwrap()["us-east-1"], at(1));
    });
}

fn sync_runs_record_counts_and_failures(db) {
    let pool = db.pool(0);
    sync(&pool, &snapshot(2, 1.0), 0);
    let failed = pool.write(|s| s.begin_run("aws", Scope::Full, at(1))).unwrap();
    pool.write(|s| s.fail_run(failed, at(1), "aws: HTTP 500")).unwrap();
    let runs = pool.read(|s| s.sync_runs(10)).unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].status, "failed");
    assert_eq!(runs[0].error.as_deref(), Some("aws: HTTP 500"));
    assert_eq!((runs[1].status.as_str(), runs[1].stats.prices_seen), ("ok", 4));
    assert_eq!(last_good_run_id(&pool, "aws"), Some(runs[1].id));
    assert_eq!(pool.read(|s| s.last_good_syncs()).unwrap().get("aws"), Some(&at(0)));
    assert_eq!(pool.read(|s| s.last_good_price_count("aws")).unwrap(), Some(4));
    let latest = pool.read(|s| s.latest_runs()).unwrap();
    assert_eq!(latest, [("aws".to_owned(), "failed".to_owned(), Some("aws: HTTP 500".to_owned()))]);
}

fn the_catalog_generation_changes_when_an_older_run_finishes_last(db) {
    let pool = db.pool(0);
    let early = pool.write(|s| s.begin_run("azure", Scope::Full, at(0))).unwrap();
    let late = pool.write(|s| s.begin_run("file:x", Scope::Full, at(0))).unwrap();
    pool.write(|s| s.write_snapshot(late, "file:x", &snapshot(1, 1.0), &[], at(0), at(0)))
        .unwrap();
    let after_late = pool.read(|s| s.catalog_generation()).unwrap();
    pool.write(|s| s.write_snapshot(early, "azure", &snapshot(1, 2.0), &[], at(0), at(1)))
        .unwrap();
    assert_ne!(pool.read(|s| s.catalog_generation()).unwrap(), after_late);
}

fn only_a_sync_that_may_change_list_prices_moves_their_generation(db) {
    let pool = db.pool(0);
    let generation = || pool.read(|s| s.catalog_generation()).unwrap();
    sync(&pool, &snapshot(2, 1.0), 0);
    let full = generation();
    let mut spot = Snapshot { scope: Scope::SpotHistory, ..snapshot(2, 1.0) };
    spot.spot_observations[1].observed_at = at(5);
    spot.spot_observations[1].usd_per_hour = 9.0;
    assert_eq!(sync(&pool, &spot, 5).spot_added, 1);
    let after_spot = generation();
    assert_ne!(after_spot.data, full.data);
    assert_eq!(after_spot.list_prices, full.list_prices, "list prices read then still hold");
    // An instance type that changed changes how its list prices read.
    spot.instance_types[1].vcpus = Some(16);
    spot.spot_observations[1].observed_at = at(6);
    sync(&pool, &spot, 6);
    assert_ne!(generation().list_prices, after_spot.list_prices);
    sync(&pool, &snapshot(2, 1.0), 7);
    assert_ne!(generation().list_prices, after_spot.list_prices);

    // The parts are the whole, each its own kind of price.
    pool.read(|s| {
        let all = s.prices_as_of(None, None).unwrap();
        let list = s.price_part_as_of(None, None, PricePart::List).unwrap();
        let spot = s.price_part_as_of(None, None, PricePart::Spot).unwrap();
        assert!(list.iter().all(|p| p.price_kind != "spot"), "{list:?}");
        assert_eq!(spot.iter().map(|p| p.usd_per_hour).collect::<Vec<_>>(), [9.0]);
        assert_eq!(list.len() + spot.len(), all.len());
        assert!(list.iter().chain(&spot).all(|p| all.contains(p)));
    });
}

fn each_source_s_newest_run_and_newest_good_sync_are_found_by_when_they_finished(db) {
    let pool = db.pool(0);
    let run = |source: &str, scope: Scope, start: i64, end: Option<(i64, bool)>| {
        pool.write(|s| {
            let id = s.begin_run(source, scope, at(start))?;
            match end {
                Some((hour, true)) => {
                    s.write_snapshot(id, source, &snapshot(1, 1.0), &[], at(start), at(hour))?;
                }
                Some((hour, false)) => s.fail_run(id, at(hour), &format!("{source}: down"))?,
                None => {}
            }
            Ok::<_, StoreError>(())
        })
        .unwrap();
    };
    // aws: a run begun first fails last; azure: only spot syncs are good.
    run("aws", Scope::Full, 0, Some((1, true)));
    run("aws", Scope::Full, 2, Some((9, false)));
    run("aws", Scope::Full, 3, Some((4, true)));
    run("aws", Scope::Full, 10, None);
    run("azure", Scope::Full, 0, Some((1, false)));
    run("azure", Scope::SpotHistory, 2, Some((3, true)));
    run("gcp", Scope::Full, 5, None);
    let good = pool.read(|s| s.last_good_syncs()).unwrap();
    assert_eq!(good.into_iter().collect::<Vec<_>>(), [("aws".to_owned(), at(4))]);
    assert_eq!(
        pool.read(|s| s.latest_runs()).unwrap(),
        [
            ("aws".to_owned(), "failed".to_owned(), Some("aws: down".to_owned())),
            ("azure".to_owned(), "failed".to_owned(), Some("azure: down".to_owned())),
        ]
    );
}

fn plans_are_saved_and_read_back_by_id_and_name(db) {
    let pool = db.pool(0);
    let save = |name: &'static str, hour: i64, cost: f64| {
        let result = format!(r#"{{"cost":{cost}}}"#);
        pool.write(|s| {
            s.save_plan(&NewPlan {
                created_at: at(hour),
                name,
                inputs_hash: "h",
                status: "optimal",
                objective: Some(cost),
                problem_json: r#"{"p":1}"#,
                result_json: &result,
            })
        })
        .unwrap()
    };
    let first = save("weekly", 0, 1.0);
    let second = save("weekly", 1, 2.0);
    save("other", 2, 3.0);
    pool.read(|s| {
        assert_eq!(s.saved_plan(None, Some("weekly")).unwrap().unwrap().id, second);
        assert_eq!(s.saved_plan(None, None).unwrap().unwrap().name.as_deref(), Some("other"));
        let previous = s.previous_plan(second, "weekly").unwrap().unwrap();
        assert_eq!((previous.id, previous.created_at), (first, at(0)));
        assert_eq!(previous.result["cost"], 1.0);
        assert!(s.previous_plan(first, "weekly").unwrap().is_none());
        assert_eq!(s.saved_plan_problem(first).unwrap().unwrap()["p"], 1);
        assert!(s.saved_plan(Some(999), None).unwrap().is_none());
    });
}

fn alerts_queue_once_and_each_due_message_is_claimed_once(db) {
    let pool = db.pool(0);
    let state = AlertState {
        rule: "cheap".into(),
        key: "aws/p5".into(),
        fired: true,
        last_value: Some(1.5),
        changed_at: at(0),
        last_fired_at: Some(at(0)),
    };
    let messages: Vec<NewMessage> = (0..3)
        .map(|i| NewMessage {
            idempotency_key: format!("k{i}"),
            rule: "cheap".into(),
            channel: "log".into(),
            payload: serde_json::json!({"i": i}),
        })
        .collect();
    pool.write(|s| s.apply_alerts(std::slice::from_ref(&state), &messages, &[], at(0)))
        .unwrap();
    // The same keys again (a re-evaluation) queue nothing new.
    pool.write(|s| s.apply_alerts(std::slice::from_ref(&state), &messages, &[], at(1)))
        .unwrap();
    assert_eq!(pool.read(|s| s.alert_states(Some("cheap"))).unwrap(), std::slice::from_ref(&state));
    assert_eq!(pool.read(|s| s.next_message_due()).unwrap(), Some(at(0)));
    // A forgotten state goes; its messages stay queued.
    let forget = [("cheap".to_owned(), "aws/p5".to_owned())];
    pool.write(|s| s.apply_alerts(&[], &[], &forget, at(1))).unwrap();
    assert!(pool.read(|s| s.alert_states(Some("cheap"))).unwrap().is_empty());
    pool.write(|s| s.apply_alerts(std::slice::from_ref(&state), &[], &[], at(1))).unwrap();

    let claimed = pool.write(|s| s.claim_due_messages(at(1), at(10), 2)).unwrap();
    assert_eq!(claimed.iter().map(|m| m.idempotency_key.as_str()).collect::<Vec<_>>(), ["k0", "k1"]);
    let rest = pool.write(|s| s.claim_due_messages(at(1), at(10), 50)).unwrap();
    assert_eq!(rest.len(), 1, "claimed messages are not due again");
    assert!(pool.write(|s| s.claim_due_messages(at(2), at(10), 50)).unwrap().is_empty());

    pool.write(|s| s.mark_delivered(claimed[0].id, at(2))).unwrap();
    pool.write(|s| s.mark_attempt_failed(claimed[1].id, at(3), "HTTP 503")).unwrap();
    // The claim of k2 lapsed (its deliverer died): due again after the hold.
    let again = pool.write(|s| s.claim_due_messages(at(10), at(20), 50)).unwrap();
    assert_eq!(again.iter().map(|m| m.idempotency_key.as_str()).collect::<Vec<_>>(), ["k1", "k2"]);
    assert_eq!(again[0].attempts, 1);
    assert_eq!(again[0].last_error.as_deref(), Some("HTTP 503"));
    let history = pool.read(|s| s.message_history(10)).unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history[2].delivered_at, Some(at(2)));

    // A claim given back is due at once, without an attempt counted; a
    // delivered message stays delivered.
    let ids: Vec<i64> = again.iter().map(|m| m.id).chain([claimed[0].id]).collect();
    pool.write(|s| s.release_messages(&ids, at(11))).unwrap();
    let released = pool.write(|s| s.claim_due_messages(at(11), at(30), 50)).unwrap();
    assert_eq!(released.iter().map(|m| m.idempotency_key.as_str()).collect::<Vec<_>>(), ["k1", "k2"]);
    assert_eq!(released[0].attempts, 1);
}
}

/// A catalog with a year and more of history: prices at days 0, 10 and 400,
/// spot observations along the way, a failed run, plans and alert messages.
fn aged_store(pool: &Pool) {
    for (day, base, spot_hours) in [
        (0, 1.0, vec![0, 1]),
        (10, 2.0, vec![240, 241]),
        (400, 3.0, vec![9600]),
    ] {
        let mut snap = snapshot(2, base);
        snap.spot_observations = spot_hours
            .into_iter()
            .map(|h| gpuplan_providers::SpotObservation {
                region: "us-east-1".into(),
                zone: "us-east-1a".into(),
                instance_type: "gpu0.xlarge".into(),
                usd_per_hour: 0.5 + h as f64 / 1e4,
                observed_at: at(h),
            })
            .collect();
        sync(pool, &snap, day * 24);
    }
    let failed = pool
        .write(|s| s.begin_run("aws", Scope::Full, at(24)))
        .unwrap();
    pool.write(|s| s.fail_run(failed, at(25), "HTTP 503"))
        .unwrap();
    for (name, day) in [("a", 0), ("a", 5), ("b", 0), ("a", 400)] {
        pool.raw_execute(&format!(
            "INSERT INTO plans (created_at, name, inputs_hash, status, problem_json, result_json)
             VALUES ('{}', '{name}', 'h', 'optimal', '{{}}', '{{}}')",
            ts(at(day * 24))
        ));
    }
    for (key, created, delivered) in [
        ("old", 0, Some(1)),
        ("pending", 0, None),
        ("recent", 399, Some(399)),
    ] {
        let created = ts(at(created * 24));
        let delivered =
            delivered.map_or("NULL".to_owned(), |d: i64| format!("'{}'", ts(at(d * 24))));
        pool.raw_execute(&format!(
            "INSERT INTO alert_outbox (idempotency_key, rule, channel, payload_json, created_at, next_attempt_at, delivered_at)
             VALUES ('{key}', 'r', 'c', '{{}}', '{created}', '{created}', {delivered})"
        ));
    }
}

on_both_backends! {
fn pruning_deletes_old_history_in_batches_and_keeps_what_is_current(db) {
    let pool = db.pool(1);
    aged_store(&pool);
    let before = current(&pool);
    let now = at(401 * 24);
    let retention = Retention::default();
    let expected = PruneCounts {
        // Spot at hours 0, 1 and 240; 241 was in force at the cutoff. On
        // SQLite the syncs' observations still wait in spot_recent.
        spot_observations: if db.writes_recent() { 0 } else { 3 },
        spot_recent: if db.writes_recent() { 3 } else { 0 },
        // Day 0's four versions were superseded on day 10, before the cutoff.
        price_versions: 4,
        // The failed run; day 0's run still names the instance types it found.
        sync_runs: 1,
        // Plan "a" of days 0 and 5; "b" is the newest of its name.
        plans: 2,
        // Delivered on day 1; the undelivered one stays.
        alert_messages: 1,
        bill_periods: 0,
    };
    let generation = || pool.read(|s| s.catalog_generation()).unwrap();
    let unpruned = generation();
    assert_eq!(prune(&pool, &retention, now, true).unwrap(), expected);
    assert_eq!(generation(), unpruned, "a dry run changes nothing");
    assert_eq!(prune(&pool, &retention, now, false).unwrap(), expected);
    let pruned = generation();
    assert_ne!(pruned, unpruned, "cached answers of the pruned catalog are void");
    assert_eq!(prune(&pool, &retention, now, false).unwrap().total(), 0);
    assert_eq!(generation(), pruned);
    assert_eq!(current(&pool), before);
    assert_eq!(
        pool.raw_i64("SELECT count(*) FROM alert_outbox WHERE delivered_at IS NULL"),
        Some(1)
    );

    // Whatever the settings: a second of history, long after the last sync.
    let second = Some(std::time::Duration::from_secs(1));
    let harsh = Retention {
        spot_history: second,
        price_history: second,
        sync_runs: second,
        plans: second,
        delivered_alerts: second,
        bills: second,
    };
    prune(&pool, &harsh, at(100_000), false).unwrap();
    assert_eq!(current(&pool), before);
    let points = pool
        .read(|s| s.spot_history("gpu0.xlarge", None, None, None, at(0), None))
        .unwrap();
    assert_eq!(points.len(), 1, "the newest observation of the pool stays");
    assert_eq!(points[0].observed_at, at(9600));
    assert_eq!(count(&pool, "plans"), 2, "the newest plan of each name stays");
    assert!(last_good_run_id(&pool, "aws").is_some());
    assert_eq!(pool.read(|s| s.last_good_syncs()).unwrap()["aws"], at(9600));
}

fn a_large_prune_goes_in_batches(db) {
    let pool = db.pool(0);
    let mut snap = snapshot(1, 1.0);
    snap.spot_observations = (0..prune::BATCH as i64 * 2 + 10)
        .map(|m| gpuplan_providers::SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: 1.0,
            observed_at: at(0) + chrono::Duration::minutes(m),
        })
        .collect();
    sync(&pool, &snap, 0);
    if !db.writes_recent() {
        hold_in_recent(&pool, "IS NOT NULL", at(-1));
    }
    let cutoff = at(1000);
    assert_eq!(
        pool.write(|s| s.prune_batch(Prunable::SpotRecent, cutoff, prune::BATCH, i64::MIN))
            .unwrap()
            .deleted,
        prune::BATCH
    );
    let retention = Retention {
        spot_history: Some(std::time::Duration::from_secs(3600)),
        ..Retention::default()
    };
    let counts = prune(&pool, &retention, at(1001), false).unwrap();
    // Written by one sync, they wait in spot_recent (on PostgreSQL, as in a
    // store copied from SQLite) and are pruned there.
    assert_eq!(counts.spot_recent, prune::BATCH as u64 + 9);
    assert_eq!(count(&pool, "spot_recent"), 1);
    assert_eq!(
        pool.raw_i64("SELECT spot_recent_rows FROM catalog_state"),
        Some(1),
        "the count of recent rows follows"
    );
}

fn only_the_spot_series_written_since_a_stamp_are_read_again(db) {
    let pool = db.pool(0);
    let observed = |zone: &str, usd: f64, hour: i64| gpuplan_providers::SpotObservation {
        region: "us-east-1".into(),
        zone: zone.into(),
        instance_type: "gpu0.xlarge".into(),
        usd_per_hour: usd,
        observed_at: at(hour),
    };
    let stamp = || pool.read(|s| s.catalog_generation()).unwrap().spot;
    let mut snap = snapshot(1, 1.0);
    snap.spot_observations = vec![observed("us-east-1a", 1.0, 0), observed("us-east-1b", 2.0, 0)];
    sync(&pool, &snap, 0);
    let first = stamp();
    snap.spot_observations = vec![observed("us-east-1b", 3.0, 1)];
    sync(&pool, &snap, 1);
    let second = stamp();
    assert!(second > first);
    let changed = pool.read(|s| s.spot_quotes_changed_after(first)).unwrap();
    assert_eq!(
        changed,
        [crate::store::SpotQuote {
            provider: "aws".into(),
            zone: Some("us-east-1b".into()),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: 3.0,
            observed_at: at(1),
            currency: "USD".into(),
            fx_rate: 1.0,
        }]
    );
    assert!(pool.read(|s| s.spot_quotes_changed_after(second)).unwrap().is_empty());
    assert_eq!(pool.read(|s| s.spot_quotes_changed_after(i64::MIN)).unwrap().len(), 2);
    // Prices in force sent again (as AWS's history does each sync) and an
    // observation older than a series' newest move nothing.
    snap.spot_observations = vec![observed("us-east-1a", 1.0, 0), observed("us-east-1b", 2.0, 0)];
    sync(&pool, &snap, 2);
    assert!(pool.read(|s| s.spot_quotes_changed_after(second)).unwrap().is_empty());
    let history = pool
        .read(|s| s.spot_history("gpu0.xlarge", None, None, Some("us-east-1b"), at(0), None))
        .unwrap();
    assert_eq!(history.len(), 2, "the older observation is kept");
    let current: Vec<f64> = current(&pool)
        .iter()
        .filter(|p| p.price_kind == "spot")
        .map(|p| p.usd_per_hour)
        .collect();
    assert_eq!(current, [1.0, 3.0], "the newest prices stay");
    // A write without spot observations, and a prune, stamp nothing.
    let third = stamp();
    snap.spot_observations.clear();
    sync(&pool, &snap, 3);
    let retention = Retention {
        spot_history: Some(std::time::Duration::from_secs(1)),
        ..Retention::default()
    };
    prune(&pool, &retention, at(10), false).unwrap();
    assert_eq!(stamp(), third);
}

fn a_read_of_spot_history_extended_by_what_spot_writes_appended_is_a_read_of_all(db) {
    let pool = db.pool(0);
    let observed = |zone: &str, usd: f64, minute: i64| gpuplan_providers::SpotObservation {
        region: "us-east-1".into(),
        zone: zone.into(),
        instance_type: "gpu0.xlarge".into(),
        usd_per_hour: usd,
        observed_at: at(0) + chrono::Duration::minutes(minute),
    };
    let generation = || pool.read(|s| s.catalog_generation()).unwrap();
    let filter = SpotSeriesFilter {
        instance_type: "gpu0.xlarge",
        provider: Some("aws"),
        region: None,
        zone: None,
    };
    let read = || pool.read(|s| s.spot_series_history(&filter, at(0), None)).unwrap();
    let newest = |read: &[SpotSeriesPoints]| -> std::collections::HashMap<i64, DateTime<Utc>> {
        read.iter().map(|s| (s.series_id, s.points.last().unwrap().observed_at)).collect()
    };
    let appended = |after: i64, newest| {
        pool.read(|s| s.spot_points_appended(&filter, after, &newest)).unwrap()
    };
    let mut spot = Snapshot { scope: Scope::SpotHistory, ..snapshot(1, 1.0) };
    spot.spot_observations = vec![
        observed("us-east-1a", 1.0, 0),
        observed("us-east-1a", 1.5, 10),
        observed("us-east-1b", 2.0, 5),
    ];
    sync(&pool, &spot, 0);
    let before = generation();
    let earlier = read();
    // Zone a gets two later points; zone b's price in force is sent again.
    spot.spot_observations = vec![
        observed("us-east-1a", 1.8, 30),
        observed("us-east-1a", 1.7, 20),
        observed("us-east-1b", 2.0, 5),
    ];
    sync(&pool, &spot, 1);
    let after = generation();
    assert!(after.only_appended_since(&before, at(0)));
    let points = appended(before.spot, newest(&earlier)).unwrap();
    assert_eq!(points.len(), 1, "only zone a was appended to");
    let mut extended = earlier.clone();
    for s in &mut extended {
        s.points.extend(points.get(&s.series_id).into_iter().flatten());
    }
    let now = read();
    assert_eq!(extended, now);
    assert_eq!(appended(after.spot, newest(&now)), Some(Default::default()));
    // From an earlier stamp on: the same points, after the newest read.
    assert_eq!(appended(before.spot - 1, newest(&earlier)), Some(points));
    // A series new since the read: the window is read again.
    spot.spot_observations = vec![observed("us-east-1c", 3.0, 40)];
    sync(&pool, &spot, 2);
    assert!(generation().only_appended_since(&after, at(0)));
    assert_eq!(appended(after.spot, newest(&now)), None);
    // A point before its series' newest is no append, and the state says so.
    let before_backfill = generation();
    spot.spot_observations = vec![observed("us-east-1a", 1.6, 15)];
    assert_eq!(sync(&pool, &spot, 3).spot_added, 1);
    assert!(!generation().only_appended_since(&before_backfill, at(0)));
    // Nor is a prune of what a read from hour 0 holds; for a read from
    // after its cutoff, it changed nothing.
    let before_prune = generation();
    let retention = Retention {
        spot_history: Some(std::time::Duration::from_secs(1)),
        ..Retention::default()
    };
    let pruned = prune(&pool, &retention, at(10), false).unwrap();
    assert!(pruned.spot_recent + pruned.spot_observations > 0);
    assert!(!generation().only_appended_since(&before_prune, at(0)));
    assert!(generation().only_appended_since(&before_prune, at(10)));
    // Pruned again before an earlier time: what was read from hour 10 on
    // is still as it was.
    let before_second = generation();
    let older = Retention {
        spot_history: Some(std::time::Duration::from_secs(7200)),
        ..Retention::default()
    };
    spot.spot_observations = vec![observed("us-east-1a", 1.9, 7)];
    sync(&pool, &spot, 4);
    let written = generation();
    assert!(prune(&pool, &older, at(10), false).unwrap().total() > 0);
    assert!(!generation().only_appended_since(&written, at(0)));
    assert!(generation().only_appended_since(&written, at(10)));
    assert!(
        !generation().only_appended_since(&written, at(9)),
        "the first prune's later cutoff is the one that counts"
    );
    assert!(!generation().only_appended_since(&before_second, at(10)), "the write was no append");
}

fn each_spot_batch_goes_on_from_the_series_the_one_before_stopped_in(db) {
    let pool = db.pool(0);
    // In the history (moved there) and in spot_recent (as a sync left them).
    for (kind, instance_type) in [
        (Prunable::SpotObservations, "gpu0.xlarge"),
        (Prunable::SpotRecent, "gpu1.xlarge"),
    ] {
        let mut snap = snapshot(2, 1.0);
        // Three zones of one type, seven observations each, a minute apart.
        snap.spot_observations = ["a", "b", "c"]
            .iter()
            .flat_map(|z| {
                (0..7).map(move |m| gpuplan_providers::SpotObservation {
                    region: "us-east-1".into(),
                    zone: format!("us-east-1{z}"),
                    instance_type: instance_type.into(),
                    usd_per_hour: 1.0 + f64::from(m),
                    observed_at: at(0) + chrono::Duration::minutes(m.into()),
                })
            })
            .collect();
        sync(&pool, &snap, 0);
        if kind == Prunable::SpotObservations {
            move_recent_to_history(&pool);
        } else if !db.writes_recent() {
            let of_type = format!("IN (SELECT id FROM spot_series WHERE instance_type = '{instance_type}')");
            hold_in_recent(&pool, &of_type, at(-1));
        }
        // In force at the cutoff: minute 4's price; minutes 0 to 3 may go.
        let cutoff = at(0) + chrono::Duration::seconds(270);
        assert_eq!(pool.read(|s| s.count_prunable(kind, cutoff)).unwrap(), 12);
        let (mut from, mut deleted, mut batches) = (i64::MIN, 0, 0);
        loop {
            let batch = pool.write(|s| s.prune_batch(kind, cutoff, 5, from)).unwrap();
            assert!(batch.next_series >= from, "a batch never goes back");
            (from, deleted, batches) = (batch.next_series, deleted + batch.deleted, batches + 1);
            if batch.deleted < 5 {
                break;
            }
        }
        // Batches of 5, 5 and 2: the first two stop inside a series, and the
        // next one finishes it.
        assert_eq!((deleted, batches), (12, 3), "{kind:?}");
        assert_eq!(count(&pool, kind.name()), 9);
        for zone in ["us-east-1a", "us-east-1b", "us-east-1c"] {
            let points = pool
                .read(|s| s.spot_history(instance_type, None, None, Some(zone), cutoff, None))
                .unwrap();
            let prices: Vec<f64> = points.iter().map(|p| p.usd_per_hour).collect();
            assert_eq!(prices, [5.0, 6.0, 7.0], "{kind:?} {zone}: minute 4 on stays");
        }
    }
}
}

on_both_backends! {
fn capacity_block_windows_are_distinct_prices_and_vanished_ones_keep_their_history(db) {
    let pool = db.pool(0);
    let mut snap = snapshot(1, 1.0);
    // One type in one zone, offered for two windows and two counts.
    snap.prices.extend([block(48, 1, 240.0), block(72, 1, 264.0), block(48, 4, 900.0)]);
    sync(&pool, &snap, 0);
    let blocks: Vec<CurrentPrice> = current(&pool)
        .into_iter()
        .filter(|p| p.price_kind == "capacity_block")
        .collect();
    assert_eq!(blocks.len(), 3);
    let four = blocks.iter().find(|p| p.window.unwrap().instance_count == 4).unwrap();
    assert_eq!((four.window.unwrap().start, four.upfront_usd), (at(48), 900.0));

    // The next sync no longer lists the window at hour 72: it is withdrawn,
    // and the catalog still has its price from when it was offered.
    snap.prices.retain(|p| p.window.is_none_or(|w| w.start != at(72)));
    let stats = sync(&pool, &snap, 1);
    assert_eq!(stats.prices_withdrawn, 1);
    assert_eq!(
        current(&pool).iter().filter(|p| p.price_kind == "capacity_block").count(),
        2
    );
    let then = pool
        .read(|s| s.prices_as_of(None, Some(at(0))))
        .unwrap()
        .into_iter()
        .find(|p| p.window.is_some_and(|w| w.start == at(72)))
        .unwrap();
    assert_eq!(then.upfront_usd, 264.0);

    // The offering history: the window at hour 72 vanished at hour 1 with
    // its last price; the one of 4 instances was repriced at hour 2.
    snap.prices.retain(|p| p.window.is_none_or(|w| w.instance_count != 4));
    snap.prices.push(block(48, 4, 880.0));
    sync(&pool, &snap, 2);
    let offerings = pool.read(|s| s.window_offerings(at(0))).unwrap();
    let of = |start: i64, count: u32| {
        offerings
            .iter()
            .find(|o| o.window.start == at(start) && o.window.instance_count == count)
            .unwrap()
    };
    assert_eq!(offerings.len(), 3);
    let gone = of(72, 1);
    assert_eq!((gone.first_seen, gone.vanished_at, gone.upfront_usd, gone.prices), (at(0), Some(at(1)), 264.0, 1));
    let repriced = of(48, 4);
    assert_eq!((repriced.vanished_at, repriced.upfront_usd, repriced.prices), (None, 880.0, 2));
    assert_eq!((repriced.zone.as_deref(), repriced.gpu_model.as_str()), (Some("us-east-1a"), "L4"));
    assert_eq!(offerings[0].window.start, at(48), "soonest window first");
    // Vanished before `since`: no longer listed; offered ones always are.
    let later = pool.read(|s| s.window_offerings(at(2))).unwrap();
    assert_eq!(later.len(), 2);
    assert!(later.iter().all(|o| o.vanished_at.is_none()));
}
}

/// The spot tables as migrations 0001 to 0017 left them (and what later steps
/// add dropped), with rows of every shape they held: fractions of a second, a
/// rate for a non-USD series, and observations whose series row is missing.
const SPOT_TABLES_AT_0017: &str = "
    DROP TABLE spot_recent;
    DROP TABLE spot_observations;
    DROP TABLE spot_series;
    DROP INDEX price_series_by_type;
    DROP INDEX sync_runs_newest;
    DROP TABLE catalog_state;
    CREATE TABLE spot_series (
        provider TEXT NOT NULL, instance_type TEXT NOT NULL, zone TEXT NOT NULL,
        region TEXT NOT NULL, currency TEXT NOT NULL DEFAULT 'USD',
        PRIMARY KEY (provider, instance_type, zone));
    CREATE TABLE spot_observations (
        provider TEXT NOT NULL, region TEXT NOT NULL, zone TEXT NOT NULL,
        instance_type TEXT NOT NULL, observed_at TEXT NOT NULL,
        usd_per_hour DOUBLE PRECISION NOT NULL, fx_rate DOUBLE PRECISION,
        PRIMARY KEY (instance_type, zone, provider, observed_at));
    CREATE INDEX spot_observations_by_region ON spot_observations (provider, region, observed_at);
    INSERT INTO spot_series (provider, instance_type, zone, region, currency) VALUES
        ('aws', 'gpu0.xlarge', 'us-east-1a', 'us-east-1', 'USD'),
        ('aws', 'gpu1.xlarge', 'us-east-1b', 'us-east-1', 'EUR');
    INSERT INTO spot_observations (provider, region, zone, instance_type, observed_at, usd_per_hour, fx_rate) VALUES
        ('aws', 'us-east-1', 'us-east-1a', 'gpu0.xlarge', '2026-01-01T00:00:00.000000Z', 1.5, NULL),
        ('aws', 'us-east-1', 'us-east-1a', 'gpu0.xlarge', '2026-01-01T06:30:00.250000Z', 1.25, NULL),
        ('aws', 'us-east-1', 'us-east-1a', 'gpu0.xlarge', '2026-01-02T00:00:00.000001Z', 1.7654321, NULL),
        ('aws', 'us-east-1', 'us-east-1b', 'gpu1.xlarge', '2026-01-01T12:00:00.999999Z', 0.5, 0.92),
        ('aws', 'us-west-2', 'us-west-2c', 'gpu1.xlarge', '2025-12-31T23:59:59.000000Z', 0.375, NULL),
        ('aws', 'us-west-2', 'us-west-2c', 'gpu1.xlarge', '2026-01-01T00:00:00.000000Z', 0.4, NULL);
";

on_both_backends! {
fn spot_history_stored_by_the_older_schema_is_moved_without_loss(db) {
    let pool = db.pool(0);
    sync(&pool, &Snapshot { spot_observations: vec![], ..snapshot(2, 1.0) }, 0);
    pool.raw_execute(SPOT_TABLES_AT_0017);
    // Every step from 0018 on runs again.
    let older = 17;
    pool.raw_execute(&match db {
        test_support::TestDb::Sqlite(_) => format!("PRAGMA user_version = {older}"),
        test_support::TestDb::Postgres(_) => format!("UPDATE gpuplan_schema SET version = {older}"),
    });
    drop(pool);
    let pool = db.pool(0);
    assert_eq!(count(&pool, "spot_observations"), 6);
    assert_eq!(count(&pool, "spot_series"), 3, "the series without a row gets one");

    let time = |s: &str| DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc);
    let history = |instance: &str| {
        pool.read(|s| s.spot_history(instance, None, None, None, time("2025-01-01T00:00:00Z"), None))
            .unwrap()
            .into_iter()
            .map(|p| (p.region, p.zone, p.observed_at, p.usd_per_hour))
            .collect::<Vec<_>>()
    };
    let point = |region: &str, zone: &str, at: &str, usd: f64| {
        (region.to_owned(), zone.to_owned(), time(at), usd)
    };
    assert_eq!(
        history("gpu0.xlarge"),
        [
            point("us-east-1", "us-east-1a", "2026-01-01T00:00:00Z", 1.5),
            point("us-east-1", "us-east-1a", "2026-01-01T06:30:00.25Z", 1.25),
            point("us-east-1", "us-east-1a", "2026-01-02T00:00:00.000001Z", 1.7654321),
        ]
    );
    assert_eq!(
        history("gpu1.xlarge"),
        [
            point("us-east-1", "us-east-1b", "2026-01-01T12:00:00.999999Z", 0.5),
            point("us-west-2", "us-west-2c", "2025-12-31T23:59:59Z", 0.375),
            point("us-west-2", "us-west-2c", "2026-01-01T00:00:00Z", 0.4),
        ]
    );
    let spot: Vec<_> = current(&pool)
        .into_iter()
        .filter(|p| p.price_kind == "spot")
        .map(|p| (p.zone.unwrap(), p.observed_at.unwrap(), p.usd_per_hour, p.currency, p.fx_rate))
        .collect();
    assert_eq!(
        spot,
        [
            ("us-east-1a".to_owned(), time("2026-01-02T00:00:00.000001Z"), 1.7654321, "USD".to_owned(), 1.0),
            ("us-east-1b".to_owned(), time("2026-01-01T12:00:00.999999Z"), 0.5, "EUR".to_owned(), 0.92),
            ("us-west-2c".to_owned(), time("2026-01-01T00:00:00Z"), 0.4, "USD".to_owned(), 1.0),
        ]
    );
    // The moved series take new observations as any other.
    let later = Snapshot {
        scope: Scope::SpotHistory,
        spot_observations: vec![gpuplan_providers::SpotObservation {
            region: "us-east-1".into(),
            zone: "us-east-1a".into(),
            instance_type: "gpu0.xlarge".into(),
            usd_per_hour: 2.0,
            observed_at: time("2026-01-03T00:00:00Z"),
        }],
        ..snapshot(2, 1.0)
    };
    assert_eq!(sync(&pool, &later, 1).spot_added, 1);
    assert_eq!(count(&pool, "spot_series"), 3);
    assert_eq!(history("gpu0.xlarge").len(), 4);
}

fn a_backfill_keeps_each_series_newest_observation_current(db) {
    let pool = db.pool(0);
    let mut snap = snapshot(1, 3.0);
    sync(&pool, &snap, 0);
    // An older window of the same series, synced later, and one point again.
    snap.spot_observations = vec![gpuplan_providers::SpotObservation {
        usd_per_hour: 9.0,
        observed_at: at(-5),
        ..snap.spot_observations[0].clone()
    }, snap.spot_observations[1].clone()];
    let stats = sync(&pool, &snap, 2);
    assert_eq!((stats.spot_seen, stats.spot_added), (2, 1));
    let spot = current(&pool).into_iter().find(|p| p.price_kind == "spot").unwrap();
    assert_eq!((spot.observed_at, spot.usd_per_hour), (Some(at(1)), 2.0));
    assert_eq!(
        pool.read(|s| s.newest_spot_by_region("aws")).unwrap()["us-east-1"],
        at(1)
    );
}
}

on_both_backends! {
fn observations_in_the_recent_table_and_the_history_read_as_one(db) {
    let pool = db.pool(0);
    let minute = |m: i64| at(0) + chrono::Duration::minutes(m);
    let observed = |zone: &str, m: i64, usd: f64| gpuplan_providers::SpotObservation {
        region: "us-east-1".into(),
        zone: zone.into(),
        instance_type: "gpu0.xlarge".into(),
        usd_per_hour: usd,
        observed_at: minute(m),
    };
    let mut spot = Snapshot { scope: Scope::SpotHistory, ..snapshot(1, 1.0) };
    let tables = || (count(&pool, "spot_observations"), count(&pool, "spot_recent"));
    // A spot write moves what spot_recent holds beyond its size: counted as
    // over it by all it holds, the next write moves every row (its own, of
    // another zone, too).
    let mut writes = 0;
    let mut move_all = |spot: &mut Snapshot| {
        pool.raw_execute(&format!(
            "UPDATE catalog_state
             SET spot_recent_rows = {} + (SELECT count(*) FROM spot_recent), spot_merged_to = 0",
            super::snapshot::RECENT_ROWS
        ));
        writes += 1;
        spot.spot_observations = vec![observed("us-east-1z", 100 + writes, 1.0)];
        sync(&pool, spot, 10 + writes);
        assert_eq!(count(&pool, "spot_recent"), 0);
        pool.raw_execute("UPDATE catalog_state SET spot_recent_rows = 0");
    };
    spot.spot_observations =
        vec![observed("us-east-1a", 0, 1.0), observed("us-east-1a", 10, 2.0), observed("us-east-1a", 20, 3.0)];
    assert_eq!(sync(&pool, &spot, 0).spot_added, 3);
    // PostgreSQL writes them into the history; a store copied from SQLite
    // holds them in spot_recent, as SQLite's writes leave them.
    if !db.writes_recent() {
        hold_in_recent(&pool, "IS NOT NULL", at(-1));
    }
    assert_eq!(tables(), (0, 3), "new observations land in spot_recent");
    move_all(&mut spot);
    assert_eq!(tables(), (4, 0));
    spot.spot_observations = vec![observed("us-east-1a", 30, 4.0), observed("us-east-1a", 40, 5.0)];
    assert_eq!(sync(&pool, &spot, 1).spot_added, 2);
    // A backfill: minute 5 is older than the history's newest (there), 25
    // newer (recent), 20 and 30 are stored already (in either table).
    spot.spot_observations = vec![
        observed("us-east-1a", 5, 1.5),
        observed("us-east-1a", 25, 3.5),
        observed("us-east-1a", 20, 9.0),
        observed("us-east-1a", 30, 9.0),
    ];
    assert_eq!(sync(&pool, &spot, 2).spot_added, 2);
    let zone_a = "= (SELECT id FROM spot_series WHERE zone = 'us-east-1a')";
    if !db.writes_recent() {
        assert_eq!(tables(), (8, 0));
        hold_in_recent(&pool, zone_a, minute(20));
    }
    assert_eq!(tables(), (5, 3));
    assert_eq!(pool.raw_i64("SELECT spot_recent_rows FROM catalog_state"), Some(3));
    let of_zone_a = format!("WHERE series_id {zone_a}");
    let newest_history =
        pool.raw_i64(&format!("SELECT max(observed_at) FROM spot_observations {of_zone_a}")).unwrap();
    let oldest_recent =
        pool.raw_i64(&format!("SELECT min(observed_at) FROM spot_recent {of_zone_a}")).unwrap();
    assert!(newest_history < oldest_recent, "recent rows are newer than the history");

    let zone = Some("us-east-1a");
    let history = |since: i64| -> Vec<f64> {
        pool.read(|s| s.spot_history("gpu0.xlarge", None, None, zone, minute(since), None))
            .unwrap()
            .iter()
            .map(|p| p.usd_per_hour)
            .collect()
    };
    let spot_price_at = |m: i64| -> Vec<f64> {
        pool.read(|s| s.price_part_as_of(None, Some(minute(m)), PricePart::Spot))
            .unwrap()
            .iter()
            .filter(|p| p.zone.as_deref() == zone)
            .map(|p| p.usd_per_hour)
            .collect()
    };
    let filter = SpotSeriesFilter {
        instance_type: "gpu0.xlarge",
        provider: Some("aws"),
        region: None,
        zone,
    };
    let appended_after = |m: i64| -> Vec<f64> {
        let series = pool.read(|s| s.spot_series_history(&filter, minute(0), None)).unwrap();
        let newest = [(series[0].series_id, minute(m))].into();
        let mut points =
            pool.read(|s| s.spot_points_appended(&filter, i64::MIN, &newest)).unwrap().unwrap();
        points.remove(&series[0].series_id).unwrap_or_default().iter().map(|p| p.usd_per_hour).collect()
    };
    let answers = || {
        (
            // In force at the window's opening: in the history (minute 20)
            // or in spot_recent (minute 25), and never both.
            (history(22), history(27), history(0)),
            (spot_price_at(12), spot_price_at(27), spot_price_at(45)),
            (appended_after(10), appended_after(30)),
            pool.read(|s| s.count_prunable(Prunable::SpotObservations, minute(27))).unwrap(),
        )
    };
    let split = answers();
    assert_eq!(
        split,
        (
            (
                vec![3.0, 3.5, 4.0, 5.0],
                vec![3.5, 4.0, 5.0],
                vec![1.0, 1.5, 2.0, 3.0, 3.5, 4.0, 5.0]
            ),
            (vec![2.0], vec![3.5], vec![5.0]),
            (vec![3.0, 3.5, 4.0, 5.0], vec![5.0]),
            // In force at 27 is minute 25, in spot_recent: all of the
            // history's minutes before it may go.
            4,
        )
    );
    move_all(&mut spot);
    assert_eq!(tables(), (9, 0));
    let merged = answers();
    assert_eq!((&merged.0, &merged.1, &merged.2), (&split.0, &split.1, &split.2), "the same answers once moved");
    let current: Vec<_> = pool
        .read(|s| s.price_part_as_of(None, None, PricePart::Spot))
        .unwrap()
        .into_iter()
        .filter(|p| p.zone.as_deref() == zone)
        .map(|p| (p.usd_per_hour, p.observed_at))
        .collect();
    assert_eq!(current, [(5.0, Some(minute(40)))]);

    // Pruning at minute 27 keeps minute 25 (in force then) on, wherever the
    // rows were: minutes 0 to 20 in the history, and 30 newly in spot_recent
    // before a newer one there.
    spot.spot_observations = vec![observed("us-east-1a", 50, 6.0)];
    sync(&pool, &spot, 30);
    let retention = Retention {
        spot_history: Some(std::time::Duration::from_secs(60 * 60)),
        ..Retention::default()
    };
    let pruned = prune(&pool, &retention, minute(87), true).unwrap();
    assert_eq!((pruned.spot_observations, pruned.spot_recent), (4, 0));
    let pruned = prune(&pool, &retention, minute(87), false).unwrap();
    assert_eq!((pruned.spot_observations, pruned.spot_recent), (4, 0));
    assert_eq!(history(0), [3.5, 4.0, 5.0, 6.0]);
}

fn a_series_current_spot_price_is_its_newest_stored_observation(db) {
    let pool = db.pool(0);
    let observed = |h: i64, usd: f64| gpuplan_providers::SpotObservation {
        region: "us-east-1".into(),
        zone: "us-east-1a".into(),
        instance_type: "gpu0.xlarge".into(),
        usd_per_hour: usd,
        observed_at: at(h),
    };
    let mut spot = Snapshot { scope: Scope::SpotHistory, ..snapshot(1, 1.0) };
    let current = || {
        let prices = pool.read(|s| s.price_part_as_of(None, None, PricePart::Spot)).unwrap();
        let stored = pool
            .read(|s| s.spot_history("gpu0.xlarge", None, None, None, at(0), None))
            .unwrap();
        let newest = stored.last().unwrap();
        assert_eq!((prices[0].usd_per_hour, prices[0].observed_at), (newest.usd_per_hour, Some(newest.observed_at)));
        (prices[0].usd_per_hour, prices[0].observed_at)
    };
    // Two prices at one time, out of order: the first of the newest is kept.
    spot.spot_observations = vec![observed(2, 2.0), observed(1, 1.0), observed(2, 3.0)];
    sync(&pool, &spot, 2);
    assert_eq!(current(), (2.0, Some(at(2))));
    // A backfill and the price in force sent again move nothing.
    spot.spot_observations = vec![observed(0, 0.5), observed(2, 9.0)];
    sync(&pool, &spot, 3);
    assert_eq!(current(), (2.0, Some(at(2))));
    spot.spot_observations = vec![observed(3, 4.0)];
    sync(&pool, &spot, 4);
    assert_eq!(current(), (4.0, Some(at(3))));
}

fn a_spot_write_moves_whole_series_beyond_the_size_of_spot_recent_going_round(db) {
    let pool = db.pool(0);
    let observed = |zone: &str, h: i64| gpuplan_providers::SpotObservation {
        region: "us-east-1".into(),
        zone: zone.into(),
        instance_type: "gpu0.xlarge".into(),
        usd_per_hour: 1.0 + h as f64,
        observed_at: at(h),
    };
    let mut spot = Snapshot { scope: Scope::SpotHistory, ..snapshot(1, 1.0) };
    let mut write = |hours: std::ops::Range<i64>| {
        spot.spot_observations = hours
            .clone()
            .flat_map(|h| [observed("us-east-1a", h), observed("us-east-1b", h)])
            .collect();
        sync(&pool, &spot, hours.end);
    };
    let state = || {
        (
            count(&pool, "spot_observations"),
            count(&pool, "spot_recent"),
            pool.raw_i64("SELECT spot_recent_rows FROM catalog_state").unwrap(),
        )
    };
    let series = |zone: &str| {
        pool.raw_i64(&format!("SELECT id FROM spot_series WHERE zone = '{zone}'"))
    };
    let size = super::snapshot::RECENT_ROWS;
    write(0..3);
    if !db.writes_recent() {
        // PostgreSQL writes into the history: what a store copied from
        // SQLite holds in spot_recent, its first write moves whole.
        assert_eq!(state(), (6, 0, 0));
        hold_in_recent(&pool, "IS NOT NULL", at(-1));
        assert_eq!(state(), (0, 6, 6));
        write(3..4);
        assert_eq!(state(), (8, 0, 0));
        let points = pool
            .read(|s| s.spot_history("gpu0.xlarge", None, None, Some("us-east-1b"), at(0), None))
            .unwrap();
        assert_eq!(points.iter().map(|p| p.usd_per_hour).collect::<Vec<_>>(), [1.0, 2.0, 3.0, 4.0]);
        return;
    }
    assert_eq!(state(), (0, 6, 6));
    // Counted as full: the next write's 2 rows are 2 too many, and the first
    // series moves, all 4 of its rows.
    pool.raw_execute(&format!("UPDATE catalog_state SET spot_recent_rows = {size}"));
    write(3..4);
    assert_eq!(state(), (4, 4, size - 2));
    let merged_to = || pool.raw_i64("SELECT spot_merged_to FROM catalog_state");
    assert_eq!(merged_to(), series("us-east-1a"));
    // Within the size: nothing moves.
    write(4..5);
    assert_eq!(state(), (4, 6, size));
    // Over it: the next series on moves (6 rows), the first one's 2 wait.
    write(5..6);
    assert_eq!(state(), (10, 2, size - 4));
    assert_eq!(merged_to(), series("us-east-1b"));
    // Past the last series there is nothing to move: the next write starts
    // again from the first series, and moves both (5 rows over the size).
    pool.raw_execute(&format!("UPDATE catalog_state SET spot_recent_rows = {}", size + 1));
    write(6..7);
    assert_eq!((state(), merged_to()), ((10, 4, size + 3), Some(0)));
    write(7..8);
    assert_eq!((state(), merged_to()), ((16, 0, size - 1), series("us-east-1b")));
    let points: Vec<f64> = pool
        .read(|s| s.spot_history("gpu0.xlarge", None, None, Some("us-east-1a"), at(0), None))
        .unwrap()
        .iter()
        .map(|p| p.usd_per_hour)
        .collect();
    assert_eq!(points, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]);
}
}
