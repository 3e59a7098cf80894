use super::*;

const PERF_HEADER: &str = "gpu_model,gpu_form_factor,workload,value,unit,per,n_gpus,precision,round,result_id,derived,source_url,retrieved,submitter,system,division,availability\n";
const REGIONS_HEADER: &str =
    "provider,region,country,grid_gco2e_per_kwh,carbon_source,carbon_year,pue,pue_source\n";

/// Two GPUs: an H100 SXM whose datasheet gives its tensor figures with
/// sparsity, and an L4.
const TWO_GPUS: &str = r#"
[[gpu]]
gpu_model = "H100-80GB"
gpu_form_factor = "sxm"
vendor = "NVIDIA"
architecture = "Hopper"
memory_gib = 80
memory_bandwidth_tbps = 3.35
tdp_watts = 700
mig_max_instances = 7
sparsity = true
interconnect = { kind = "nvlink", gbps = 900 }
datasheet = { fp64 = 34, fp32 = 67, bf16 = 1979, fp8 = 3958 }
datasheet_sparse = ["bf16", "fp8"]
tflops = { fp64 = 34, fp32 = 67, bf16 = 989.5, fp8 = 1979 }
sources = ["https://example.com/h100"]

[[gpu]]
gpu_model = "L4"
vendor = "NVIDIA"
architecture = "Ada Lovelace"
memory_gib = 24
tdp_watts = 72
mig_max_instances = 0
sparsity = true
interconnect = { kind = "pcie", gbps = 64 }
datasheet = { fp32 = 30.3, bf16 = 242 }
datasheet_sparse = ["bf16"]
tflops = { fp32 = 30.3, bf16 = 121 }
sources = ["https://example.com/l4"]
"#;

fn perf_rows(rows: &[&str]) -> String {
    format!("{PERF_HEADER}{}\n", rows.join("\n"))
}

fn facts(perf: &str, regions: &str) -> Facts {
    Facts::parse(TWO_GPUS, perf, regions).unwrap()
}

const W: &str = "mlperf-inference-v6.1/llama2-70b-99.9/offline";

#[test]
fn capabilities_follow_the_figures() {
    let f = facts(PERF_HEADER, REGIONS_HEADER);
    let h100 = f.gpu("H100-80GB", Some("sxm")).unwrap();
    assert_eq!(
        h100.capabilities,
        ["fp64", "fp8", "mig", "nvlink", "sparsity"]
    );
    let l4 = f.gpu("L4", None).unwrap();
    assert_eq!(l4.capabilities, ["sparsity"]);
    assert_eq!(
        (l4.tflops.fp64, l4.tflops.fp8),
        (None, None),
        "unknown is null"
    );
    // A model sold in several forms is found only by its form.
    assert!(f.gpu("H100-80GB", Some("pcie")).is_none());
    let json = serde_json::to_value(h100).unwrap();
    assert_eq!(json["tflops"]["fp4"], serde_json::Value::Null);
    assert_eq!(json["interconnect"]["gbps"], 900.0);
}

