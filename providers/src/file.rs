//! The `file` provider: a local price sheet (CSV or JSON) in the catalog's own field
//! names, for negotiated rates, on-prem GPUs with a capacity cap, and offline use.
//!
//! A sheet is all or nothing: every bad cell is reported (file, line, field) and no
//! record of a sheet with any bad row reaches the store.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::SheetRowError;
use crate::gpu;
use crate::snapshot::{InstanceType, OfferingClass, PriceKind, PriceRecord, Snapshot};
use crate::{FetchContext, Provider, ProviderError, RegionScope};

/// Columns a sheet may have; the first six are required.
pub const COLUMNS: &[&str] = &[
    "region",
    "instance_type",
    "gpu_model",
    "gpu_count",
    "price_kind",
    "usd_per_hour",
    "zone",
    "gpu_memory_gib",
    "vcpus",
    "memory_gib",
    "offering_class",
    "upfront_usd",
    "source",
    "available_regions",
    "max_instances",
    "price_scope",
    "gpu_form_factor",
    "mig_profile",
];
const REQUIRED: usize = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SheetFormat {
    Csv,
    Json,
}

impl SheetFormat {
    /// The format a file name implies, if its extension says.
    #[must_use]
    pub fn from_path(path: &Path) -> Option<Self> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "csv" => Some(Self::Csv),
            "json" => Some(Self::Json),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct FileProvider {
    id: String,
    path: PathBuf,
    format: SheetFormat,
}

impl FileProvider {
    /// `name` is the config key; records carry `file:<name>` as their provider.
    #[must_use]
    pub fn new(name: &str, path: PathBuf, format: SheetFormat) -> Self {
        Self {
            id: format!("file:{name}"),
            path,
            format,
        }
    }
}

#[async_trait]
impl Provider for FileProvider {
    fn id(&self) -> &str {
        &self.id
    }

    fn region_scope(&self) -> RegionScope {
        RegionScope::NotChecked
    }

