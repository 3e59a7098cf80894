//! `facts/regions.csv`: each cloud region's country and grid carbon.

use serde::{Deserialize, Serialize};

use super::FactsError;

const FILE: &str = "regions.csv";
const PROVIDERS: [&str; 6] = ["aws", "azure", "gcp", "oci", "alibaba", "tencent"];

/// One region of one cloud, with the region code its adapter uses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    pub provider: String,
    pub region: String,
    /// ISO 3166-1 alpha-2 of the data centres; null only for a pseudo-region
    /// such as a global price list.
    pub country: Option<String>,
    /// Location-based grid carbon intensity, gCO2e/kWh.
    pub grid_gco2e_per_kwh: Option<f64>,
    pub carbon_source: Option<String>,
    pub carbon_year: Option<i32>,
    /// Power usage effectiveness, >= 1.
    pub pue: Option<f64>,
    pub pue_source: Option<String>,
}

fn check(r: &Region) -> Result<(), String> {
    if !PROVIDERS.contains(&r.provider.as_str()) {
        return Err(format!(
            "provider `{}` is not one of {PROVIDERS:?}",
            r.provider
        ));
    }
    if r.region.trim().is_empty() {
        return Err("region is empty".into());
    }
    if let Some(c) = &r.country
        && !(c.len() == 2 && c.chars().all(|ch| ch.is_ascii_uppercase()))
    {
        return Err(format!(
            "country `{c}` is not an ISO 3166-1 alpha-2 code (upper case)"
        ));
    }
    match (r.grid_gco2e_per_kwh, &r.carbon_source, r.carbon_year) {
        (None, None, None) => {}
        (Some(g), Some(source), Some(_))
            if g.is_finite() && g > 0.0 && source.starts_with("https://") => {}
        (Some(g), _, _) if !(g.is_finite() && g > 0.0) => {
            return Err(format!(
                "grid_gco2e_per_kwh {g}: a grid figure is > 0, an unknown one is left empty"
            ));
        }
        _ => {
            return Err(
                "a grid figure goes with its carbon_source (an https URL) and carbon_year, and neither without it"
                    .into(),
            );
        }
    }
    match (r.pue, &r.pue_source) {
        (None, None) => {}
        (Some(p), Some(source)) if p.is_finite() && p >= 1.0 && source.starts_with("https://") => {}
        (Some(p), Some(_)) if !(p.is_finite() && p >= 1.0) => {
            return Err(format!("pue {p} is not >= 1"));
        }
        _ => {
            return Err(
                "a pue goes with its pue_source (an https URL), and neither without it".into(),
            );
        }
    }
    Ok(())
}

pub(super) fn parse(text: &str) -> Result<Vec<Region>, FactsError> {
    let mut out: Vec<Region> = Vec::new();
    for (i, row) in csv::Reader::from_reader(text.as_bytes())
        .deserialize::<Region>()
        .enumerate()
    {
        let line = i + 2;
        let row = row.map_err(|e| FactsError::new(FILE, format!("line {line}: {e}")))?;
        check(&row).map_err(|e| FactsError::new(FILE, format!("line {line}: {e}")))?;
        if out
            .iter()
            .any(|o| o.provider == row.provider && o.region == row.region)
        {
            return Err(FactsError::new(
                FILE,
                format!(
                    "line {line}: {} {} is listed twice",
                    row.provider, row.region
                ),
            ));
        }
        out.push(row);
    }
    Ok(out)
}