#[test]
fn each_broken_row_is_named_with_its_file_and_rule() {
    let gpus = |edit: &str| {
        gpus::parse(&TWO_GPUS.replacen("memory_gib = 24", edit, 1))
            .unwrap_err()
            .to_string()
    };
    assert!(
        gpus("memory_gib = 0").contains("gpus.toml: L4: memory_gib is 0"),
        "{}",
        gpus("memory_gib = 0")
    );
    assert!(gpus("memory_gib = 24\ngpu_form_factor = \"pcie\"").contains("sold in one form only"));
    let unknown = gpus::parse(&TWO_GPUS.replace("\"L4\"", "\"L5\"")).unwrap_err();
    assert!(
        unknown
            .to_string()
            .contains("`L5` is not a catalog GPU name")
    );
    let twice = format!(
        "{TWO_GPUS}{}",
        &TWO_GPUS[TWO_GPUS.rfind("[[gpu]]").unwrap()..]
    );
    assert!(
        gpus::parse(&twice)
            .unwrap_err()
            .to_string()
            .contains("L4 is listed twice")
    );

    let row = |r: &str| perf::parse(&perf_rows(&[r])).unwrap_err().to_string();
    let ok = format!(
        "B200,,{W},1000,tokens/s,gpu,8,fp4,v6.1,,true,https://example.com/s.csv,2026-12-05,,,,"
    );
    assert!(perf::parse(&perf_rows(&[&ok])).is_ok());
    assert!(row(&ok.replace(",1000,", ",0,")).contains("perf.csv: line 2: value 0 is not > 0"));
    assert!(row(&ok.replace(",true,", ",false,")).contains("a row without a result_id is derived"));
    assert!(row(&ok.replace("https://", "http://")).contains("is not an https URL"));

    let region = |r: &str| {
        regions::parse(&format!("{REGIONS_HEADER}{r}\n"))
            .unwrap_err()
            .to_string()
    };
    assert!(region("aws,us-east-1,us,,,,,").contains("regions.csv: line 2: country `us`"));
    assert!(
        region("aws,us-east-1,US,0,https://example.com/c,2024,,").contains("grid_gco2e_per_kwh 0")
    );
    assert!(region("aws,us-east-1,US,380,https://example.com/c,,,").contains("carbon_year"));
    assert!(region("aws,us-east-1,US,,,,0.9,https://example.com/p").contains("pue 0.9"));
    assert!(region("nimbus,r1,US,,,,,").contains("provider `nimbus`"));
}

#[test]
fn factors_divide_the_best_row_of_each_model_by_the_references_within_one_workload() {
    let src = "https://example.com/summary.csv";
    let perf = perf_rows(&[
        &format!(
            "H100-80GB,sxm,{W},3000,tokens/s,gpu,8,fp8,v6.1,,true,{src},2026-12-05,a,s1,closed,available"
        ),
        &format!(
            "H100-80GB,sxm,{W},3200,tokens/s,gpu,8,fp8,v6.1,,true,{src},2026-12-05,b,s2,closed,available"
        ),
        &format!(
            "L4,,{W},400,tokens/s,gpu,8,fp8,v6.1,,true,{src},2026-12-05,c,s3,closed,available"
        ),
        &format!(
            "L4,,other/bench/offline,800,tokens/s,gpu,1,fp8,v1,6.1-0001,false,{src},2026-12-05,c,s4,closed,available"
        ),
    ]);
    let f = facts(&perf, REGIONS_HEADER);
    let work = f.work(W, "H100-80GB/sxm").unwrap();
    let l4 = work.factor("L4", None).unwrap();
    // Against the better H100 row; never the other workload's L4 row.
    assert!((l4.factor - 400.0 / 3200.0).abs() < 1e-12);
    assert_eq!(l4.reference_row.unwrap().system.as_deref(), Some("s2"));
    assert!(!l4.estimate);
    assert!(work.factor("B200", None).is_none(), "no row, no factor");
    // An H100 of another form has no row of this workload.
    assert!(work.factor("H100-80GB", Some("pcie")).is_none());

    let spec = f.work("spec:bf16", "H100-80GB/sxm").unwrap();
    let l4 = spec.factor("L4", None).unwrap();
    assert!((l4.factor - 121.0 / 989.5).abs() < 1e-12 && l4.estimate && l4.row.is_none());
    assert!(spec.factor("L4", Some("sxm")).is_none());

    let unknown = f.work("mlperf/none/offline", "H100-80GB").unwrap_err();
    assert!(
        unknown.contains(W) && unknown.contains("spec:<format>"),
        "{unknown}"
    );
    let no_reference = f.work(W, "B200").unwrap_err();
    assert!(
        no_reference.contains("measured: H100-80GB, L4"),
        "{no_reference}"
    );
    assert!(
        f.work("spec:fp4", "H100-80GB/sxm")
            .unwrap_err()
            .contains("no fp4 figure")
    );
    assert!(f.work("spec:fp12", "H100-80GB/sxm").is_err());
    assert!(f.work(W, "H100").is_err(), "a family is not a reference");
}

