//! API latency and daemon memory on a large catalog.
//!
//! Builds a catalog with 1 million spot observations (plus ~10k list prices),
//! starts the real `gpuplan serve` on it, and drives it from a bounded loopback
//! client: `GET /v1/prices?gpu=H100-80GB`, a 7-day `GET /v1/spot-history`, and the
//! dashboard's `/` and `/ui/prices` (with the page weight a browser downloads).
//! Prints p50/p99 latency and the daemon's resident memory, idle and after load.
//! Then the uncached prices query again while three heavy plans are requested
//! at once (two solve, the default cap; the third is refused with 503): its p99
//! next to the idle one.
//!
//! With a PostgreSQL server (`GPUPLAN_TEST_PG_URL`, as the tests use), the
//! catalog is then copied into a scratch database and the uncached query's
//! p99 is measured on a replica that does not sync, alone and while another
//! replica syncs a changing price sheet every second, next to one replica
//! that serves and syncs by itself.
//!
//!     cargo bench --bench api            # OBSERVATIONS=200000 for a quicker run

mod support;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use gpuplan::catalog::{self, Freshness, PriceFilter};
use gpuplan::store::{SqliteStore, Writes as _};
use gpuplan_providers::{
    InstanceType, PriceKind, PriceRecord, Scope, Snapshot, SpotObservation, Term, Upfront,
};
use support::{CONCURRENCY, REQUESTS, load, ready, rss_kib, serve, stop};

const TYPES: usize = 60;
const REGIONS: usize = 20;
const ZONES_PER_REGION: usize = 3;

fn instance_types() -> Vec<InstanceType> {
    let gpus = ["H100-80GB", "A100-80GB", "A100-40GB", "L4", "A10G", "T4"];
    (0..TYPES)
        .map(|i| InstanceType {
            gpu_form_factor: None,
            instance_type: format!("g{i}.{}xlarge", 1 << (i % 5)),
            gpu_model: gpus[i % gpus.len()].to_owned(),
            gpu_count: f64::from(1u32 << (i % 4)),
            gpu_memory_gib: Some(80.0),
            vcpus: Some(8),
            memory_gib: Some(64.0),
            mig_profile: None,
        })
        .collect()
}

fn list_prices(types: &[InstanceType]) -> Vec<PriceRecord> {
    let kinds = [
        PriceKind::OnDemand,
        PriceKind::AwsReserved(Term::OneYear, Upfront::No),
        PriceKind::AwsReserved(Term::OneYear, Upfront::All),
        PriceKind::AwsReserved(Term::ThreeYears, Upfront::Partial),
        PriceKind::AwsReserved(Term::ThreeYears, Upfront::All),
        PriceKind::Reserved(Term::OneYear),
        PriceKind::SavingsPlan(Term::ThreeYears),
        PriceKind::Commit(Term::OneYear),
    ];
    let mut out = Vec::new();
    for (i, t) in types.iter().enumerate() {
        for r in 0..REGIONS {
            for kind in kinds {
                let usd = 1.0 + i as f64 * 0.37 + r as f64 * 0.01;
                out.push(PriceRecord {
                    region: format!("region-{r}"),
                    zone: None,
                    instance_type: t.instance_type.clone(),
                    price_kind: kind,
                    offering_class: None,
                    usd_per_hour: usd,
                    upfront_usd: 0.0,
                    recurring_usd_per_hour: usd,
                    source: Some(format!("SKU-{i}-{r}")),
                    available_regions: vec![],
                    max_instances: None,
                    price_scope: gpuplan_providers::PriceScope::Instance,
                    window: None,
                });
            }
        }
    }
    out
}

