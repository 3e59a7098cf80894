//! Prometheus metrics, kept in memory and rendered as the text exposition format:
//! per source the sync duration, rows, failures and data age; per route the HTTP
//! request counts and latency; and figures read at scrape time (the cheapest
//! price per GPU model, stale sources, budgets, commitment use).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

use crate::catalog::sync::SyncOutcome;

/// Latency buckets in seconds: the API answers in milliseconds.
const BUCKETS: [f64; 10] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0];

#[derive(Debug, Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    sources: BTreeMap<String, SourceMetrics>,
    requests: BTreeMap<(String, String, u16), u64>,
    latency: BTreeMap<String, Histogram>,
    alert_evaluations: u64,
}

#[derive(Debug, Default)]
struct SourceMetrics {
    ok: u64,
    failed: u64,
    last_duration: f64,
    prices: i64,
    spot_added: i64,
    availability: i64,
}

#[derive(Debug, Default)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Figures read from the catalog and the bills at scrape time. Every label
/// set is bounded: GPU models by the normalization table, price groups by
/// three, sources, budgets and bill sources by the config, commitment types
/// by what the bills name.
#[derive(Debug, Default)]
pub struct Figures {
    /// (canonical GPU model, price group, cheapest USD per GPU-hour).
    pub cheapest: Vec<(String, &'static str, f64)>,
    /// Each source and whether its data is stale.
    pub stale: Vec<(String, bool)>,
    pub budgets: Vec<BudgetFigure>,
    pub commitments: Vec<crate::bills::health::CommitmentHealth>,
}

#[derive(Debug)]
pub struct BudgetFigure {
    pub name: String,
    pub currency: String,
    pub amount: f64,
    /// `None` until a day of the budget's bills is complete.
    pub actual: Option<f64>,
    pub forecast: Option<f64>,
}

/// A label value as the exposition format quotes it.
fn label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Figures {
    /// The exposition text of the figures.
    #[must_use]
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut family = |name: &str, help: &str, rows: Vec<(String, f64)>| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (labels, v) in rows {
                let _ = writeln!(out, "{name}{{{labels}}} {v}");
            }
        };
        family(
            "gpuplan_cheapest_usd_per_gpu_hour",
            "The cheapest instance price per GPU-hour now, by GPU model and kind (committed = any reserved, commit, savings-plan or prepaid kind).",
            self.cheapest
                .iter()
                .map(|(m, k, v)| (format!("gpu_model=\"{}\",kind=\"{k}\"", label(m)), *v))
                .collect(),
        );
        family(
            "gpuplan_source_stale",
            "1 when the source's data is older than its schedule allows, else 0.",
            self.stale
                .iter()
                .map(|(s, stale)| {
                    (
                        format!("source=\"{}\"", label(s)),
                        f64::from(u8::from(*stale)),
                    )
                })
                .collect(),
        );
        let budget = |f: &dyn Fn(&BudgetFigure) -> Option<f64>| -> Vec<(String, f64)> {
            self.budgets
                .iter()
                .filter_map(|b| {
                    f(b).map(|v| {
                        (
                            format!(
                                "budget=\"{}\",currency=\"{}\"",
                                label(&b.name),
                                label(&b.currency)
                            ),
                            v,
                        )
                    })
                })
                .collect()
        };
        family(
            "gpuplan_budget_amount",
            "A budget's amount for its period.",
            budget(&|b| Some(b.amount)),
        );
        family(
            "gpuplan_budget_actual",
            "A budget's spend this period up to the last complete day of its bills.",
            budget(&|b| b.actual),
        );
        family(
            "gpuplan_budget_forecast",
            "A budget's spend forecast to the end of its period.",
            budget(&|b| b.forecast),
        );
        let commitments = |f: &dyn Fn(&crate::bills::health::CommitmentHealth) -> f64| {
            self.commitments
                .iter()
                .map(|c| {
                    (
                        format!(
                            "source=\"{}\",type=\"{}\"",
                            label(&c.source),
                            label(&c.kind)
                        ),
                        f(c),
                    )
                })
                .collect()
        };
        family(
            "gpuplan_commitment_lowest_utilization_ratio",
            "The lowest utilization (0 to 1) of any commitment of the source and type over the last 7 complete days of the bills.",
            commitments(&|c| c.lowest_utilization),
        );
        family(
            "gpuplan_commitments",
            "Commitments of the source and type with a utilization over the last 7 complete days.",
            commitments(&|c| c.count as f64),
        );
        out
    }
}

