//! Streaming parse of a generated AmazonEC2 offer file (the real bulk format,
//! 300+ MB): prints throughput and the parser's peak RSS. The parse runs in a
//! child process, so the peak is the parser's own, not the generator's.
//!
//!     cargo bench -p gpuplan-providers --bench offer [-- MB]

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const FAMILIES: &[(&str, u32)] = &[
    ("p5", 8),
    ("p4d", 8),
    ("g5", 1),
    ("g6", 4),
    ("m7i", 0),
    ("c7g", 0),
    ("r6i", 0),
];
const OS: &[&str] = &["Linux", "Windows", "RHEL", "SUSE"];
const TENANCY: &[&str] = &["Shared", "Dedicated", "Host"];
const RESERVED: &[(&str, &str, &str, &str)] = &[
    ("4NA7Y494T4", "1yr", "standard", "No Upfront"),
    ("HU7G6KETJZ", "1yr", "standard", "Partial Upfront"),
    ("6QCMYABX3D", "1yr", "standard", "All Upfront"),
    ("BPH4J8HBKS", "3yr", "standard", "No Upfront"),
    ("38NPMPTW36", "3yr", "standard", "Partial Upfront"),
    ("NQ3QZPMQV9", "3yr", "standard", "All Upfront"),
    ("7NE97W5U4E", "1yr", "convertible", "No Upfront"),
    ("CUZHX8X6JH", "1yr", "convertible", "Partial Upfront"),
    ("VJWZNREJX2", "1yr", "convertible", "All Upfront"),
    ("Z2E3P23VKM", "3yr", "convertible", "No Upfront"),
    ("R5XV2EPZQZ", "3yr", "convertible", "Partial Upfront"),
    ("MZU6U2429S", "3yr", "convertible", "All Upfront"),
];

fn sku(i: usize) -> String {
    format!("SKU{i:013}")
}

fn product(i: usize) -> String {
    let (family, gpus) = FAMILIES[i % FAMILIES.len()];
    // A size per SKU, so kept products do not collapse into a few duplicates.
    let itype = format!("{family}.{i}xlarge");
    let os = OS[(i / FAMILIES.len()) % OS.len()];
    let tenancy = TENANCY[(i / 28) % TENANCY.len()];
    let product_family = if i.is_multiple_of(97) {
        "Storage"
    } else {
        "Compute Instance"
    };
    format!(
        r#""{sku}":{{"sku":"{sku}","productFamily":"{product_family}","attributes":{{"servicecode":"AmazonEC2","location":"US East (N. Virginia)","locationType":"AWS Region","instanceType":"{itype}","currentGeneration":"Yes","instanceFamily":"GPU instance","vcpu":"192","physicalProcessor":"AMD EPYC 7R13 Processor","clockSpeed":"3.6 GHz","memory":"2,048 GiB","storage":"8 x 3840 SSD","networkPerformance":"3200 Gigabit","processorArchitecture":"64-bit","tenancy":"{tenancy}","operatingSystem":"{os}","licenseModel":"No License required","usagetype":"BoxUsage:{itype}","operation":"RunInstances","capacitystatus":"Used","gpu":"{gpus}","gpuMemory":"NA","marketoption":"OnDemand","normalizationSizeFactor":"192","preInstalledSw":"NA","regionCode":"us-east-1","servicename":"Amazon Elastic Compute Cloud"}}}}"#,
        sku = sku(i)
    )
}

fn dimension(sku: &str, code: &str, rate: &str, unit: &str, usd: f64) -> String {
    format!(
        r#""{sku}.{code}.{rate}":{{"unit":"{unit}","endRange":"Inf","description":"USD {usd:.10} per unit","appliesTo":[],"rateCode":"{sku}.{code}.{rate}","beginRange":"0","pricePerUnit":{{"USD":"{usd:.10}"}}}}"#
    )
}

