//! Price-list rows that must never become prices (provider-apis §17.2): a
//! Capacity Block's fee row before, after or on another page than the
//! on-demand row, and $0.00 placeholders, through both AWS paths.

use std::sync::OnceLock;

use super::sdk_tests::sdk_config;
use super::tests::{config, price};
use super::*;
use crate::snapshot::{PriceKind, Term, Upfront};
use crate::test_server::aws::{Offers, Row, answer_from, offer_file};
use crate::test_server::{self, FixtureServer};

const NONE: &[(&str, &str, &str, &str)] = &[];

fn row<'a>(sku: &'a str, itype: &'a str, market: &'a str, usd: &'a str) -> Row<'a> {
    Row {
        sku,
        instance_type: itype,
        operating_system: "Linux",
        market,
        gpus: "8",
        on_demand: Some(usd),
        reserved: NONE,
    }
}

/// Offer files laid out so that GetProducts pages (two items each, in SKU
/// order) put each trap where it hurts:
/// - us-east-1 p5: the Capacity Block row on page 1, the on-demand row on
///   page 2; p4d: the $0.00 block row first; p5e: a block priced in cents
///   after the on-demand row; g5: a $0.00 OnDemand placeholder before the real
///   row, and a reserved term of 0 upfront and 0 an hour; g6: a $0.00 row as
///   the region's only one.
/// - us-west-2 p5: the block row after the on-demand row on the same page.
fn trap_offers() -> Offers<'static> {
    static FILES: OnceLock<(String, String)> = OnceLock::new();
    let (east, west) = FILES.get_or_init(|| {
        let east = offer_file(
            "us-east-1",
            &[
                row(
                    "P4DACAPBLOCK001",
                    "p4d.24xlarge",
                    "CapacityBlock",
                    "0.0000000000",
                ),
                row(
                    "P4DBLINUX000001",
                    "p4d.24xlarge",
                    "OnDemand",
                    "32.7726000000",
                ),
                row(
                    "P5ACAPBLOCK0001",
                    "p5.48xlarge",
                    "CapacityBlock",
                    "0.0000000000",
                ),
                Row {
                    operating_system: "Windows",
                    ..row(
                        "P5BWINDOWS00001",
                        "p5.48xlarge",
                        "OnDemand",
                        "100.1600000000",
                    )
                },
                Row {
                    reserved: &[("1yr", "Partial Upfront", "86829", "9.9120000000")],
                    ..row(
                        "P5CLINUX0000001",
                        "p5.48xlarge",
                        "OnDemand",
                        "98.3200000000",
                    )
                },
                row(
                    "P5EALINUX000001",
                    "p5e.48xlarge",
                    "OnDemand",
                    "39.8000000000",
                ),
                row(
                    "P5EBCAPBLOCK001",
                    "p5e.48xlarge",
                    "CapacityBlock",
                    "0.0420000000",
                ),
                Row {
                    gpus: "1",
                    ..row("G5AZEROPLACEHLD", "g5.xlarge", "OnDemand", "0.0000000000")
                },
                Row {
                    gpus: "1",
                    reserved: &[
                        ("1yr", "No Upfront", "0", "0.0000000000"),
                        ("3yr", "All Upfront", "9000", "0.0000000000"),
                    ],
                    ..row("G5BLINUX0000001", "g5.xlarge", "OnDemand", "1.0060000000")
                },
                Row {
                    gpus: "1",
                    ..row("G6ZEROONLY00001", "g6.xlarge", "OnDemand", "0.0000000000")
                },
            ],
        );
        let west = offer_file(
            "us-west-2",
            &[
                row(
                    "P5ALINUX0000001",
                    "p5.48xlarge",
                    "OnDemand",
                    "55.0400000000",
                ),
                row(
                    "P5BCAPBLOCK0001",
                    "p5.48xlarge",
                    "CapacityBlock",
                    "0.0420000000",
                ),
            ],
        );
        (east, west)
    });
    Offers {
        east,
        west,
        extra_types: false,
    }
}

