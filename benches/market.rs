//! The whole market, a year deep: every region of every cloud with a year of
//! spot history (50 million observations by default) and 100,000 list
//! prices, and what the daemon answers from it.
//!
//! The catalog is written the way the daemon writes it, a sync at a time in
//! time order (every source's new observations each six hours), so its
//! pages are as full as a store grown over a year. On it, it prints:
//! - the store's bytes per observation;
//! - p50, p99 and worst latency from 4 clients of an uncached
//!   `GET /v1/prices` (a distinct filter each request), the dashboard's
//!   prices page and overview, and `/v1/spot-history` of one instance type
//!   (7 days in one region; 30 days in all its regions), first idle (2,000
//!   requests each), then for 8 seconds each while another process commits
//!   a sync of 10,000 new observations every second;
//! - such a sync's cost per observation, for 50 seconds with no request to
//!   the daemon, then under the loads;
//! - the daemon's resident memory, idle and after the loads;
//! - pruning the oldest month: how long it takes, and the readers' p99 and
//!   worst latency meanwhile;
//! - the same year written in the layout before migration 0018, and how
//!   long the migration takes to move it (and that every observation is
//!   there after it).
//!
//! With a PostgreSQL server (`GPUPLAN_TEST_PG_URL`, as the tests use), the
//! catalog is copied into a scratch database and the loads, the syncs and
//! the prune are measured there too, with the relations' bytes per
//! observation.
//!
//!     cargo bench --bench market                          # 50 M observations
//!     OBSERVATIONS=1000000 cargo bench --bench market     # the same at 1 M
//!     BACKENDS=postgres cargo bench --bench market        # only PostgreSQL's figures
//!     BACKENDS=sqlite,postgres cargo bench --bench market # both, not the migration
//!     KEEP_CATALOG=/tmp/year.db cargo bench --bench market   # keep the catalog as built
//!     BUILT_CATALOG=/tmp/year.db cargo bench --bench market  # start from it

mod support;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use gpuplan::catalog::{self, Freshness, PriceFilter};
use gpuplan::store::{Location, Pool, Reads, Retention};
use gpuplan_providers::secret::Secret;
use gpuplan_providers::{
    InstanceType, OfferingClass, PriceKind, PriceRecord, PriceScope, Scope, Snapshot,
    SpotObservation, Term, Upfront,
};
use support::{Latency, load, load_until, ready, rss_kib, serve, stop};

/// The GPU models of the catalog: as many as the clouds rent today, so that
/// one model's share of the catalog is what it is in a real one.
const GPUS: [&str; 40] = [
    "H100-80GB",
    "H200-141GB",
    "B200-192GB",
    "GH200-96GB",
    "A100-80GB",
    "A100-40GB",
    "L40S-48GB",
    "L40-48GB",
    "L4-24GB",
    "A10G-24GB",
    "A10-24GB",
    "T4-16GB",
    "V100-16GB",
    "V100-32GB",
    "P100-16GB",
    "P4-8GB",
    "K80-12GB",
    "M60-8GB",
    "A40-48GB",
    "A30-24GB",
    "A16-16GB",
    "A2-16GB",
    "RTX4090-24GB",
    "RTX3090-24GB",
    "RTXA6000-48GB",
    "RTXA5000-24GB",
    "RTXA4000-16GB",
    "RTX6000Ada-48GB",
    "MI300X-192GB",
    "MI250-128GB",
    "MI210-64GB",
    "Gaudi2-96GB",
    "Gaudi3-128GB",
    "Trainium-32GB",
    "Inferentia2-32GB",
    "T4G-16GB",
    "H100NVL-94GB",
    "H800-80GB",
    "A800-80GB",
    "L20-48GB",
];

/// One cloud of the generated market.
struct Cloud {
    name: &'static str,
    regions: usize,
    /// Zones a region has for spot (0: spot is priced per region).
    zones: usize,
    types: usize,
    kinds: Vec<(PriceKind, Option<OfferingClass>)>,
    /// Minutes between a spot series' changes, relative to the other clouds
    /// (`None`: the cloud has no spot history).
    spot_every: Option<f64>,
}