#[test]
fn regions_are_found_by_provider_and_code_and_filtered_by_country() {
    let regions = format!(
        "{REGIONS_HEADER}aws,eu-central-1,DE,344,https://example.com/ccf,2021,1.135,https://example.com/ccf\n\
         gcp,europe-west3,DE,276,https://example.com/gcp,2025,,\n\
         aws,us-east-1,US,,,,,\n"
    );
    let f = facts(PERF_HEADER, &regions);
    assert_eq!(
        f.region("gcp", "europe-west3").unwrap().grid_gco2e_per_kwh,
        Some(276.0)
    );
    assert!(f.region("gcp", "eu-central-1").is_none());
    let german: Vec<&str> = f
        .regions_of(&[], &["de".to_owned()])
        .iter()
        .map(|r| r.region.as_str())
        .collect();
    assert_eq!(german, ["eu-central-1", "europe-west3"]);
    assert_eq!(f.regions_of(&["aws".to_owned()], &[]).len(), 2);
    // A price sheet's region named as a cloud names it.
    assert_eq!(
        f.region("file:neocloud", "europe-west3")
            .unwrap()
            .country
            .as_deref(),
        Some("DE")
    );
    assert!(f.region("file:neocloud", "onprem-fra").is_none());
}

#[test]
fn a_sheet_region_whose_name_means_two_countries_has_none() {
    let regions = format!(
        "{REGIONS_HEADER}aws,north-1,SE,,,,,\n\
         oci,north-1,FI,,,,,\n\
         oci,south-1,ZA,,,,,\n\
         azure,south-1,ZA,,,,,\n"
    );
    let f = facts(PERF_HEADER, &regions);
    assert!(f.region("file:x", "north-1").is_none());
    assert_eq!(
        f.region("file:x", "south-1").unwrap().country.as_deref(),
        Some("ZA")
    );
    assert_eq!(
        f.region("oci", "north-1").unwrap().country.as_deref(),
        Some("FI")
    );
}

/// MLCommons' summary rows the llama2-70b per-GPU figures were divided
/// from, as published (a subset of the columns).
const MLPERF_V61_LLAMA2: &str =
    include_str!("../../facts/sources/mlperf-inference-v6.1-llama2-70b-99.9-offline.csv");

/// The catalog name of each accelerator MLCommons names.
const ACCELERATORS: &[(&str, &str)] = &[
    ("NVIDIA B300-SXM-270GB", "B300"),
    ("Nvidia B300-SXM-270GB", "B300"),
    ("NVIDIA B200-SXM-180GB", "B200"),
    ("NVIDIA GB200", "GB200"),
    ("NVIDIA GB300", "GB300"),
    ("AMD Instinct MI355X 288GB HBM3e", "MI355X"),
    ("AMD Instinct MI350X 288GB HBM3e", "MI350X"),
    ("AMD Instinct MI350P", "MI350P"),
    (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "RTX-PRO-6000",
    ),
    ("NVIDIA RTX PRO 6000 Blackwell", "RTX-PRO-6000"),
    ("NVIDIA RTX PRO 4500 Blackwell", "RTX-PRO-4500"),
    ("Intel(R) Arc(TM) Pro B70", "ARC-PRO-B70"),
];