    async fn fetch(&self, _ctx: &FetchContext) -> Result<Snapshot, ProviderError> {
        let shown = self.path.display().to_string();
        let text = tokio::fs::read_to_string(&self.path)
            .await
            .map_err(|e| ProviderError::Io {
                provider: self.id.clone(),
                path: shown.clone(),
                detail: e.to_string(),
            })?;
        parse_sheet(&self.id, &shown, &text, self.format)
    }
}

/// Parses a whole sheet. `file` is only used to name the sheet in errors.
///
/// # Errors
/// `Sheet` with every bad cell found, or `Decode` when the file is not CSV/JSON at all.
pub fn parse_sheet(
    provider: &str,
    file: &str,
    text: &str,
    format: SheetFormat,
) -> Result<Snapshot, ProviderError> {
    let mut errors = Vec::new();
    let rows = match format {
        SheetFormat::Csv => csv_rows(file, text, &mut errors),
        SheetFormat::Json => json_rows(file, text, &mut errors),
    }
    .map_err(|detail| ProviderError::Decode {
        provider: provider.to_owned(),
        location: file.to_owned(),
        detail,
    })?;
    let snapshot = build_snapshot(file, &rows, &mut errors);
    if errors.is_empty() {
        Ok(snapshot)
    } else {
        Err(ProviderError::Sheet {
            provider: provider.to_owned(),
            errors,
        })
    }
}

/// One row as text cells by column name, with the line it starts on.
struct RawRow {
    line: u64,
    cells: HashMap<String, String>,
}

fn cell_error(file: &str, line: u64, field: &str, message: impl Into<String>) -> SheetRowError {
    SheetRowError {
        file: file.to_owned(),
        line,
        field: field.to_owned(),
        message: message.into(),
    }
}

fn csv_rows(
    file: &str,
    text: &str,
    errors: &mut Vec<SheetRowError>,
) -> Result<Vec<RawRow>, String> {
    let mut reader = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let headers = reader.headers().map_err(|e| e.to_string())?.clone();
    let header_line = text
        .lines()
        .position(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map_or(1, |i| i as u64 + 1);
    for h in &headers {
        if !COLUMNS.contains(&h) {
            errors.push(cell_error(
                file,
                header_line,
                h,
                format!("unknown column; known columns: {}", COLUMNS.join(", ")),
            ));
        }
    }
    for required in &COLUMNS[..REQUIRED] {
        if !headers.iter().any(|h| h == *required) {
            errors.push(cell_error(
                file,
                header_line,
                required,
                "required column is missing",
            ));
        }
    }
    let mut rows = Vec::new();
    for record in reader.records() {
        let record = match record {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(0, csv::Position::line);
                errors.push(cell_error(file, line, "*", e.to_string()));
                continue;
            }
        };
        let line = record.position().map_or(0, csv::Position::line);
        let cells = headers
            .iter()
            .zip(record.iter())
            .filter(|(_, v)| !v.is_empty())
            .map(|(h, v)| (h.to_owned(), v.to_owned()))
            .collect();
        rows.push(RawRow { line, cells });
    }
    Ok(rows)
}

fn json_rows(
    file: &str,
    text: &str,
    errors: &mut Vec<SheetRowError>,
) -> Result<Vec<RawRow>, String> {
    let items: Vec<&RawValue> = serde_json::from_str(text)
        .map_err(|e| format!("{e} (a JSON sheet is an array of record objects)"))?;
    let mut rows = Vec::new();
    for item in items {
        // Where the element starts in the file, so errors point at its line.
        let offset = (item.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
        let line = 1 + text.as_bytes()[..offset.min(text.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count() as u64;
        let object: Map<String, Value> = match serde_json::from_str(item.get()) {
            Ok(o) => o,
            Err(_) => {
                errors.push(cell_error(
                    file,
                    line,
                    "*",
                    "each record must be a JSON object",
                ));
                continue;
            }
        };
        let mut cells = HashMap::new();
        for (key, value) in object {
            if !COLUMNS.contains(&key.as_str()) {
                errors.push(cell_error(
                    file,
                    line,
                    &key,
                    format!("unknown field; known fields: {}", COLUMNS.join(", ")),
                ));
                continue;
            }
            let text = match value {
                Value::Null => continue,
                Value::String(s) => s.trim().to_owned(),
                Value::Number(n) => n.to_string(),
                Value::Array(items) if key == "available_regions" => {
                    let names: Option<Vec<String>> = items
                        .into_iter()
                        .map(|v| v.as_str().map(str::to_owned))
                        .collect();
                    match names {
                        Some(names) => names.join(";"),
                        None => {
                            errors.push(cell_error(
                                file,
                                line,
                                &key,
                                "must be a list of region names",
                            ));
                            continue;
                        }
                    }
                }
                other => {
                    errors.push(cell_error(
                        file,
                        line,
                        &key,
                        format!("expected a string or number, found {other}"),
                    ));
                    continue;
                }
            };
            if !text.is_empty() {
                cells.insert(key, text);
            }
        }
        rows.push(RawRow { line, cells });
    }
    Ok(rows)
}

/// Reads typed cells of one row, recording every problem instead of stopping.
struct Cells<'a> {
    file: &'a str,
    row: &'a RawRow,
    errors: &'a mut Vec<SheetRowError>,
}

impl Cells<'_> {
    fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.errors
            .push(cell_error(self.file, self.row.line, field, message));
    }

    fn text(&self, field: &str) -> Option<&str> {
        self.row.cells.get(field).map(String::as_str)
    }

    fn required(&mut self, field: &str) -> Option<String> {
        let value = self.text(field).map(str::to_owned);
        if value.is_none() {
            self.fail(field, "required value is empty");
        }
        value
    }

    fn parsed<T: std::str::FromStr>(&mut self, field: &str, what: &str) -> Option<T>
    where
        T::Err: std::fmt::Display,
    {
        let raw = self.text(field)?.to_owned();
        match raw.parse::<T>() {
            Ok(v) => Some(v),
            Err(e) => {
                self.fail(field, format!("`{raw}` is not {what}: {e}"));
                None
            }
        }
    }

    fn number(&mut self, field: &str, min: f64, min_inclusive: bool) -> Option<f64> {
        let v: f64 = self.parsed(field, "a number")?;
        let ok = v.is_finite() && if min_inclusive { v >= min } else { v > min };
        if ok {
            Some(v)
        } else {
            let bound = if min_inclusive { ">=" } else { ">" };
            self.fail(
                field,
                format!("`{v}` must be a finite number {bound} {min}"),
            );
            None
        }
    }

    fn count(&mut self, field: &str, min: u32) -> Option<u32> {
        let v: u32 = self.parsed(field, "a whole number")?;
        if v < min {
            self.fail(field, format!("`{v}` must be at least {min}"));
            return None;
        }
        Some(v)
    }
}

/// The memory a MIG profile names (`1g.10gb` -> 10, `3g.40gb` -> 40), or
/// `None` when `profile` is not one (`<compute slices>g.<memory>gb`).
fn mig_memory(profile: &str) -> Option<f64> {
    let (compute, memory) = profile.trim().split_once('.')?;
    let slices: u32 = compute.strip_suffix('g')?.parse().ok()?;
    let gib: f64 = memory.strip_suffix("gb")?.parse().ok()?;
    ((1..=8).contains(&slices) && gib.is_finite() && gib > 0.0).then_some(gib)
}

/// Identity of a price within a sheet: a second row with the same key is a mistake.
type PriceKey = (
    String,
    Option<String>,
    String,
    PriceKind,
    Option<OfferingClass>,
);

fn build_snapshot(file: &str, rows: &[RawRow], errors: &mut Vec<SheetRowError>) -> Snapshot {
    let mut snapshot = Snapshot::default();
    let mut types: BTreeMap<String, (u64, InstanceType)> = BTreeMap::new();
    let mut seen: HashMap<PriceKey, u64> = HashMap::new();
    for row in rows {
        let mut c = Cells { file, row, errors };
        let Some((instance, price)) = parse_row(&mut c) else {
            continue;
        };
        if let Some((first_line, known)) = types.get(&instance.instance_type) {
            if *known != instance {
                c.fail(
                    "instance_type",
                    format!(
                        "`{}` is described differently on line {first_line} (GPU model, counts and memory must match on every row)",
                        instance.instance_type
                    ),
                );
                continue;
            }
        } else {
            types.insert(instance.instance_type.clone(), (row.line, instance));
        }
        let key = (
            price.region.clone(),
            price.zone.clone(),
            price.instance_type.clone(),
            price.price_kind,
            price.offering_class,
        );
        if let Some(first_line) = seen.get(&key) {
            c.fail("price_kind", format!("duplicate of line {first_line} (same region, zone, instance_type, price_kind and offering_class)"));
            continue;
        }
        seen.insert(key, row.line);
        snapshot.prices.push(price);
    }
    snapshot.instance_types = types.into_values().map(|(_, t)| t).collect();
    snapshot
}

fn parse_row(c: &mut Cells<'_>) -> Option<(InstanceType, PriceRecord)> {
    let region = c.required("region");
    let instance_type = c.required("instance_type");
    let gpu_name = c.required("gpu_model");
    let gpu_count = c.required("gpu_count").and_then(|text| {
        gpu::parse_count(&text)
            .map_err(|e| {
                c.fail(
                    "gpu_count",
                    format!("{e} (GPUs per instance, or a share of one like 1/7)"),
                )
            })
            .ok()
    });
    let kind_text = c.required("price_kind");
    let kind = kind_text
        .as_ref()
        .and_then(|_| c.parsed::<PriceKind>("price_kind", "a price kind"));
    let usd = c
        .required("usd_per_hour")
        .and_then(|_| c.number("usd_per_hour", 0.0, false));
    let gpu_memory = c.number("gpu_memory_gib", 0.0, false);
    let vcpus = c.count("vcpus", 1);
    let memory_gib = c.number("memory_gib", 0.0, false);
    let offering_class = c.parsed::<OfferingClass>("offering_class", "an offering class");
    let upfront = c.number("upfront_usd", 0.0, true);
    let max_instances = c.count("max_instances", 0);
    let zone = c.text("zone").map(str::to_owned);
    let source = c.text("source").map(str::to_owned);
    let price_scope = c
        .parsed::<crate::PriceScope>("price_scope", "a price scope")
        .unwrap_or_default();
    let form_factor = c.parsed::<crate::FormFactor>("gpu_form_factor", "a GPU form factor");
    let mig = c
        .text("mig_profile")
        .map(str::to_owned)
        .and_then(|p| match mig_memory(&p) {
            Some(gib) => Some((p, gib)),
            None => {
                c.fail(
                    "mig_profile",
                    format!("`{p}` is not a MIG profile like 1g.10gb"),
                );
                None
            }
        });
    if mig.is_some() && gpu_count.is_some_and(|n| n >= 1.0) {
        c.fail(
            "mig_profile",
            "a MIG profile names a slice: gpu_count must be below 1 (1/7 for 1g.10gb of an H100)",
        );
    }
    let available_regions: Vec<String> = c
        .text("available_regions")
        .map(|s| {
            s.split(';')
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();

    if let Some(kind) = kind {
        if offering_class.is_some() && !matches!(kind, PriceKind::AwsReserved(..)) {
            c.fail("offering_class", format!("only reserved_<term>_<payment>_upfront prices have an offering class, not {kind}"));
        }
        if upfront.is_some_and(|u| u > 0.0) && kind.term().is_none() {
            c.fail(
                "upfront_usd",
                format!("{kind} prices have no upfront payment"),
            );
        }
    }
    let (region, instance_type, gpu_name, gpu_count, kind, usd) =
        (region?, instance_type?, gpu_name?, gpu_count?, kind?, usd?);
    let upfront = upfront.unwrap_or(0.0);
    let recurring = match kind.term_hours() {
        Some(hours) => usd - upfront / hours,
        None => usd,
    };
    if recurring < -1e-9 {
        c.fail(
            "upfront_usd",
            format!("{upfront} spread over the term is more than the effective usd_per_hour {usd}"),
        );
        return None;
    }
    // A slice's memory is its own (the column, or the MIG profile's figure);
    // the whole card's decides between model sizes.
    let slice_memory = (gpu_count < 1.0)
        .then(|| gpu_memory.or(mig.as_ref().map(|(_, gib)| *gib)))
        .flatten();
    let card_hint = match slice_memory {
        Some(m) => Some(m / gpu_count),
        None => gpu_memory,
    };
    let model = gpu::normalize(&gpu_name, card_hint);
    if !model.known {
        tracing::warn!(file = c.file, line = c.row.line, gpu_model = %model.name, "GPU model is not in the normalization table; keeping it as written.");
    }
    let instance = InstanceType {
        gpu_form_factor: form_factor.or_else(|| gpu::form_factor(&model.name, &gpu_name)),
        instance_type: instance_type.clone(),
        gpu_model: model.name,
        gpu_count,
        gpu_memory_gib: slice_memory.or_else(|| gpu::share_memory(model.memory_gib, gpu_count)),
        vcpus,
        memory_gib,
        mig_profile: mig.map(|(p, _)| p),
    };
    let price = PriceRecord {
        region,
        zone,
        instance_type,
        price_kind: kind,
        offering_class,
        usd_per_hour: usd,
        upfront_usd: upfront,
        recurring_usd_per_hour: recurring.max(0.0),
        source,
        available_regions,
        max_instances,
        price_scope,
        window: None,
    };
    Some((instance, price))
}

/// `[providers.file.<name>]` as written. `enabled` and `schedule` are the
/// daemon's, and so is resolving `path` against the config file's directory.
#[derive(Debug, Default, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Section {
    pub enabled: Option<bool>,
    pub schedule: Option<String>,
    pub path: String,
    format: Option<String>,
}

impl Section {
    /// The sheet's format (given, or told by the path's extension), with each
    /// problem noted in `p`; `None` when it cannot be had.
    pub fn format(&self, p: &mut crate::config::Problems) -> Option<SheetFormat> {
        if self.path.trim().is_empty() {
            p.fail("path", "must not be empty");
        }
        match self.format.as_deref() {
            Some("csv") => Some(SheetFormat::Csv),
            Some("json") => Some(SheetFormat::Json),
            Some(other) => {
                p.fail(
                    "format",
                    format!("`{other}` is not a sheet format; expected \"csv\" or \"json\""),
                );
                None
            }
            None => {
                let guessed = SheetFormat::from_path(Path::new(&self.path));
                if guessed.is_none() && !self.path.trim().is_empty() {
                    p.fail(
                        "format",
                        format!("cannot tell the format of `{}` from its extension; set format = \"csv\" or \"json\"", self.path),
                    );
                }
                guessed
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Price sheets: a snapshot, or errors naming file, line and field.
        #[test]
        fn any_sheet_row_is_stored_or_named_by_file_line_and_field(
            cells in proptest::collection::vec("\\PC{0,10}", 6),
            text in "\\PC{0,120}",
        ) {
            let csv = format!(
                "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\n{}\n",
                cells.iter().map(|c| c.replace([',', '"', '\n', '\r'], "")).collect::<Vec<_>>().join(",")
            );
            for (t, format) in [(csv, SheetFormat::Csv), (text.clone(), SheetFormat::Csv), (text.clone(), SheetFormat::Json)] {
                match parse_sheet("file:x", "x.csv", &t, format) {
                    Ok(_) => {}
                    Err(ProviderError::Sheet { errors, .. }) => {
                        for e in errors {
                            proptest::prop_assert!(e.file == "x.csv" && e.line >= 1, "{e}");
                        }
                    }
                    Err(e) => proptest::prop_assert!(e.to_string().contains("x.csv"), "{e}"),
                }
            }
        }
    }

    const CSV: &str = "\
# negotiated and on-prem rates
region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,gpu_memory_gib,max_instances,upfront_usd
onprem-fra,dgx-h100,H100,8,on_demand,18.40,80,4,
onprem-fra,dgx-h100,H100,8,reserved_1y,16.00,80,4,8760
us-east-1,p4d.24xlarge,NVIDIA A100-SXM4-40GB,8,on_demand,19.22,,,
";

    fn sheet_errors(text: &str, format: SheetFormat) -> Vec<SheetRowError> {
        match parse_sheet("file:t", "t.sheet", text, format) {
            Err(ProviderError::Sheet { errors, .. }) => errors,
            other => panic!("expected sheet errors, got {other:?}"),
        }
    }

    #[test]
    fn a_csv_sheet_becomes_normalized_records() {
        let snap = parse_sheet("file:t", "t.csv", CSV, SheetFormat::Csv).unwrap();
        assert_eq!(snap.prices.len(), 3);
        assert_eq!(snap.instance_types.len(), 2);
        let dgx = &snap.instance_types[0];
        assert_eq!((dgx.gpu_model.as_str(), dgx.gpu_count), ("H100-80GB", 8.0));
        let p4d = &snap.instance_types[1];
        assert_eq!(p4d.gpu_model, "A100-40GB");
        let reserved = &snap.prices[1];
        assert_eq!(reserved.max_instances, Some(4));
        assert!((reserved.recurring_usd_per_hour - 15.0).abs() < 1e-9);
        assert!((reserved.upfront_usd - 8760.0).abs() < 1e-9);
    }

    #[test]
    fn a_json_sheet_reads_like_the_csv_one() {
        let json = r#"[
  {"region": "onprem-fra", "instance_type": "dgx-h100", "gpu_model": "H100", "gpu_count": 8,
   "price_kind": "on_demand", "usd_per_hour": 18.4, "gpu_memory_gib": 80, "max_instances": 4},
  {"region": "global", "instance_type": "gpu_1x_a10", "gpu_model": "A10", "gpu_count": 1,
   "price_kind": "on_demand", "usd_per_hour": 0.75, "available_regions": ["us-east-1", "us-west-1"],
   "zone": null}
]"#;
        let snap = parse_sheet("file:t", "t.json", json, SheetFormat::Json).unwrap();
        assert_eq!(snap.prices.len(), 2);
        assert_eq!(
            snap.prices[1].available_regions,
            vec!["us-east-1", "us-west-1"]
        );
        assert_eq!(snap.prices[0].max_instances, Some(4));
    }

    #[test]
    fn slices_and_mig_profiles_of_owned_gpus_are_records() {
        let text = "\
region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,mig_profile,gpu_memory_gib
onprem-fra,h100-1g.10gb,H100,1/7,on_demand,0.45,1g.10gb,
onprem-fra,h100-3g.40gb,H100,3/7,on_demand,1.30,3g.40gb,
onprem-fra,l4-half,L4,0.5,on_demand,0.40,,
onprem-fra,a100-quarter,A100,0.25,on_demand,0.60,,20
";
        let snap = parse_sheet("file:t", "t.csv", text, SheetFormat::Csv).unwrap();
        let t = |name: &str| {
            snap.instance_types
                .iter()
                .find(|t| t.instance_type == name)
                .unwrap()
        };
        let one = t("h100-1g.10gb");
        assert_eq!(
            (
                one.gpu_model.as_str(),
                one.gpu_count,
                one.gpu_memory_gib,
                one.mig_profile.as_deref()
            ),
            ("H100-80GB", 1.0 / 7.0, Some(10.0), Some("1g.10gb"))
        );
        assert_eq!(
            (
                t("h100-3g.40gb").gpu_count,
                t("h100-3g.40gb").gpu_memory_gib
            ),
            (3.0 / 7.0, Some(40.0))
        );
        // Without a profile, a slice has its share of the card's memory...
        assert_eq!(
            (t("l4-half").gpu_count, t("l4-half").gpu_memory_gib),
            (0.5, Some(12.0))
        );
        // ...or the memory the sheet gives it, which is the slice's: 20 GiB
        // as a quarter is the 80 GB A100.
        let quarter = t("a100-quarter");
        assert_eq!(
            (quarter.gpu_model.as_str(), quarter.gpu_memory_gib),
            ("A100-80GB", Some(20.0))
        );

        let bad = "\
region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,mig_profile
r,t1,H100,1/0,on_demand,1,
r,t2,H100,0,on_demand,1,
r,t3,H100,1/7,on_demand,1,big
r,t4,H100,1,on_demand,1,1g.10gb
";
        let errors = sheet_errors(bad, SheetFormat::Csv);
        let found: Vec<(u64, &str)> = errors.iter().map(|e| (e.line, e.field.as_str())).collect();
        assert_eq!(
            found,
            vec![
                (2, "gpu_count"),
                (3, "gpu_count"),
                (4, "mig_profile"),
                (5, "mig_profile")
            ]
        );
        assert!(
            errors[0].to_string().contains("divides by zero"),
            "{}",
            errors[0]
        );
        assert!(errors[3].to_string().contains("below 1"), "{}", errors[3]);
    }

    #[test]
    fn every_bad_cell_is_named_by_file_line_and_field() {
        let text = "\
region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour
r1,t1,L4,1,on_demand,0.8
r1,t2,L4,zero,on_demand,0.8
r1,t3,L4,1,weekly,0.8
r1,t4,L4,1,on_demand,-1
,t5,L4,1,on_demand,1
r1,t6,L4,1,spot,0
";
        let errors = sheet_errors(text, SheetFormat::Csv);
        let found: Vec<(u64, &str)> = errors.iter().map(|e| (e.line, e.field.as_str())).collect();
        assert_eq!(
            found,
            vec![
                (3, "gpu_count"),
                (4, "price_kind"),
                (5, "usd_per_hour"),
                (6, "region"),
                (7, "usd_per_hour")
            ]
        );
        // No price is stored at 0: a free row is a mistake in the sheet.
        assert!(
            errors[4]
                .to_string()
                .contains("must be a finite number > 0")
        );
        assert!(
            errors[0]
                .to_string()
                .starts_with("t.sheet:3: field `gpu_count`")
        );
    }

    #[test]
    fn the_template_for_clouds_without_a_price_api_takes_rows_as_they_are() {
        let template = include_str!("../../config/examples/price-sheet-template.csv");
        let filled = format!(
            "{template}region-1,example-8xh100,H100,8,80,128,2048,on_demand,10.0,,,example.com/pricing 2026-12-01\n"
        );
        let snap = parse_sheet("file:neocloud", "neocloud.csv", &filled, SheetFormat::Csv).unwrap();
        assert_eq!(snap.prices.len(), 1);
        assert_eq!(
            snap.prices[0].source.as_deref(),
            Some("example.com/pricing 2026-12-01")
        );
        assert_eq!(snap.prices[0].usd_per_hour, 10.0);
    }

    #[test]
    fn unknown_and_missing_columns_are_errors_on_the_header_line() {
        let errors = sheet_errors(
            "region,instance_type,gpu_model,gpu_count,usd_per_hour,colour\n",
            SheetFormat::Csv,
        );
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, vec!["colour", "price_kind"]);
        assert!(errors.iter().all(|e| e.line == 1));
    }

    #[test]
    fn a_short_csv_row_is_an_error_with_its_line() {
        let errors = sheet_errors(
            "region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour\nr,t,L4,1\n",
            SheetFormat::Csv,
        );
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].line, 2);
    }