fn clouds() -> Vec<Cloud> {
    let aws_kinds = {
        let mut k = vec![(PriceKind::OnDemand, None)];
        for term in [Term::OneYear, Term::ThreeYears] {
            for upfront in [Upfront::No, Upfront::Partial, Upfront::All] {
                for class in [OfferingClass::Standard, OfferingClass::Convertible] {
                    k.push((PriceKind::AwsReserved(term, upfront), Some(class)));
                }
            }
            k.push((PriceKind::SavingsPlan(term), None));
        }
        k
    };
    let terms = |make: fn(Term) -> PriceKind| {
        [Term::OneYear, Term::ThreeYears]
            .into_iter()
            .map(move |t| (make(t), None))
    };
    let od = || std::iter::once((PriceKind::OnDemand, None));
    vec![
        Cloud {
            name: "aws",
            regions: 36,
            zones: 3,
            types: 100,
            kinds: aws_kinds,
            spot_every: Some(170.0),
        },
        Cloud {
            name: "azure",
            regions: 60,
            zones: 0,
            types: 100,
            kinds: od()
                .chain(terms(PriceKind::Reserved))
                .chain(terms(PriceKind::SavingsPlan))
                .collect(),
            spot_every: Some(240.0),
        },
        Cloud {
            name: "gcp",
            regions: 42,
            zones: 0,
            types: 90,
            kinds: od()
                .chain(std::iter::once((PriceKind::Spot, None)))
                .chain(terms(PriceKind::Commit))
                .chain([(PriceKind::FlexStart, None), (PriceKind::Calendar, None)])
                .collect(),
            spot_every: None,
        },
        Cloud {
            name: "alibaba",
            regions: 28,
            zones: 2,
            types: 80,
            kinds: od()
                .chain(
                    [Term::OneMonth, Term::OneYear, Term::ThreeYears]
                        .map(|t| (PriceKind::Prepaid(t), None)),
                )
                .collect(),
            spot_every: Some(120.0),
        },
        Cloud {
            name: "tencent",
            regions: 20,
            zones: 0,
            types: 80,
            kinds: od()
                .chain([Term::OneMonth, Term::OneYear].map(|t| (PriceKind::Prepaid(t), None)))
                .collect(),
            spot_every: None,
        },
        Cloud {
            name: "oci",
            regions: 40,
            zones: 0,
            types: 50,
            kinds: od().collect(),
            spot_every: None,
        },
        Cloud {
            name: "nebius",
            regions: 6,
            zones: 0,
            types: 12,
            kinds: od().chain(terms(PriceKind::Reserved)).collect(),
            spot_every: Some(60.0),
        },
        // A marketplace's medians per model and country, every ten minutes.
        Cloud {
            name: "vast",
            regions: 40,
            zones: 0,
            types: 20,
            kinds: od().collect(),
            spot_every: Some(10.0),
        },
    ]
}

/// A stable pseudo-random number from a key.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// Whether a type is offered in a region: eight in ten are.
fn offered(cloud: usize, t: usize, r: usize) -> bool {
    mix((cloud as u64) << 40 | (t as u64) << 20 | r as u64) % 10 < 8
}

fn type_name(cloud: &Cloud, t: usize) -> String {
    format!("{}-g{t}.{}xlarge", cloud.name, 1 << (t % 5))
}

fn region_name(cloud: &Cloud, r: usize) -> String {
    format!("{}-region-{r}", cloud.name)
}

fn instance_types(c: usize, cloud: &Cloud) -> Vec<InstanceType> {
    (0..cloud.types)
        .map(|t| InstanceType {
            instance_type: type_name(cloud, t),
            gpu_model: GPUS[(t * 7 + c * 3) % GPUS.len()].to_owned(),
            gpu_count: f64::from(1u32 << (t % 4)),
            gpu_memory_gib: Some(80.0),
            vcpus: Some(8 << (t % 4)),
            memory_gib: Some(f64::from(64u32 << (t % 4))),
            gpu_form_factor: None,
            mig_profile: None,
        })
        .collect()
}