#[test]
fn every_per_gpu_mlperf_figure_is_its_systems_result_over_its_accelerators() {
    let facts = builtin().unwrap();
    let rows: Vec<&PerfRow> = facts.perf.iter().filter(|r| r.workload == W).collect();
    let mut source = csv::Reader::from_reader(MLPERF_V61_LLAMA2.as_bytes());
    let header = source.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut matched = 0;
    for record in source.records() {
        let record = record.unwrap();
        let at = |name: &str| record[col(name)].to_owned();
        // What the contract selects: closed, available, this model and scenario.
        assert_eq!(
            (
                at("Division"),
                at("Availability"),
                at("Model"),
                at("Scenario")
            ),
            (
                "closed".into(),
                "available".into(),
                "llama2-70b-99.9".into(),
                "Offline".into()
            )
        );
        let result: f64 = at("Result").parse().unwrap();
        let accelerators: u32 = at("total_accelerators").parse().unwrap();
        let nodes: u32 = at("number_of_nodes").parse().unwrap();
        let per_node: u32 = at("accelerators_per_node").parse().unwrap();
        assert_eq!(nodes * per_node, accelerators, "{}", at("SystemName"));
        let model = ACCELERATORS
            .iter()
            .find(|(name, _)| *name == at("accelerator_model_name"))
            .unwrap_or_else(|| panic!("no catalog name for {}", at("accelerator_model_name")))
            .1;
        let row = rows
            .iter()
            .find(|r| {
                r.submitter.as_deref() == Some(at("Organization").as_str())
                    && r.system.as_deref() == Some(at("SystemName").as_str())
                    && r.n_gpus == accelerators
            })
            .unwrap_or_else(|| panic!("no row for {} {}", at("Organization"), at("SystemName")));
        assert_eq!(row.gpu_model, model);
        let per_gpu = result / f64::from(accelerators);
        assert!(
            (row.value - per_gpu).abs() <= 1e-6 * per_gpu,
            "{}: {} != {result} / {accelerators}",
            at("SystemName"),
            row.value
        );
        assert_eq!(
            row.precision.as_deref(),
            Some(at("weight_data_types").to_ascii_lowercase().as_str())
        );
        assert!(row.derived && row.per == "gpu" && row.unit == "tokens/s" && row.round == "v6.1");
        matched += 1;
    }
    assert_eq!(matched, rows.len(), "a row without its source row");
    for model in ["B200", "GB200", "B300", "MI355X", "RTX-PRO-6000"] {
        assert!(rows.iter().any(|r| r.gpu_model == model), "no {model} row");
    }
}

/// Google's region-carbon-info yearly file, as published.
const GCP_CARBON_2025: &str = include_str!("../../facts/sources/gcp-region-carbon-2025.csv");
/// Cloud Carbon Footprint's emissions factors per region, metric tons
/// CO2e per kWh, as its constants files write them, with their data year.
const CCF_FACTORS: &str = include_str!("../../facts/sources/ccf-emissions-factors.csv");

#[test]
fn every_grid_figure_is_its_sources_row() {
    let facts = builtin().unwrap();
    let mut gcp = csv::Reader::from_reader(GCP_CARBON_2025.as_bytes());
    let gcp: std::collections::BTreeMap<String, f64> = gcp
        .records()
        .map(|r| {
            let r = r.unwrap();
            (r[0].to_owned(), r[3].parse().unwrap())
        })
        .collect();
    let mut ccf = csv::Reader::from_reader(CCF_FACTORS.as_bytes());
    let ccf: Vec<csv::StringRecord> = ccf.records().map(Result::unwrap).collect();
    let mut checked = 0;
    for r in &facts.regions {
        let Some(grid) = r.grid_gco2e_per_kwh else {
            continue;
        };
        if r.provider == "gcp" {
            assert_eq!(gcp.get(&r.region), Some(&grid), "gcp {}", r.region);
            assert_eq!(r.carbon_year, Some(2025));
            assert!(
                r.carbon_source
                    .as_deref()
                    .unwrap()
                    .ends_with("data/yearly/2025.csv")
            );
        } else {
            let row = ccf
                .iter()
                .find(|c| c[0] == *r.provider && c[1] == *r.region)
                .unwrap_or_else(|| panic!("no source row for {} {}", r.provider, r.region));
            let tons: f64 = row[2].parse().unwrap();
            assert!(
                (tons * 1e6 - grid).abs() < 1e-6,
                "{} {}: {grid}",
                r.provider,
                r.region
            );
            assert_eq!(r.carbon_source.as_deref(), Some(&row[3]));
            assert_eq!(
                r.carbon_year,
                row[4].parse().ok(),
                "{} {}",
                r.provider,
                r.region
            );
        }
        checked += 1;
    }
    assert!(checked >= 90, "{checked} grid figures");
}

#[test]
fn the_regions_cover_every_cloud_with_a_country_each() {
    let facts = builtin().unwrap();
    for provider in ["aws", "azure", "gcp", "oci", "alibaba", "tencent"] {
        let n = facts.regions_of(&[provider.to_owned()], &[]).len();
        assert!(n >= 10, "{provider}: {n} regions");
    }
    assert!(facts.regions.iter().all(|r| r.country.is_some()));
    let at = |p: &str, r: &str| facts.region(p, r).and_then(|r| r.country.as_deref());
    assert_eq!(at("aws", "eu-central-1"), Some("DE"));
    assert_eq!(at("gcp", "europe-west3"), Some("DE"));
    assert_eq!(at("azure", "westeurope"), Some("NL"));
    assert_eq!(at("alibaba", "cn-hongkong"), Some("HK"));
    assert_eq!(at("oci", "us-ashburn-1"), Some("US"));
    assert_eq!(at("tencent", "ap-guangzhou"), Some("CN"));
}