async fn trap_server() -> FixtureServer {
    test_server::serve(|req, base, _| answer_from(req, base, trap_offers())).await
}

fn on_demand(snap: &Snapshot, region: &str, itype: &str) -> f64 {
    price(snap, region, itype, PriceKind::OnDemand).usd_per_hour
}

fn skipped(snap: &Snapshot, reason: &str) -> u64 {
    snap.skipped.get(reason).copied().unwrap_or(0)
}

/// What both paths must agree on for the types they both read.
fn assert_no_poisoned_price(snap: &Snapshot) {
    assert!(
        snap.prices.iter().all(|p| p.usd_per_hour > 0.0),
        "a price of 0 was kept: {:?}",
        snap.prices.iter().find(|p| p.usd_per_hour <= 0.0)
    );
    assert_eq!(on_demand(snap, "us-east-1", "p5.48xlarge"), 98.32);
    assert_eq!(on_demand(snap, "us-west-2", "p5.48xlarge"), 55.04);
    assert_eq!(on_demand(snap, "us-east-1", "g5.xlarge"), 1.006);
    assert_eq!(
        price(snap, "us-east-1", "g5.xlarge", PriceKind::OnDemand)
            .source
            .as_deref(),
        Some("G5BLINUX0000001")
    );
    // All Upfront: an hourly 0 with a fee is a price; 0 and 0 is none.
    let all = price(
        snap,
        "us-east-1",
        "g5.xlarge",
        PriceKind::AwsReserved(Term::ThreeYears, Upfront::All),
    );
    assert!((all.usd_per_hour - 9000.0 / 26280.0).abs() < 1e-12);
    assert!(
        !snap
            .prices
            .iter()
            .any(|p| p.price_kind == PriceKind::AwsReserved(Term::OneYear, Upfront::No))
    );
    assert!(!snap.prices.iter().any(|p| p.instance_type == "g6.xlarge"));
    // The g5 placeholder, the g5 reserved term of nothing and the g6 row.
    assert_eq!(skipped(snap, "zero_price"), 3);
    assert_eq!(skipped(snap, "duplicate"), 0);
}

#[tokio::test]
async fn capacity_block_rows_and_zero_placeholders_never_become_prices_in_offer_files() {
    let server = trap_server().await;
    let snap = AwsProvider::new(config(&server, &["us-east-1", "us-west-2"]))
        .unwrap()
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert_no_poisoned_price(&snap);
    assert_eq!(on_demand(&snap, "us-east-1", "p4d.24xlarge"), 32.7726);
    assert_eq!(on_demand(&snap, "us-east-1", "p5e.48xlarge"), 39.8);
    // p4d, p5 and p5e in us-east-1, p5 in us-west-2.
    assert_eq!(skipped(&snap, "marketoption_not_ondemand"), 4);
}

#[tokio::test]
async fn capacity_block_rows_and_zero_placeholders_never_become_prices_in_get_products_pages() {
    let server = trap_server().await;
    // The price list's rows alone: Capacity Block offerings have their own test.
    let mut cfg = sdk_config(&server, &["us-east-1", "us-west-2"]);
    cfg.sources.capacity_blocks = false;
    let snap = AwsProvider::new(cfg)
        .unwrap()
        .fetch(&FetchContext::default())
        .await
        .unwrap();
    assert_no_poisoned_price(&snap);
    // Only described types are asked for: p5 in both regions.
    assert_eq!(skipped(&snap, "marketoption_not_ondemand"), 2);
    // The block row of us-east-1 really was on another page than the
    // on-demand row: p5 took two GetProducts calls there.
    let p5_east = server
        .requests()
        .iter()
        .filter(|r| {
            r.headers.contains_key("x-amz-target")
                && r.body.contains("\"p5.48xlarge\"")
                && r.body.contains("\"us-east-1\"")
        })
        .count();
    assert_eq!(p5_east, 2);
}