fn list_prices(c: usize, cloud: &Cloud) -> Vec<PriceRecord> {
    let mut out = Vec::new();
    for t in 0..cloud.types {
        for r in (0..cloud.regions).filter(|&r| offered(c, t, r)) {
            for (k, (kind, class)) in cloud.kinds.iter().enumerate() {
                let usd = (1.0 + (t % 13) as f64 * 0.9)
                    * (1u32 << (t % 4)) as f64
                    * (1.0 - k as f64 * 0.02)
                    * (1.0 + r as f64 * 0.003);
                out.push(PriceRecord {
                    region: region_name(cloud, r),
                    zone: None,
                    instance_type: type_name(cloud, t),
                    price_kind: *kind,
                    offering_class: *class,
                    usd_per_hour: usd,
                    upfront_usd: 0.0,
                    recurring_usd_per_hour: usd,
                    source: Some(format!("SKU-{c}-{t}-{r}-{k}")),
                    available_regions: vec![],
                    max_instances: None,
                    price_scope: PriceScope::Instance,
                    window: None,
                });
            }
        }
    }
    out
}

/// One spot series: where it is, and how often its price changes.
struct Series {
    cloud: usize,
    region: String,
    zone: String,
    instance_type: String,
    every_secs: i64,
    phase_secs: i64,
    base: f64,
}

fn spot_series(clouds: &[Cloud], observations: usize) -> Vec<Series> {
    let mut out = Vec::new();
    for (c, cloud) in clouds.iter().enumerate() {
        let Some(every) = cloud.spot_every else {
            continue;
        };
        for t in 0..cloud.types {
            for r in (0..cloud.regions).filter(|&r| offered(c, t, r)) {
                let region = region_name(cloud, r);
                let zones: Vec<String> = if cloud.zones == 0 {
                    vec![region.clone()]
                } else {
                    (0..cloud.zones)
                        .map(|z| format!("{region}{}", (b'a' + z as u8) as char))
                        .collect()
                };
                for zone in zones {
                    let key = mix(out.len() as u64);
                    out.push(Series {
                        cloud: c,
                        region: region.clone(),
                        zone,
                        instance_type: type_name(cloud, t),
                        // Each series changes at its cloud's pace, give or take half.
                        every_secs: (every * 60.0 * (0.5 + (key % 1000) as f64 / 1000.0)) as i64,
                        phase_secs: (key >> 10) as i64,
                        base: 0.2 + (t % 13) as f64 * 0.3,
                    });
                }
            }
        }
    }
    // Every series slower or faster alike, so that the year holds
    // `observations`: the market's shape stays whatever its depth.
    let at_pace: f64 = out
        .iter()
        .map(|s| YEAR_SECS as f64 / s.every_secs as f64)
        .sum();
    let scale = at_pace / observations as f64;
    for s in &mut out {
        s.every_secs = ((s.every_secs as f64 * scale) as i64).max(1);
        s.phase_secs %= s.every_secs;
    }
    out
}

/// The price of series `s` at its `k`-th change: a walk within ±30 % of its base.
fn spot_price(s: &Series, k: i64) -> f64 {
    let step = mix((s.phase_secs as u64) << 20 ^ k as u64) % 600;
    ((s.base * (0.7 + step as f64 / 1000.0)) * 10_000.0).round() / 10_000.0
}

const YEAR_SECS: i64 = 365 * 86_400;
/// Every source syncs its new observations this often while the year is written.
const SYNC_SECS: i64 = 6 * 3600;

/// Calls `each` with every source's observations of each sync of the year,
/// in time order, and answers how many there were.
fn the_year(
    clouds: &[Cloud],
    series: &[Series],
    start: DateTime<Utc>,
    each: &mut dyn FnMut(&str, Vec<SpotObservation>),
) -> usize {
    let mut written = 0;
    for window in 0..YEAR_SECS / SYNC_SECS {
        let (from, to) = (window * SYNC_SECS, (window + 1) * SYNC_SECS);
        for (c, cloud) in clouds.iter().enumerate() {
            let mut batch = Vec::new();
            for s in series.iter().filter(|s| s.cloud == c) {
                // The changes k with from <= phase + k * every < to.
                let first = (from - s.phase_secs + s.every_secs - 1)
                    .div_euclid(s.every_secs)
                    .max(0);
                let mut k = first;
                while s.phase_secs + k * s.every_secs < to {
                    batch.push(SpotObservation {
                        region: s.region.clone(),
                        zone: s.zone.clone(),
                        instance_type: s.instance_type.clone(),
                        usd_per_hour: spot_price(s, k),
                        observed_at: start
                            + chrono::Duration::seconds(s.phase_secs + k * s.every_secs),
                    });
                    k += 1;
                }
            }
            if !batch.is_empty() {
                written += batch.len();
                each(cloud.name, batch);
            }
        }
    }
    written
}

