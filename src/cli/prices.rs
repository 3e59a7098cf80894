//! `gpuplan prices`: current prices, cheapest per GPU-hour first.

use super::*;

/// Which offers: the GPU, provider and region filters of the listings.
#[derive(Debug, Args)]
pub struct OfferArgs {
    /// GPU model or family, e.g. `H100-80GB` or `H100` (repeatable).
    #[arg(long = "gpu")]
    pub(super) gpus: Vec<String>,
    /// Provider, e.g. `aws` or `file:onprem`; `file` matches every sheet (repeatable).
    #[arg(long = "provider")]
    pub(super) providers: Vec<String>,
    /// Region (repeatable); also matches global offers available there.
    #[arg(long = "region")]
    pub(super) regions: Vec<String>,
}

#[derive(Debug, Args)]
pub struct PricesArgs {
    #[command(flatten)]
    offers: OfferArgs,
    /// Price kind, e.g. `on_demand`, `spot`, `reserved_1y_no_upfront` (repeatable).
    #[arg(long = "kind", value_parser = parse_kind)]
    kinds: Vec<PriceKind>,
    /// What the price buys: `instance`, or `gpu_only` for GPUs without the
    /// machine they attach to (repeatable; default both).
    #[arg(long = "scope", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<PriceScope>()))]
    scopes: Vec<PriceScope>,
    /// GPU form factor: `sxm`, `pcie` or `nvl` (repeatable; default any).
    #[arg(long = "form-factor", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<gpuplan_providers::FormFactor>()))]
    form_factors: Vec<gpuplan_providers::FormFactor>,
    /// Only offers in this country (ISO code, e.g. `DE`; repeatable), by the
    /// region's country in `gpuplan regions`.
    #[arg(long = "country")]
    countries: Vec<String>,
    /// Only prices at or below this many USD per GPU-hour.
    #[arg(long, value_parser = parse_price)]
    max_usd_per_gpu_hour: Option<f64>,
    /// Also show each price per hour of a reference GPU's work on this
    /// workload (`gpuplan perf` lists them), or by a datasheet ratio
    /// (`spec:bf16`, an estimate); sorted by it.
    #[arg(long)]
    per_work: Option<String>,
    /// The reference GPU of `--per-work`, `MODEL[/FORM]`.
    #[arg(long, default_value = crate::facts::DEFAULT_REFERENCE, requires = "per_work")]
    reference: String,
    /// Also show each price in this currency (`CNY`), at its `[fx]` rate.
    #[arg(long)]
    currency: Option<String>,
    #[command(flatten)]
    format: Format,
}

fn parse_kind(s: &str) -> Result<PriceKind, String> {
    s.parse()
        .map_err(|e: gpuplan_providers::snapshot::UnknownName| e.to_string())
}

pub(super) fn parse_price(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("`{s}` is not a price in USD (a number >= 0)")),
    }
}

pub(super) fn run_prices(config: &Config, args: PricesArgs) -> Result<ExitCode, CliError> {
    let currency = args
        .currency
        .as_deref()
        .map(|code| {
            config.fx.currency(code).ok_or_else(|| {
                CliError::BadInput(anyhow::anyhow!(
                    "--currency {code}: no rate for it; configured: {} (add `[fx] {} = <units per US dollar>` to the config)",
                    config.fx.known(),
                    code.to_ascii_uppercase()
                ))
            })
        })
        .transpose()?;
    let facts = crate::facts::builtin().map_err(|e| CliError::Failed(anyhow::anyhow!("{e}")))?;
    let work = args
        .per_work
        .as_deref()
        .map(|w| {
            facts
                .work(w, &args.reference)
                .map_err(|e| CliError::BadInput(anyhow::anyhow!("--per-work, --reference: {e}")))
        })
        .transpose()?;
    let pool = open_store(config)?;
    let fresh = pool.read(|s| freshness(config, s))?;
    let filter = PriceFilter {
        gpus: args.offers.gpus,
        providers: args.offers.providers,
        regions: args.offers.regions,
        kinds: args.kinds,
        scopes: args.scopes,
        form_factors: args.form_factors,
        max_usd_per_gpu_hour: args.max_usd_per_gpu_hour,
        countries: args.countries,
    };
    let mut records = pool
        .read(|s| catalog::prices(s, &fresh, &filter))
        .map_err(|e| CliError::Failed(e.into()))?;
    if let Some(currency) = &currency {
        catalog::convert(&mut records, currency);
    }
    if let Some(work) = &work {
        catalog::per_work(&mut records, work);
    }
    if args.format.print(&records)? {
        return Ok(ExitCode::SUCCESS);
    }
    if records.is_empty() {
        eprintln!(
            "No prices match. Sources synced: {}.",
            synced_sources(&fresh)
        );
    } else {
        print!("{}", prices_table(&records, fresh.now));
    }
    Ok(ExitCode::SUCCESS)
}