#[test]
fn every_dense_figure_is_its_datasheet_figure_and_the_capabilities_agree() {
    let facts = builtin().unwrap();
    for g in &facts.gpus {
        let label = format!("{} {:?}", g.gpu_model, g.gpu_form_factor);
        for format in gpus::FORMATS {
            let Some(dense) = g.tflops.get(format) else {
                continue;
            };
            let printed = *g
                .datasheet
                .get(format)
                .unwrap_or_else(|| panic!("{label}: {format} has no datasheet figure"));
            let expected = if g.datasheet_sparse.iter().any(|s| s == format) {
                printed / 2.0
            } else {
                printed
            };
            assert!(
                (dense - expected).abs() < 1e-9,
                "{label}: {format} {dense} != {expected}"
            );
        }
        // The contract's rules, checked apart from the code that derives them.
        let has = |c: &str| g.capabilities.contains(&c);
        assert_eq!(has("fp8"), g.tflops.fp8.is_some(), "{label}");
        assert_eq!(has("fp4"), g.tflops.fp4.is_some(), "{label}");
        assert_eq!(has("mig"), g.mig_max_instances > 0, "{label}");
        assert_eq!(has("nvlink"), g.interconnect.kind == "nvlink", "{label}");
        assert_eq!(
            has("infinity_fabric"),
            g.interconnect.kind == "infinity_fabric",
            "{label}"
        );
        let hpc = matches!((g.tflops.fp64, g.tflops.fp32), (Some(d), Some(s)) if d >= s / 4.0);
        assert_eq!(has("fp64"), hpc, "{label}");
        assert!(!g.sources.is_empty(), "{label}");
        if g.vendor == "AMD" {
            assert_eq!(
                g.mig_max_instances, 0,
                "{label}: AMD partitions are not MIG"
            );
        }
    }
    // Null, never 0: no figure anywhere in the JSON is 0 but a MIG count.
    let json = serde_json::to_value(&facts.gpus).unwrap();
    for g in json.as_array().unwrap() {
        for (k, v) in g["tflops"].as_object().unwrap() {
            assert!(
                v.is_null() || v.as_f64().unwrap() > 0.0,
                "{}: {k}",
                g["gpu_model"]
            );
        }
    }
}

#[test]
fn the_gpu_table_has_the_rows_the_contract_asks_for() {
    let facts = builtin().unwrap();
    for (model, form) in [
        ("H100-80GB", Some("sxm")),
        ("H100-80GB", Some("pcie")),
        ("H100-94GB", Some("nvl")),
        ("H200-141GB", Some("sxm")),
        ("A100-80GB", Some("sxm")),
        ("A100-40GB", Some("sxm")),
        ("L40S", None),
        ("L4", None),
        ("A10", None),
        ("A10G", None),
        ("T4", None),
        ("B200", None),
        ("MI300X", None),
    ] {
        assert!(facts.gpu(model, form).is_some(), "{model} {form:?}");
    }
    // A few figures as NVIDIA's H100 datasheet prints them (SXM): 3.35 TB/s,
    // 1,979 TFLOPS BF16 with sparsity, 700 W, NVLink 900 GB/s.
    let h100 = facts.gpu("H100-80GB", Some("sxm")).unwrap();
    assert_eq!(
        (
            h100.memory_bandwidth_tbps,
            h100.tflops.bf16,
            h100.tdp_watts,
            h100.interconnect.gbps
        ),
        (Some(3.35), Some(989.5), Some(700.0), Some(900.0))
    );
    assert_eq!(
        facts.gpu("T4", None).unwrap().tflops.fp8,
        None,
        "Turing has no FP8"
    );
    assert_eq!(
        facts.gpu("A100-80GB", Some("sxm")).unwrap().tflops.fp8,
        None,
        "nor Ampere"
    );
}