    #[test]
    fn json_errors_point_at_the_line_where_the_record_starts() {
        let json = "[\n  {\"region\": \"r\", \"instance_type\": \"t\", \"gpu_model\": \"L4\", \"gpu_count\": 1, \"price_kind\": \"spot\", \"usd_per_hour\": 1},\n\n  {\"region\": \"r\", \"instance_type\": \"t\", \"gpu_model\": \"L4\", \"gpu_count\": 1,\n   \"price_kind\": \"on_demand\", \"usd_per_hour\": \"cheap\", \"colour\": \"red\"},\n  7\n]";
        let errors = sheet_errors(json, SheetFormat::Json);
        let found: Vec<(u64, &str)> = errors.iter().map(|e| (e.line, e.field.as_str())).collect();
        assert_eq!(found, vec![(4, "colour"), (6, "*"), (4, "usd_per_hour")]);
    }

    #[test]
    fn malformed_json_is_a_decode_error_naming_the_file() {
        let err =
            parse_sheet("file:t", "prices.json", "[{\"region\": ", SheetFormat::Json).unwrap_err();
        assert!(matches!(err, ProviderError::Decode { .. }));
        assert!(err.to_string().contains("prices.json"), "{err}");
    }

    #[test]
    fn rows_that_contradict_each_other_are_rejected() {
        let text = "\
region,instance_type,gpu_model,gpu_count,price_kind,usd_per_hour,offering_class,upfront_usd
r,t,L4,1,on_demand,1,,
r,t,L4,2,spot,1,,
r,t,L4,1,on_demand,2,,
r,t,L4,1,spot,1,standard,
r,t,L4,1,commit_1y,0.1,,8760
";
        let found: Vec<(u64, String)> = sheet_errors(text, SheetFormat::Csv)
            .into_iter()
            .map(|e| (e.line, e.field))
            .collect();
        let expected: Vec<(u64, String)> = [
            (3, "instance_type"),
            (4, "price_kind"),
            (5, "offering_class"),
            (6, "upfront_usd"),
        ]
        .into_iter()
        .map(|(l, f)| (l, f.to_owned()))
        .collect();
        assert_eq!(found, expected);
    }
}