/// Every order of a Capacity Block row, a $0.00 placeholder and the real
/// on-demand row gives the real price, whether the rows come in an offer file
/// or one by one as GetProducts elements.
#[test]
fn no_order_of_the_rows_changes_the_on_demand_price() {
    let rows = [
        ("CapacityBlock", "0.0420000000"),
        ("OnDemand", "0.0000000000"),
        ("OnDemand", "32.7726000000"),
    ];
    for order in [
        [0, 1, 2],
        [0, 2, 1],
        [1, 0, 2],
        [1, 2, 0],
        [2, 0, 1],
        [2, 1, 0],
    ] {
        // SKUs sort in the order tried: the file's maps are read in key order.
        let skus: Vec<String> = (0..3).map(|i| format!("SKU{i}P4D00000000")).collect();
        let file = offer_file(
            "us-east-1",
            &order
                .iter()
                .enumerate()
                .map(|(i, &r)| row(&skus[i], "p4d.24xlarge", rows[r].0, rows[r].1))
                .collect::<Vec<_>>(),
        );
        let from_file = offer::parse(file.as_bytes(), Vec::new(), None).unwrap();
        let value: serde_json::Value = serde_json::from_str(&file).unwrap();
        let mut collector = offer::Collector::new(Vec::new(), None);
        for sku in &skus {
            let item = serde_json::json!({
                "product": value["products"][sku],
                "terms": {"OnDemand": value["terms"]["OnDemand"][sku]},
            });
            collector.item(&serde_json::from_value(item).unwrap());
        }
        let from_items = collector.finish();
        for snap in [&from_file, &from_items] {
            assert_eq!(snap.prices.len(), 1, "order {order:?}");
            assert_eq!(
                on_demand(snap, "us-east-1", "p4d.24xlarge"),
                32.7726,
                "order {order:?}"
            );
            assert_eq!(skipped(snap, "marketoption_not_ondemand"), 1);
            assert_eq!(skipped(snap, "zero_price"), 1);
        }
    }
}

/// A row written before Capacity Blocks existed has no `marketoption`: it is
/// an on-demand row.
#[test]
fn a_row_without_a_market_option_is_on_demand() {
    let file = offer_file(
        "us-east-1",
        &[row(
            "P5LINUX00000001",
            "p5.48xlarge",
            "OnDemand",
            "98.3200000000",
        )],
    )
    .replace(",\"marketoption\":\"OnDemand\"", "");
    assert!(!file.contains("marketoption"));
    let snap = offer::parse(file.as_bytes(), Vec::new(), None).unwrap();
    assert_eq!(on_demand(&snap, "us-east-1", "p5.48xlarge"), 98.32);
}

/// Slices of an L4 are records of a share of one L4, whatever the price
/// list's `gpu` says (1): never a whole L4 at a slice's price.
#[test]
fn fractional_sizes_are_priced_as_the_share_of_a_gpu_they_are() {
    let file = offer_file(
        "us-east-1",
        &[
            Row {
                gpus: "1",
                ..row("G6FLARGE0000001", "g6f.large", "OnDemand", "0.2020000000")
            },
            Row {
                gpus: "1",
                ..row("G6F4XLARGE00001", "g6f.4xlarge", "OnDemand", "0.9120000000")
            },
        ],
    );
    let snap = offer::parse(file.as_bytes(), Vec::new(), None).unwrap();
    let t = |name: &str| {
        snap.instance_types
            .iter()
            .find(|t| t.instance_type == name)
            .unwrap()
    };
    assert_eq!(
        (
            t("g6f.large").gpu_model.as_str(),
            t("g6f.large").gpu_count,
            t("g6f.large").gpu_memory_gib
        ),
        ("L4", 0.125, Some(3.0))
    );
    assert_eq!(
        (t("g6f.4xlarge").gpu_count, t("g6f.4xlarge").gpu_memory_gib),
        (0.5, Some(12.0))
    );
    assert_eq!(on_demand(&snap, "us-east-1", "g6f.large"), 0.202);
    assert_eq!(skipped(&snap, "fractional_gpu"), 0);
}