fn build_catalog(path: &std::path::Path, observations: usize) -> Duration {
    let start = Instant::now();
    let mut store = SqliteStore::open(path).unwrap();
    let types = instance_types();
    let now = Utc::now();
    let run = store
        .begin_run("aws", gpuplan_providers::Scope::Full, now)
        .unwrap();
    let full = Snapshot {
        instance_types: types.clone(),
        prices: list_prices(&types),
        ..Snapshot::default()
    };
    store
        .write_snapshot(run, "aws", &full, &[], now, now)
        .unwrap();

    // Spread the observations over 30 days, across every type and zone.
    let series = TYPES * REGIONS * ZONES_PER_REGION;
    let per_series = observations.div_ceil(series);
    let step = Duration::from_secs(30 * 86400 / per_series as u64);
    let mut batch = Vec::with_capacity(100_000);
    let mut written = 0;
    'outer: for k in 0..per_series {
        let at: DateTime<Utc> =
            now - chrono::Duration::from_std(step * (per_series - k) as u32).unwrap();
        for (i, t) in types.iter().enumerate() {
            for r in 0..REGIONS {
                for z in 0..ZONES_PER_REGION {
                    batch.push(SpotObservation {
                        region: format!("region-{r}"),
                        zone: format!("region-{r}{}", (b'a' + z as u8) as char),
                        instance_type: t.instance_type.clone(),
                        usd_per_hour: 0.3 + i as f64 * 0.1 + ((k * 7 + z) % 13) as f64 * 0.01,
                        observed_at: at,
                    });
                    written += 1;
                    if written == observations {
                        break 'outer;
                    }
                }
            }
        }
        if batch.len() >= 100_000 {
            write_spot(&mut store, &types, std::mem::take(&mut batch));
        }
    }
    write_spot(&mut store, &types, batch);
    start.elapsed()
}

fn write_spot(
    store: &mut SqliteStore,
    types: &[InstanceType],
    spot_observations: Vec<SpotObservation>,
) {
    let now = Utc::now();
    let run = store
        .begin_run("aws", gpuplan_providers::Scope::Full, now)
        .unwrap();
    let snap = Snapshot {
        scope: Scope::SpotHistory,
        instance_types: types.to_vec(),
        spot_observations,
        ..Snapshot::default()
    };
    store
        .write_snapshot(run, "aws", &snap, &[], now, now)
        .unwrap();
}

/// Where a prices request spends its time, without HTTP: the query, then JSON.
fn in_process(path: &std::path::Path) {
    let store = SqliteStore::open(path).unwrap();
    let fresh = Freshness::read(&store, Default::default(), Utc::now()).unwrap();
    let filter = PriceFilter {
        gpus: vec!["H100-80GB".into()],
        ..PriceFilter::default()
    };
    let (mut query, mut encode) = (Vec::new(), Vec::new());
    let mut n = 0;
    for _ in 0..50 {
        let t = Instant::now();
        let records = catalog::prices(&store, &fresh, &filter).unwrap();
        query.push(t.elapsed());
        let t = Instant::now();
        n = serde_json::to_vec(&records).unwrap().len();
        encode.push(t.elapsed());
    }
    query.sort();
    encode.sort();
    println!(
        "in-process prices gpu=H100-80GB: query p50 {:.2} ms, JSON encode p50 {:.2} ms ({} KiB)",
        query[25].as_secs_f64() * 1e3,
        encode[25].as_secs_f64() * 1e3,
        n / 1024
    );
}