fn types_of(clouds: &[Cloud], name: &str) -> Vec<InstanceType> {
    let c = clouds.iter().position(|c| c.name == name).unwrap();
    instance_types(c, &clouds[c])
}

fn write(pool: &Pool, provider: &str, snapshot: &Snapshot, at: DateTime<Utc>) -> Duration {
    let started = Instant::now();
    pool.write(|s| {
        let run = s.begin_run(provider, snapshot.scope, at).unwrap();
        s.write_snapshot(run, provider, snapshot, &[], at, at)
            .unwrap();
    });
    started.elapsed()
}

/// The catalog: every cloud's list prices, then the year of spot history a
/// sync at a time. Answers the list prices and observations written.
fn build(pool: &Pool, clouds: &[Cloud], series: &[Series], start: DateTime<Utc>) -> (usize, usize) {
    let mut prices = 0;
    for (c, cloud) in clouds.iter().enumerate() {
        let snapshot = Snapshot {
            instance_types: instance_types(c, cloud),
            prices: list_prices(c, cloud),
            ..Snapshot::default()
        };
        prices += snapshot.prices.len();
        write(pool, cloud.name, &snapshot, start);
    }
    let observations = the_year(clouds, series, start, &mut |provider, batch| {
        let at = batch.last().map_or(start, |o| o.observed_at);
        let snapshot = Snapshot {
            scope: Scope::SpotHistory,
            instance_types: types_of(clouds, provider),
            spot_observations: batch,
            ..Snapshot::default()
        };
        write(pool, provider, &snapshot, at);
    });
    (prices, observations)
}

/// The rest of the sync log the year leaves behind: the build writes a sync
/// every 6 hours, while a daemon keeps 90 days (the default retention) of a
/// spot sync every 10 minutes and a full sync every hour, per source.
fn sync_log(path: &Path, clouds: &[Cloud], now: DateTime<Utc>) -> usize {
    let mut conn = rusqlite::Connection::open(path).unwrap();
    let tx = conn.transaction().unwrap();
    let mut written = 0;
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO sync_runs (source, started_at, finished_at, status, scope, spot_seen)
                 VALUES (?1, ?2, ?3, 'ok', ?4, ?5)",
            )
            .unwrap();
        for tick in 0..90 * 144 {
            let finished = now - chrono::Duration::minutes(10 * tick);
            let at = |t: DateTime<Utc>| t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
            for cloud in clouds {
                let scope = if tick % 6 == 0 {
                    "full"
                } else {
                    "spot_history"
                };
                insert
                    .execute(rusqlite::params![
                        cloud.name,
                        at(finished - chrono::Duration::seconds(20)),
                        at(finished),
                        scope,
                        1000
                    ])
                    .unwrap();
                written += 1;
            }
        }
    }
    tx.commit().unwrap();
    written
}

/// A sync of 10,000 new observations (of the first 10,000 series) every
/// second until `stop`; answers each sync's cost per observation.
fn syncing(
    location: Location,
    clouds: Arc<Vec<Cloud>>,
    series: Arc<Vec<Series>>,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<Duration>> {
    std::thread::spawn(move || {
        let pool = Pool::open(&location, 0).unwrap();
        let mut costs = Vec::new();
        let mut tick = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let started = Instant::now();
            let now = Utc::now();
            let mut by_cloud: Vec<Vec<SpotObservation>> =
                clouds.iter().map(|_| Vec::new()).collect();
            for s in series.iter().take(10_000) {
                by_cloud[s.cloud].push(SpotObservation {
                    region: s.region.clone(),
                    zone: s.zone.clone(),
                    instance_type: s.instance_type.clone(),
                    usd_per_hour: spot_price(s, i64::from(tick)),
                    observed_at: now,
                });
            }
            let mut spent = Duration::ZERO;
            let mut written = 0;
            for (c, batch) in by_cloud.into_iter().enumerate() {
                if batch.is_empty() {
                    continue;
                }
                written += batch.len();
                let snapshot = Snapshot {
                    scope: Scope::SpotHistory,
                    instance_types: instance_types(c, &clouds[c]),
                    spot_observations: batch,
                    ..Snapshot::default()
                };
                spent += write(&pool, clouds[c].name, &snapshot, now);
            }
            costs.push(spent / u32::try_from(written.max(1)).unwrap());
            tick += 1;
            std::thread::sleep(Duration::from_secs(1).saturating_sub(started.elapsed()));
        }
        costs
    })
}