impl Metrics {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn record_sync(&self, outcome: &SyncOutcome) {
        let mut inner = self.lock();
        let m = inner.sources.entry(outcome.provider.clone()).or_default();
        m.last_duration = outcome.seconds;
        match &outcome.result {
            Ok(stats) => {
                m.ok += 1;
                m.prices = stats.prices_seen;
                m.spot_added = stats.spot_added;
                m.availability = stats.availability;
            }
            Err(_) => m.failed += 1,
        }
    }

    /// One evaluation of the alert rules finished (fired or not).
    pub fn record_alert_evaluation(&self) {
        self.lock().alert_evaluations += 1;
    }

    pub fn record_request(&self, method: &str, route: &str, status: u16, seconds: f64) {
        let mut inner = self.lock();
        *inner
            .requests
            .entry((method.to_owned(), route.to_owned(), status))
            .or_insert(0) += 1;
        let h = inner.latency.entry(route.to_owned()).or_default();
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// The solver pool's gauges, read at scrape time: solves running and
    /// solves refused so far.
    #[must_use]
    pub fn render_solves(running: usize, refused: u64) -> String {
        format!(
            "# HELP gpuplan_solves_running Plans being solved for API requests.\n# TYPE gpuplan_solves_running gauge\ngpuplan_solves_running {running}\n\
             # HELP gpuplan_solves_refused_total Plan requests refused because every solver slot was busy.\n# TYPE gpuplan_solves_refused_total counter\ngpuplan_solves_refused_total {refused}\n"
        )
    }

    /// The exposition text. `last_good` gives each source's last good sync, for
    /// the data-age gauge, which is computed at scrape time.
    #[must_use]
    pub fn render(
        &self,
        last_good: &BTreeMap<String, DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> String {
        let inner = self.lock();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# HELP gpuplan_sync_runs_total Sync runs by source and result.\n# TYPE gpuplan_sync_runs_total counter"
        );
        for (source, m) in &inner.sources {
            let _ = writeln!(
                out,
                "gpuplan_sync_runs_total{{source=\"{source}\",result=\"ok\"}} {}",
                m.ok
            );
            let _ = writeln!(
                out,
                "gpuplan_sync_runs_total{{source=\"{source}\",result=\"failed\"}} {}",
                m.failed
            );
        }
        let _ = writeln!(
            out,
            "# HELP gpuplan_alert_evaluations_total Evaluations of the alert rules, one after each sync.\n# TYPE gpuplan_alert_evaluations_total counter\ngpuplan_alert_evaluations_total {}",
            inner.alert_evaluations
        );
        let gauge = |out: &mut String, name: &str, help: &str, values: Vec<(String, f64)>| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (source, v) in values {
                let _ = writeln!(out, "{name}{{source=\"{source}\"}} {v}");
            }
        };
        let per_source = |f: &dyn Fn(&SourceMetrics) -> f64| -> Vec<(String, f64)> {
            inner
                .sources
                .iter()
                .map(|(s, m)| (s.clone(), f(m)))
                .collect()
        };
        gauge(
            &mut out,
            "gpuplan_sync_duration_seconds",
            "Duration of the last sync run.",
            per_source(&|m| m.last_duration),
        );
        gauge(
            &mut out,
            "gpuplan_sync_prices",
            "Prices in the last good snapshot.",
            per_source(&|m| m.prices as f64),
        );
        gauge(
            &mut out,
            "gpuplan_sync_spot_added",
            "Spot observations the last good sync added.",
            per_source(&|m| m.spot_added as f64),
        );
        gauge(
            &mut out,
            "gpuplan_sync_availability",
            "Availability records in the last good snapshot.",
            per_source(&|m| m.availability as f64),
        );
        let ages = last_good
            .iter()
            .map(|(s, t)| (s.clone(), (now - *t).as_seconds_f64().max(0.0)))
            .collect();
        gauge(
            &mut out,
            "gpuplan_data_age_seconds",
            "Seconds since the source's last good sync.",
            ages,
        );

        let _ = writeln!(
            out,
            "# HELP gpuplan_http_requests_total HTTP requests by method, route and status.\n# TYPE gpuplan_http_requests_total counter"
        );
        for ((method, route, status), n) in &inner.requests {
            let _ = writeln!(
                out,
                "gpuplan_http_requests_total{{method=\"{method}\",route=\"{route}\",status=\"{status}\"}} {n}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP gpuplan_http_request_duration_seconds HTTP request latency by route.\n# TYPE gpuplan_http_request_duration_seconds histogram"
        );
        for (route, h) in &inner.latency {
            let name = "gpuplan_http_request_duration_seconds";
            for (bound, count) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(
                    out,
                    "{name}_bucket{{route=\"{route}\",le=\"{bound}\"}} {count}"
                );
            }
            let _ = writeln!(
                out,
                "{name}_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(out, "{name}_sum{{route=\"{route}\"}} {}", h.sum);
            let _ = writeln!(out, "{name}_count{{route=\"{route}\"}} {}", h.count);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::WriteStats;

    #[test]
    fn the_exposition_carries_sync_and_http_figures() {
        let m = Metrics::default();
        m.record_sync(&SyncOutcome {
            provider: "azure".into(),
            run_id: Some(1),
            result: Ok(WriteStats {
                prices_seen: 7,
                ..WriteStats::default()
            }),
            seconds: 1.5,
        });
        m.record_request("GET", "/v1/prices", 200, 0.003);
        let now = Utc::now();
        let text = m.render(
            &BTreeMap::from([("azure".to_owned(), now - chrono::Duration::seconds(90))]),
            now,
        );
        assert!(
            text.contains("gpuplan_sync_runs_total{source=\"azure\",result=\"ok\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("gpuplan_sync_prices{source=\"azure\"} 7"),
            "{text}"
        );
        assert!(
            text.contains("gpuplan_data_age_seconds{source=\"azure\"} 90"),
            "{text}"
        );
        assert!(text.contains(
            "gpuplan_http_requests_total{method=\"GET\",route=\"/v1/prices\",status=\"200\"} 1"
        ));
        assert!(text.contains(
            "gpuplan_http_request_duration_seconds_bucket{route=\"/v1/prices\",le=\"0.005\"} 1"
        ));
        assert!(text.contains(
            "gpuplan_http_request_duration_seconds_bucket{route=\"/v1/prices\",le=\"0.0025\"} 0"
        ));
    }

    #[test]
    fn figures_quote_their_labels_and_leave_out_what_is_unknown() {
        let figures = Figures {
            cheapest: vec![("H100-80GB".into(), "spot", 1.5)],
            stale: vec![("aws".into(), true), ("azure".into(), false)],
            budgets: vec![BudgetFigure {
                name: "ml \"q4\"\\x".into(),
                currency: "USD".into(),
                amount: 100.0,
                actual: None,
                forecast: Some(120.0),
            }],
            commitments: Vec::new(),
        };
        let text = figures.render();
        assert!(text.contains(
            "gpuplan_cheapest_usd_per_gpu_hour{gpu_model=\"H100-80GB\",kind=\"spot\"} 1.5"
        ));
        assert!(text.contains(
            "gpuplan_source_stale{source=\"aws\"} 1\ngpuplan_source_stale{source=\"azure\"} 0"
        ));
        assert!(
            text.contains(
                "gpuplan_budget_amount{budget=\"ml \\\"q4\\\"\\\\x\",currency=\"USD\"} 100"
            ),
            "{text}"
        );
        assert!(!text.contains("gpuplan_budget_actual{"));
        assert!(text.contains("# TYPE gpuplan_commitments gauge"));
    }
}