/// The uncached prices query idle, then while three heavy plans are requested.
async fn under_solves(client: &reqwest::Client, base: &str) {
    let uncached = |offset: usize| {
        let b = base.to_owned();
        move |i: usize| {
            format!(
                "{b}/v1/prices?gpu=H100-80GB&max_usd_per_gpu_hour={}",
                offset + i
            )
        }
    };
    let idle_p99 = load(client, uncached(100_000)).await.p99;
    let heavy: serde_json::Value =
        serde_json::from_str(include_str!("../tests/fixtures/heavy-two-class-week.json")).unwrap();
    let solves: Vec<_> = (0..3)
        .map(|_| {
            let req = client.post(format!("{base}/v1/plans")).json(&heavy);
            tokio::spawn(async move { req.send().await.map(|r| r.status().as_u16()) })
        })
        .collect();
    let mut running = String::new();
    for _ in 0..500 {
        let metrics = client
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        running = metrics
            .lines()
            .filter(|l| l.starts_with("gpuplan_solves_"))
            .collect::<Vec<_>>()
            .join(", ");
        if running.contains("gpuplan_solves_running 2") && running.contains("refused_total 1") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let busy = load(client, uncached(200_000)).await;
    let (p50, busy_p99) = (busy.p50, busy.p99);
    println!(
        "prices uncached, 3 heavy solves requested ({running}): p50 {:.2} ms, p99 {:.2} ms; idle p99 {:.2} ms; ratio {:.2}",
        p50.as_secs_f64() * 1e3,
        busy_p99.as_secs_f64() * 1e3,
        idle_p99.as_secs_f64() * 1e3,
        busy_p99.as_secs_f64() / idle_p99.as_secs_f64()
    );
    for s in solves {
        s.abort();
    }
}

#[tokio::main]
async fn main() {
    let observations: usize = std::env::var("OBSERVATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let dir = tempfile::tempdir().unwrap();
    let built = build_catalog(&dir.path().join("catalog.db"), observations);
    let size = std::fs::metadata(dir.path().join("catalog.db"))
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "catalog: {observations} spot observations, {} list prices; built in {:.1}s, {:.0} MiB",
        TYPES * REGIONS * 8,
        built.as_secs_f64(),
        size as f64 / 1048576.0
    );

    in_process(&dir.path().join("catalog.db"));

    let (child, base) = serve(dir.path(), "gpuplan", "path = \"catalog.db\"", "");
    let client = reqwest::Client::new();
    ready(&client, &base).await;
    println!(
        "idle daemon RSS: {:.1} MiB",
        rss_kib(child.id()) as f64 / 1024.0
    );

    // The first prices case repeats one query, which the daemon answers from its
    // cache for the current catalog state; the second sends a distinct query
    // each time, so every answer is computed.
    type PathOf = fn(usize) -> String;
    let paths: [(&str, PathOf); 7] = [
        ("prices gpu=H100-80GB", |_| {
            "/v1/prices?gpu=H100-80GB".to_owned()
        }),
        ("prices gpu=H100-80GB, uncached", |i| {
            format!("/v1/prices?gpu=H100-80GB&max_usd_per_gpu_hour={}", 1000 + i)
        }),
        ("spot-history 7d", |_| {
            "/v1/spot-history?instance=g0.1xlarge&region=region-3&since=7d".to_owned()
        }),
        ("spot-history 7d, all regions", |_| {
            "/v1/spot-history?instance=g0.1xlarge&since=7d".to_owned()
        }),
        ("dashboard /", |_| "/".to_owned()),
        ("dashboard /ui/prices", |_| "/ui/prices".to_owned()),
        ("dashboard /ui/prices, per GPU", |i| {
            format!(
                "/ui/prices?gpu=H100&unit=gpu&period=month&max_usd_per_gpu_hour={}",
                1000 + i
            )
        }),
    ];
    for (name, path) in paths {
        let b = base.clone();
        let support::Latency {
            p50,
            p99,
            max,
            bytes,
        } = load(&client, move |i| format!("{b}{}", path(i))).await;
        println!(
            "{name:<30} {REQUESTS} requests x{CONCURRENCY}: p50 {:.2} ms, p99 {:.2} ms, worst {:.2} ms, {} KiB/response",
            p50.as_secs_f64() * 1e3,
            p99.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3,
            bytes / 1024
        );
    }
    // What a browser downloads for a page: its HTML and every bundled file.
    let assets: usize = gpuplan::daemon::http::ui::ASSETS
        .iter()
        .map(|a| a.bytes.len())
        .sum();
    for page in ["/", "/ui/prices"] {
        let html = client.get(format!("{base}{page}")).send().await.unwrap();
        let html = html.bytes().await.unwrap().len();
        println!(
            "page weight {page:<12} {:.1} KB: HTML {:.1} KB + scripts and styles {:.1} KB",
            (html + assets) as f64 / 1000.0,
            html as f64 / 1000.0,
            assets as f64 / 1000.0
        );
    }
    println!(
        "daemon RSS after load: {:.1} MiB",
        rss_kib(child.id()) as f64 / 1024.0
    );
    under_solves(&client, &base).await;
    stop(child);
    // KEEP_CATALOG=path keeps a copy of the catalog for query-plan work.
    if let Some(keep) = std::env::var_os("KEEP_CATALOG") {
        std::fs::copy(dir.path().join("catalog.db"), keep).unwrap();
    }
    replicas(&client, dir.path()).await;
}

/// A price sheet of every type in every region, its prices moved by
/// `variant`, so that each sync of it writes new versions.
fn sheet(variant: usize) -> String {
    let mut out =
        String::from("region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\n");
    for i in 0..TYPES {
        for r in 0..REGIONS {
            let usd = 2.0 + i as f64 * 0.1 + (variant % 2) as f64 * 0.01;
            for kind in ["on_demand", "reserved_1y"] {
                out.push_str(&format!("sheet-{r},s{i}.xlarge,H100-80GB,8,{kind},{usd}\n"));
            }
        }
    }
    out
}

async fn good_syncs(client: &reqwest::Client, base: &str) -> usize {
    let runs: serde_json::Value = client
        .get(format!("{base}/v1/sync-runs?limit=1000"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    runs.as_array()
        .unwrap()
        .iter()
        .filter(|r| r["status"] == "ok" && r["source"] == "file:sheet")
        .count()
}

/// The uncached prices p99 on PostgreSQL: a replica alone, the same replica
/// while another syncs, and one replica that serves and syncs itself.
async fn replicas(client: &reqwest::Client, dir: &std::path::Path) {
    let Some(db) = gpuplan::store::scratch::ScratchDatabase::create() else {
        println!(
            "replicas: skipped ({} is not set)",
            gpuplan::store::scratch::SERVER_ENV
        );
        return;
    };
    let started = Instant::now();
    let pool = gpuplan::store::Pool::open(
        &gpuplan::store::Location::Postgres(gpuplan_providers::secret::Secret::new(db.url())),
        0,
    )
    .unwrap();
    let report = gpuplan::store::copy::copy_sqlite(&dir.join("catalog.db"), &pool).unwrap();
    drop(pool);
    println!(
        "store copy to PostgreSQL: {} rows in {:.1}s, {} current prices, checksums agree",
        report.rows.iter().map(|(_, n)| n).sum::<u64>(),
        started.elapsed().as_secs_f64(),
        report.current_prices
    );
    let store = format!("url = \"{}\"", db.url());
    let syncing = "[providers.file.sheet]\npath = \"sheet.csv\"\nschedule = \"* * * * * *\"\n";
    std::fs::write(dir.join("sheet.csv"), sheet(0)).unwrap();
    // The sheet changes every half second, so every sync writes.
    let flipping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flipper = {
        let (flipping, path) = (flipping.clone(), dir.join("sheet.csv"));
        std::thread::spawn(move || {
            let mut v = 0;
            while flipping.load(std::sync::atomic::Ordering::Relaxed) {
                v += 1;
                std::fs::write(&path, sheet(v)).unwrap();
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    let uncached = |base: &str, offset: usize| {
        let b = base.to_owned();
        move |i: usize| {
            format!(
                "{b}/v1/prices?gpu=H100-80GB&max_usd_per_gpu_hour={}",
                offset + i
            )
        }
    };
    let ms = |d: Duration| d.as_secs_f64() * 1e3;

    let (quiet, quiet_base) = serve(dir, "quiet", &store, "");
    ready(client, &quiet_base).await;
    let alone = load(client, uncached(&quiet_base, 300_000)).await.p99;

    let (syncer, syncer_base) = serve(dir, "syncer", &store, syncing);
    ready(client, &syncer_base).await;
    let before = good_syncs(client, &quiet_base).await;
    let beside = load(client, uncached(&quiet_base, 400_000)).await.p99;
    let during = good_syncs(client, &quiet_base).await - before;
    stop(syncer);

    // The control: the same sync load on the same server and machine, but
    // into another database, so nothing of it is shared with the replica
    // measured. What the p99 loses here is the machine's, not the sharing's.
    let other = gpuplan::store::scratch::ScratchDatabase::create().unwrap();
    let (elsewhere, elsewhere_base) = serve(
        dir,
        "elsewhere",
        &format!("url = \"{}\"", other.url()),
        syncing,
    );
    ready(client, &elsewhere_base).await;
    let control = load(client, uncached(&quiet_base, 450_000)).await.p99;
    stop(elsewhere);
    stop(quiet);

    let (single, single_base) = serve(dir, "single", &store, syncing);
    ready(client, &single_base).await;
    let before = good_syncs(client, &single_base).await;
    let itself = load(client, uncached(&single_base, 500_000)).await.p99;
    let during_single = good_syncs(client, &single_base).await - before;
    stop(single);
    flipping.store(false, std::sync::atomic::Ordering::Relaxed);
    let _ = flipper.join();
    println!(
        "prices uncached on PostgreSQL, p99: replica alone {:.2} ms; while another replica syncs ({during} syncs of {} prices) {:.2} ms; \
         while a daemon of another database syncs the same (control) {:.2} ms; one replica serving and syncing ({during_single} syncs) {:.2} ms; \
         ratios {:.2} to alone, {:.2} to the control, {:.2} to the single replica",
        ms(alone),
        TYPES * REGIONS * 2,
        ms(beside),
        ms(control),
        ms(itself),
        beside.as_secs_f64() / alone.as_secs_f64(),
        beside.as_secs_f64() / control.as_secs_f64(),
        beside.as_secs_f64() / itself.as_secs_f64()
    );
}