fn terms(i: usize, reserved: bool) -> String {
    let sku = sku(i);
    let base = 0.5 + (i % 1000) as f64 / 10.0;
    if !reserved {
        return format!(
            r#""{sku}":{{"{sku}.JRTCKXETXF":{{"offerTermCode":"JRTCKXETXF","sku":"{sku}","effectiveDate":"2026-11-01T00:00:00Z","priceDimensions":{{{}}},"termAttributes":{{}}}}}}"#,
            dimension(&sku, "JRTCKXETXF", "6YS6EN2CT7", "Hrs", base)
        );
    }
    let each: Vec<String> = RESERVED
        .iter()
        .map(|(code, lease, class, option)| {
            let mut dims = vec![dimension(&sku, code, "6YS6EN2CT7", "Hrs", base * 0.6)];
            if *option != "No Upfront" {
                dims.push(dimension(&sku, code, "2TG2D8R56U", "Quantity", base * 4000.0));
            }
            format!(
                r#""{sku}.{code}":{{"offerTermCode":"{code}","sku":"{sku}","effectiveDate":"2026-11-01T00:00:00Z","priceDimensions":{{{}}},"termAttributes":{{"LeaseContractLength":"{lease}","OfferingClass":"{class}","PurchaseOption":"{option}"}}}}"#,
                dims.join(",")
            )
        })
        .collect();
    format!(r#""{sku}":{{{}}}"#, each.join(","))
}

/// Writes an offer file of about `target_mb` MB; returns its SKU count.
fn generate(path: &Path, target_mb: usize) -> usize {
    let per_sku = product(0).len() + terms(0, false).len() + terms(0, true).len() + 3;
    let n = target_mb * 1_000_000 / per_sku + 1;
    let mut w = BufWriter::new(File::create(path).unwrap());
    write!(w, r#"{{"formatVersion":"v1.0","disclaimer":"synthetic","offerCode":"AmazonEC2","version":"20261101000000","publicationDate":"2026-11-01T00:00:00Z","products":{{"#).unwrap();
    for i in 0..n {
        if i > 0 {
            w.write_all(b",").unwrap();
        }
        w.write_all(product(i).as_bytes()).unwrap();
    }
    w.write_all(br#"},"terms":{"OnDemand":{"#).unwrap();
    for i in 0..n {
        if i > 0 {
            w.write_all(b",").unwrap();
        }
        w.write_all(terms(i, false).as_bytes()).unwrap();
    }
    w.write_all(br#"},"Reserved":{"#).unwrap();
    for i in 0..n {
        if i > 0 {
            w.write_all(b",").unwrap();
        }
        w.write_all(terms(i, true).as_bytes()).unwrap();
    }
    w.write_all(br#"}},"attributesList":{}}"#).unwrap();
    w.flush().unwrap();
    n
}

fn peak_rss_mb() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--parse") {
        let path = &args[i + 1];
        let size = std::fs::metadata(path).unwrap().len() as f64 / 1e6;
        let start = Instant::now();
        let snap =
            gpuplan_providers::aws::parse_offer_file(File::open(path).unwrap(), Vec::new(), None)
                .unwrap();
        let secs = start.elapsed().as_secs_f64();
        println!(
            "parse: {size:.0} MB in {secs:.2} s = {:.0} MB/s; peak RSS {:.1} MB; {} prices, {} instance types, {} rows skipped",
            size / secs,
            peak_rss_mb(),
            snap.prices.len(),
            snap.instance_types.len(),
            snap.skipped.values().sum::<u64>()
        );
        return;
    }
    let target_mb = args
        .iter()
        .skip(1)
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(320);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.json");
    let start = Instant::now();
    let n = generate(&path, target_mb);
    println!(
        "generated {n} SKUs, {:.0} MB, in {:.1} s",
        std::fs::metadata(&path).unwrap().len() as f64 / 1e6,
        start.elapsed().as_secs_f64()
    );
    for _ in 0..3 {
        let out = Command::new(std::env::current_exe().unwrap())
            .arg("--parse")
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
}