/// [`syncing`] while `meanwhile` runs; answers each sync's cost per
/// observation.
async fn with_syncs(
    location: &Location,
    clouds: &Arc<Vec<Cloud>>,
    series: &Arc<Vec<Series>>,
    meanwhile: impl std::future::Future<Output = ()>,
) -> Vec<Duration> {
    let stop = Arc::new(AtomicBool::new(false));
    let syncs = syncing(
        location.clone(),
        clouds.clone(),
        series.clone(),
        stop.clone(),
    );
    meanwhile.await;
    stop.store(true, Ordering::Relaxed);
    syncs.join().unwrap()
}

/// A line of what each sync of 10,000 observations cost per observation:
/// the mean over the syncs, the median sync and the worst.
fn write_costs(when: &str, mut costs: Vec<Duration>) {
    costs.sort();
    let mean = costs.iter().sum::<Duration>() / u32::try_from(costs.len()).unwrap();
    println!(
        "  {} syncs of 10,000 observations, {when}: write cost per observation mean {:.1} µs, p50 {:.1} µs, worst {:.1} µs",
        costs.len(),
        mean.as_secs_f64() * 1e6,
        costs[costs.len() / 2].as_secs_f64() * 1e6,
        costs[costs.len() - 1].as_secs_f64() * 1e6
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn line(name: &str, l: &Latency) {
    println!(
        "  {name:<40} p50 {:>7.2} ms  p99 {:>7.2} ms  worst {:>7.2} ms  {:>6} KiB",
        ms(l.p50),
        ms(l.p99),
        ms(l.max),
        l.bytes / 1024
    );
}

/// The path of a route's i-th request.
type PathOf = Box<dyn Fn(usize) -> String + Send + Sync>;

/// Every route's latency from 4 clients.
async fn routes(
    client: &reqwest::Client,
    base: &str,
    offset: usize,
    spot_type: &str,
    spot_region: &str,
    (requests, time): (usize, Option<Duration>),
) {
    let b = base.to_owned();
    let cases: Vec<(&str, PathOf)> = vec![
        (
            "prices gpu=H100-80GB, uncached",
            Box::new(move |i| {
                format!(
                    "/v1/prices?gpu=H100-80GB&max_usd_per_gpu_hour={}",
                    offset + i
                )
            }),
        ),
        (
            "dashboard /ui/prices",
            Box::new(|_| "/ui/prices".to_owned()),
        ),
        (
            "dashboard /ui/prices per GPU, uncached",
            Box::new(move |i| {
                format!(
                    "/ui/prices?gpu=H100&unit=gpu&period=month&max_usd_per_gpu_hour={}",
                    offset + i
                )
            }),
        ),
        ("dashboard overview /", Box::new(|_| "/".to_owned())),
        ("spot-history 7d, one region", {
            let (t, r) = (spot_type.to_owned(), spot_region.to_owned());
            Box::new(move |_| format!("/v1/spot-history?instance={t}&region={r}&since=7d"))
        }),
        ("spot-history 30d, all regions", {
            let t = spot_type.to_owned();
            Box::new(move |_| format!("/v1/spot-history?instance={t}&since=30d"))
        }),
    ];
    for (name, path) in cases {
        let b = b.clone();
        let deadline = time.map(|t| Instant::now() + t);
        let l = load_until(client, requests, deadline, move |i| {
            format!("{b}{}", path(i))
        })
        .await;
        line(name, &l);
    }
}

/// What one backend answers: idle, while syncs commit, and while the oldest
/// month is pruned.
async fn measure(
    label: &str,
    location: Location,
    store_toml: &str,
    dir: &Path,
    clouds: &Arc<Vec<Cloud>>,
    series: &Arc<Vec<Series>>,
    now: DateTime<Utc>,
) {
    let spot = &series[series.len() / 3];
    let (spot_type, spot_region) = (spot.instance_type.clone(), spot.region.clone());
    let regions = series
        .iter()
        .filter(|s| s.instance_type == spot_type)
        .count();
    println!("{label}: spot-history of {spot_type} ({regions} series), 7 days in {spot_region}");
    let (child, base) = serve(dir, label, store_toml, "");
    let client = reqwest::Client::new();
    ready(&client, &base).await;
    println!(
        "  daemon RSS idle: {:.1} MiB",
        rss_kib(child.id()) as f64 / 1024.0
    );
    println!(" idle, 4 clients:");
    routes(
        &client,
        &base,
        1_000_000,
        &spot_type,
        &spot_region,
        (2000, None),
    )
    .await;
    println!(
        "  daemon RSS after load: {:.1} MiB",
        rss_kib(child.id()) as f64 / 1024.0
    );

    // The write cost alone: syncs while nothing is asked of the daemon, long
    // enough on SQLite that every series' recent observations move into the
    // history twice (spot_recent holds about 25 of these syncs'
    // observations, and each sync moves the rows of the next series round
    // beyond that); PostgreSQL writes them into the history directly.
    let quiet = tokio::time::sleep(Duration::from_secs(50));
    write_costs(
        "no requests",
        with_syncs(&location, clouds, series, quiet).await,
    );

    println!(" while 10,000 new observations commit every second:");
    // Each route for 8 seconds, so that 8 commits fall within it however
    // fast it is answered (each voids every cached answer).
    let loads = routes(
        &client,
        &base,
        2_000_000,
        &spot_type,
        &spot_region,
        (usize::MAX, Some(Duration::from_secs(8))),
    );
    write_costs(
        "under the loads",
        with_syncs(&location, clouds, series, loads).await,
    );
    println!(
        "  daemon RSS after syncs: {:.1} MiB",
        rss_kib(child.id()) as f64 / 1024.0
    );

    // Retention of eleven months: the oldest month of the year goes.
    let retention = Retention {
        spot_history: Some(Duration::from_secs(335 * 86_400)),
        ..Retention::default()
    };
    let pruning = {
        let location = location.clone();
        std::thread::spawn(move || {
            let pool = Pool::open(&location, 0).unwrap();
            let started = Instant::now();
            let counts = gpuplan::store::prune(&pool, &retention, now, false).unwrap();
            (counts.spot_observations, started.elapsed())
        })
    };
    let b = base.clone();
    let (t, r) = (spot_type.clone(), spot_region.clone());
    let mut readers = Vec::new();
    while !pruning.is_finished() {
        let (b, t, r) = (b.clone(), t.clone(), r.clone());
        readers.push(
            load(&client, move |i| {
                if i % 2 == 0 {
                    format!(
                        "{b}/v1/prices?gpu=H100-80GB&max_usd_per_gpu_hour={}",
                        3_000_000 + i
                    )
                } else {
                    format!("{b}/v1/spot-history?instance={t}&region={r}&since=7d")
                }
            })
            .await,
        );
    }
    let (pruned, took) = pruning.join().unwrap();
    let worst = readers.iter().map(|l| l.max).max().unwrap_or_default();
    let p99 = readers.iter().map(|l| l.p99).max().unwrap_or_default();
    println!(
        "  prune of the oldest month: {pruned} observations in {:.1} s; readers meanwhile ({} loads): p99 {:.2} ms, worst {:.2} ms",
        took.as_secs_f64(),
        readers.len(),
        ms(p99),
        ms(worst)
    );
    stop(child);
}

/// The year in the layout before migration 0018 (texts, a second index),
/// then the migration that moves it, timed; every observation is counted
/// and summed on both sides.
fn migration(
    dir: &Path,
    clouds: &[Cloud],
    series: &[Series],
    start: DateTime<Utc>,
    written: usize,
) {
    let path = dir.join("before-0018.db");
    let mut conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA cache_size = -1000000",
    )
    .unwrap();
    let mut steps: Vec<_> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/sqlite"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_str().unwrap() < "0018")
            .collect();
    steps.sort();
    for step in &steps {
        conn.execute_batch(&std::fs::read_to_string(step).unwrap())
            .unwrap();
    }
    conn.pragma_update(None, "user_version", steps.len() as i64)
        .unwrap();
    let started = Instant::now();
    let mut sum = 0.0;
    let tx = conn.transaction().unwrap();
    {
        let mut insert = tx
            .prepare(
                "INSERT INTO spot_observations (provider, region, zone, instance_type, observed_at, usd_per_hour)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            )
            .unwrap();
        the_year(clouds, series, start, &mut |provider, batch| {
            for o in batch {
                sum += o.usd_per_hour;
                insert
                    .execute(rusqlite::params![
                        provider,
                        o.region,
                        o.zone,
                        o.instance_type,
                        o.observed_at
                            .to_rfc3339_opts(chrono::SecondsFormat::Micros, true),
                        o.usd_per_hour
                    ])
                    .unwrap();
            }
        });
        tx.execute(
            "INSERT INTO spot_series (provider, instance_type, zone, region)
             SELECT provider, instance_type, zone, max(region) FROM spot_observations
             GROUP BY provider, instance_type, zone",
            [],
        )
        .unwrap();
    }
    tx.commit().unwrap();
    drop(conn);
    let size = std::fs::metadata(&path).unwrap().len();
    println!(
        "before 0018: {written} observations written in {:.0} s, {:.1} bytes per observation",
        started.elapsed().as_secs_f64(),
        size as f64 / written as f64
    );
    let started = Instant::now();
    drop(Pool::open(&Location::Sqlite(path.clone()), 0).unwrap());
    let took = started.elapsed();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let (count, moved_sum): (i64, f64) = conn
        .query_row(
            "SELECT count(*), total(usd_per_hour) FROM spot_observations",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(count as usize, written, "the migration lost observations");
    assert!(
        (moved_sum - sum).abs() < 1e-6 * sum.max(1.0),
        "the migration changed prices"
    );
    println!(
        "migration 0018 of {count} observations: {:.0} s, every observation there, prices summing the same",
        took.as_secs_f64()
    );
}

/// Where an uncached prices answer and a spot history of 30 days in every
/// region spend their time, without HTTP: the query and the records, then
/// the JSON.
fn in_process(path: &Path, spot_type: &str) {
    let store = gpuplan::store::SqliteStore::open(path).unwrap();
    let fresh = Freshness::read(&store, Default::default(), Utc::now()).unwrap();
    let filter = PriceFilter {
        gpus: vec!["H100-80GB".into()],
        ..PriceFilter::default()
    };
    let (mut query, mut encode) = (Vec::new(), Vec::new());
    let (mut n, mut bytes) = (0, 0);
    for _ in 0..30 {
        let t = Instant::now();
        let records = catalog::prices(&store, &fresh, &filter).unwrap();
        query.push(t.elapsed());
        let t = Instant::now();
        bytes = serde_json::to_vec(&records).unwrap().len();
        encode.push(t.elapsed());
        n = records.len();
    }
    query.sort();
    encode.sort();
    println!(
        "in-process prices gpu=H100-80GB ({n} records, {} KiB): query and records p50 {:.2} ms, JSON p50 {:.2} ms",
        bytes / 1024,
        ms(query[15]),
        ms(encode[15])
    );
    let query = catalog::SpotQuery {
        instance_type: spot_type.to_owned(),
        provider: None,
        region: None,
        zone: None,
        since: fresh.now - chrono::Duration::days(30),
        max_observations: Some(catalog::MAX_SPOT_OBSERVATIONS),
    };
    let (mut read, mut history, mut encode) = (Vec::new(), Vec::new(), Vec::new());
    let (mut n, mut bytes) = (0, 0);
    for _ in 0..30 {
        let t = Instant::now();
        n = store
            .spot_history(
                spot_type,
                None,
                None,
                None,
                query.since,
                query.max_observations,
            )
            .unwrap()
            .len();
        read.push(t.elapsed());
        let t = Instant::now();
        let h = catalog::spot_history(&store, &query, &fresh).unwrap();
        history.push(t.elapsed());
        let t = Instant::now();
        bytes = serde_json::to_vec(&h).unwrap().len();
        encode.push(t.elapsed());
    }
    for v in [&mut read, &mut history, &mut encode] {
        v.sort();
    }
    println!(
        "in-process spot-history 30d of {spot_type} ({n} observations, {} KiB): store read p50 {:.2} ms, \
         with series and statistics {:.2} ms, JSON {:.2} ms",
        bytes / 1024,
        ms(read[15]),
        ms(history[15]),
        ms(encode[15])
    );
}

fn sqlite_bytes(path: &Path) -> u64 {
    ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", path.display())).ok())
        .map(|m| m.len())
        .sum()
}

#[tokio::main]
async fn main() {
    let observations: usize = std::env::var("OBSERVATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(50_000_000);
    // BACKENDS names what is measured of `sqlite`, `postgres` and
    // `migration` (all three when unset); the SQLite catalog is built
    // whatever it names, as the others' source.
    let wants = |what: &str| std::env::var("BACKENDS").map_or(true, |b| b.contains(what));
    let measures_sqlite = wants("sqlite");
    let dir = tempfile::tempdir().unwrap();
    let clouds = Arc::new(clouds());
    let series = Arc::new(spot_series(&clouds, observations));
    // The year ends now, so that the dashboard's "7 days" and "30 days" are full.
    let now = Utc::now();
    let start = now - chrono::Duration::seconds(YEAR_SECS);

    let path = dir.path().join("catalog.db");
    let location = Location::Sqlite(path.clone());
    // BUILT_CATALOG=path starts from a catalog an earlier run kept (with
    // KEEP_CATALOG, at the same OBSERVATIONS) instead of writing the year
    // again: a quarter of an hour at 50 million.
    let written = if let Some(built) = std::env::var_os("BUILT_CATALOG") {
        std::fs::copy(&built, &path).unwrap();
        let conn = rusqlite::Connection::open(&path).unwrap();
        let written: i64 = conn
            .query_row("SELECT count(*) FROM spot_observations", [], |r| r.get(0))
            .unwrap();
        println!(
            "catalog: {written} spot observations, as kept by an earlier run; SQLite {:.0} MiB",
            sqlite_bytes(&path) as f64 / 1048576.0
        );
        usize::try_from(written).unwrap()
    } else {
        let started = Instant::now();
        let pool = Pool::open(&location, 0).unwrap();
        let (prices, written) = build(&pool, &clouds, &series, start);
        drop(pool);
        let bytes = sqlite_bytes(&path);
        println!(
            "catalog: {written} spot observations in {} series, {prices} list prices; written a sync at a time in {:.0} s; \
             SQLite {:.0} MiB, {:.1} bytes per observation (the whole file)",
            series.len(),
            started.elapsed().as_secs_f64(),
            bytes as f64 / 1048576.0,
            bytes as f64 / written as f64
        );
        let runs = sync_log(&path, &clouds, now - chrono::Duration::hours(1));
        println!("sync log: {runs} more runs, 90 days of 10-minute syncs of every source");
        written
    };
    in_process(&path, &series[series.len() / 3].instance_type);
    // KEEP_CATALOG=path keeps a copy of the catalog as built, for query-plan work.
    if let Some(keep) = std::env::var_os("KEEP_CATALOG") {
        std::fs::copy(&path, keep).unwrap();
    }
    // PostgreSQL gets a copy of the catalog as it is now, before the
    // SQLite measurements add syncs and prune it.
    let pg = if wants("postgres") {
        gpuplan::store::scratch::ScratchDatabase::create()
    } else {
        None
    };
    if let Some(db) = &pg {
        let started = Instant::now();
        let target = Pool::open(&Location::Postgres(Secret::new(db.url())), 0).unwrap();
        let report = gpuplan::store::copy::copy_sqlite(&path, &target).unwrap();
        drop(target);
        let (client, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        let row = client
            .query_one(
                "SELECT pg_total_relation_size('spot_observations'), pg_database_size(current_database())",
                &[],
            )
            .await
            .unwrap();
        let (relation, database): (i64, i64) = (row.get(0), row.get(1));
        println!(
            "PostgreSQL copy (as `gpuplan store copy` makes it, vacuumed and analyzed): {} rows in {:.0} s; spot_observations with its index {:.1} bytes per observation, the database {:.0} MiB",
            report.rows.iter().map(|(_, n)| n).sum::<u64>(),
            started.elapsed().as_secs_f64(),
            relation as f64 / written as f64,
            database as f64 / 1048576.0
        );
    }
    if measures_sqlite {
        measure(
            "sqlite",
            location,
            "path = \"catalog.db\"",
            dir.path(),
            &clouds,
            &series,
            now,
        )
        .await;
    }
    match &pg {
        Some(db) => {
            let store = format!("url = \"{}\"", db.url());
            let location = Location::Postgres(Secret::new(db.url()));
            measure(
                "postgres",
                location,
                &store,
                dir.path(),
                &clouds,
                &series,
                now,
            )
            .await;
        }
        None => println!(
            "postgres: skipped (not in BACKENDS, or {} is not set)",
            gpuplan::store::scratch::SERVER_ENV
        ),
    }
    if wants("migration") {
        migration(dir.path(), &clouds, &series, start, written);
    }
}
