//! Tables for people: every human-readable listing the CLI prints. The
//! commands decide what to show; this module only lays it out.

use super::*;
use crate::catalog::age;

pub(super) fn synced_sources(fresh: &Freshness) -> String {
    if fresh.last_good.is_empty() {
        return "none yet (run `gpuplan sync`)".to_owned();
    }
    fresh
        .last_good
        .iter()
        .map(|(s, at)| format!("{s} {} ago", age(fresh.now, *at)))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(super) fn prices_table(records: &[CatalogRecord], now: DateTime<Utc>) -> String {
    // Every record is converted to one currency, or none is.
    let unit = records
        .first()
        .and_then(|r| r.converted.as_ref())
        .map_or("USD", |c| c.currency.as_str());
    let (per_hour, per_gpu_hour) = (format!("{unit}/H"), format!("{unit}/GPU-H"));
    let header = [
        "PROVIDER",
        "REGION",
        "ZONE",
        "INSTANCE",
        "GPU",
        "N",
        "KIND",
        per_hour.as_str(),
        per_gpu_hour.as_str(),
        "AGE",
    ];
    // Capacity Blocks are bought as windows: when any is listed, each row says
    // its window, its hours and how many instances it holds.
    let windows = records.iter().any(|r| r.window_start.is_some());
    let mut header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    if windows {
        header.splice(
            7..7,
            ["WINDOW (UTC)", "HOURS", "INSTANCES"].map(str::to_owned),
        );
    }
    let rows: Vec<Vec<String>> = records
        .iter()
        .map(|r| {
            let data_time = r.observed_at.or(r.fetched_at);
            let mut age = data_time.map_or_else(|| "-".to_owned(), |t| age(now, t));
            if r.stale {
                age.push_str(" stale");
            }
            let kind = match &r.offering_class {
                Some(class) => format!("{} ({class})", r.price_kind),
                None => r.price_kind.clone(),
            };
            let mut row = vec![
                r.provider.clone(),
                r.region.clone(),
                r.zone.clone().unwrap_or_else(|| "-".to_owned()),
                if r.price_scope == PriceScope::GpuOnly.as_str() {
                    format!("{} *", r.instance_type)
                } else {
                    r.instance_type.clone()
                },
                match &r.gpu_form_factor {
                    Some(f) => format!("{} {f}", r.gpu_model),
                    None => r.gpu_model.clone(),
                },
                gpuplan_providers::gpu::count_label(r.gpu_count),
                kind,
                format!(
                    "{:.4}",
                    r.converted.as_ref().map_or(r.usd_per_hour, |c| c.per_hour)
                ),
                format!(
                    "{:.4}",
                    r.converted
                        .as_ref()
                        .map_or(r.usd_per_gpu_hour, |c| c.per_gpu_hour)
                ),
                age,
            ];
            if windows {
                let window = match (r.window_start, r.window_end) {
                    (Some(s), Some(e)) => window_label(s, e),
                    _ => "-".to_owned(),
                };
                let hours = r
                    .window_hours
                    .map_or_else(|| "-".to_owned(), |h| format!("{h:.2}"));
                let count = r
                    .instance_count
                    .map_or_else(|| "-".to_owned(), |n| n.to_string());
                row.splice(7..7, [window, hours, count]);
            }
            row
        })
        .collect();
    let mut right: Vec<usize> = if windows {
        vec![5, 8, 9, 10, 11]
    } else {
        vec![5, 7, 8]
    };
    // Per unit of work: the factor and the price per reference-GPU-hour,
    // `~` marking a datasheet estimate.
    let work = records.iter().find_map(|r| r.per_work.as_ref());
    let mut rows = rows;
    if let Some(work) = work {
        right.extend([header.len(), header.len() + 1]);
        header.extend(["FACTOR".to_owned(), format!("USD/{}-H", work.reference)]);
        for (row, r) in rows.iter_mut().zip(records) {
            let p = r.per_work.as_ref();
            let mark = if p.is_some_and(|p| p.estimate) {
                "~"
            } else {
                ""
            };
            row.push(
                p.and_then(|p| p.factor)
                    .map_or_else(|| "-".to_owned(), |f| format!("{mark}{f:.3}")),
            );
            row.push(
                p.and_then(|p| p.usd_per_reference_gpu_hour)
                    .map_or_else(|| "-".to_owned(), |v| format!("{mark}{v:.4}")),
            );
        }
    }
    let mut out = render_rows(&header, &rows, &right);
    if let Some(work) = work {
        let _ = writeln!(
            out,
            "Per work: {} against {}{}; FACTOR is this GPU's work per hour over the reference's, \"-\" where the workload has no figure for it (rows: --json).",
            work.workload,
            work.reference,
            if work.estimate {
                ", ~ estimated from datasheet figures"
            } else {
                ""
            }
        );
    }
    if records
        .iter()
        .any(|r| r.price_scope == PriceScope::GpuOnly.as_str())
    {
        out.push_str(
            "* GPU only: the accelerator without the machine it attaches to, which is billed separately; never planned.\n",
        );
    }
    out
}

/// A window's start and end, to the minute (UTC).
fn window_label(start: DateTime<Utc>, end: DateTime<Utc>) -> String {
    format!(
        "{} → {}",
        start.format("%Y-%m-%d %H:%M"),
        end.format("%Y-%m-%d %H:%M")
    )
}

/// Priced windows, soonest first: offered ones and those that vanished.
pub(super) fn windows_table(
    records: &[crate::catalog::WindowRecord],
    now: DateTime<Utc>,
) -> String {
    let header = [
        "STATUS",
        "WINDOW (UTC)",
        "HOURS",
        "INSTANCES",
        "PROVIDER",
        "ZONE",
        "INSTANCE",
        "GPU",
        "N",
        "UPFRONT USD",
        "USD/GPU-H",
        "FIRST SEEN",
        "VANISHED",
    ];
    let ago = |t: DateTime<Utc>| format!("{} ago", age(now, t));
    let rows: Vec<[String; 13]> = records
        .iter()
        .map(|w| {
            [
                w.status.to_owned(),
                window_label(w.window_start, w.window_end),
                format!("{:.2}", w.window_hours),
                w.instance_count.to_string(),
                w.provider.clone(),
                w.zone.clone().unwrap_or_else(|| w.region.clone()),
                w.instance_type.clone(),
                w.gpu_model.clone(),
                gpuplan_providers::gpu::count_label(w.gpu_count),
                format!("{:.2}", w.upfront_usd),
                format!("{:.4}", w.usd_per_gpu_hour),
                ago(w.first_seen),
                w.vanished_at.map_or_else(|| "-".to_owned(), ago),
            ]
        })
        .collect();
    render_table(&header, &rows, &[2, 3, 8, 9, 10])
}

/// Left-aligned columns, except the right-aligned (numeric) ones listed.
pub(super) fn render_table<const N: usize>(
    header: &[&str; N],
    rows: &[[String; N]],
    right: &[usize],
) -> String {
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    let rows: Vec<Vec<String>> = rows.iter().map(|r| r.to_vec()).collect();
    render_rows(&header, &rows, right)
}

/// A table for people: a header row, then `rows`, columns two spaces apart
/// with `right` ones aligned right. On a terminal the table fits its width:
/// the widest text columns are cut short with `…`, numbers and headers
/// never are, and every row stays one line so columns never shift. In a pipe lines are as
/// long as their cells.
pub(super) fn render_rows(header: &[String], rows: &[Vec<String>], right: &[usize]) -> String {
    let width = console::Term::stdout().size_checked().map(|(_, cols)| cols);
    layout(header, rows, right, width)
}

fn layout(header: &[String], rows: &[Vec<String>], right: &[usize], width: Option<u16>) -> String {
    use comfy_table::{CellAlignment, ColumnConstraint, ContentArrangement, Row, Table, Width};
    let line = |cells: &[String]| {
        let mut row = Row::from(cells);
        row.max_height(1);
        row
    };
    let mut table = Table::new();
    table
        .load_style(comfy_table::presets::NOTHING)
        .set_header(line(header))
        .add_rows(rows.iter().map(|r| line(r)));
    for (i, column) in table.column_iter_mut().enumerate() {
        column.set_padding((0, 2));
        if right.contains(&i) {
            column.set_cell_alignment(CellAlignment::Right);
            column.set_constraint(ColumnConstraint::ContentWidth);
        } else {
            // A cut header names nothing: text columns keep theirs whole.
            // (comfy-table's widths include the padding.)
            let title = header.get(i).map_or(0, |h| h.chars().count());
            let title = u16::try_from(title).unwrap_or(u16::MAX);
            let least = title.saturating_add(column.padding_width());
            column.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(least)));
        }
    }
    if let Some(width) = width {
        table
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_width(width)
            .set_truncation_indicator("…");
    }
    let mut out = table.trim_fmt();
    out.push('\n');
    out
}

pub(super) fn spot_table(h: &SpotHistory) -> String {
    let header = [
        "PROVIDER", "REGION", "ZONE", "OBS", "MIN", "P50", "P95", "MAX",
    ];
    let stat_cells = |s: &catalog::SpotStats| {
        [
            s.observations.to_string(),
            format!("{:.4}", s.min),
            format!("{:.4}", s.p50),
            format!("{:.4}", s.p95),
            format!("{:.4}", s.max),
        ]
    };
    let mut rows: Vec<[String; 8]> = Vec::new();
    for s in &h.series {
        let [o, a, b, c, d] = stat_cells(&s.stats);
        rows.push([
            s.provider.clone(),
            s.region.clone(),
            s.zone.clone(),
            o,
            a,
            b,
            c,
            d,
        ]);
    }
    if let (Some(all), true) = (&h.stats, h.series.len() > 1) {
        let [o, a, b, c, d] = stat_cells(all);
        rows.push(["all".into(), "".into(), "".into(), o, a, b, c, d]);
    }
    format!(
        "{} spot USD/hour since {} (time-weighted)\n{}",
        h.instance_type,
        h.since.format("%Y-%m-%d %H:%M UTC"),
        render_table(&header, &rows, &[3, 4, 5, 6, 7])
    )
}

/// The plan for people: purchases, the hourly blend, costs and savings.
pub(super) fn plan_report(r: &PlanResult) -> String {
    let mut out = String::new();
    let name = r.name.as_deref().unwrap_or("plan");
    let _ = writeln!(
        out,
        "{name}: {} ({} mode, {} hours)",
        r.status, r.mode, r.horizon_hours
    );
    if let Some(inf) = &r.infeasibility {
        let _ = writeln!(out, "infeasible: {inf}");
        return out;
    }
    if r.reserved.is_empty() {
        let _ = writeln!(out, "\nNo reserved purchases.");
    } else {
        let header = [
            "OFFER",
            "OPTION",
            "COUNT",
            "GPUS",
            "USD/H EFFECTIVE",
            "BREAK-EVEN UTIL",
            "COMMITMENT USD",
        ];
        let rows: Vec<[String; 7]> = r
            .reserved
            .iter()
            .map(|e| {
                [
                    e.offer.clone(),
                    e.option.clone(),
                    format!("{}", e.count),
                    format!("{}", e.gpus),
                    format!("{:.4}", e.effective_hourly_price),
                    e.break_even_utilization
                        .map_or_else(|| "-".to_owned(), |u| format!("{:.1}%", u * 100.0)),
                    format!("{:.2}", e.commitment_liability),
                ]
            })
            .collect();
        let _ = write!(
            out,
            "\nReserved purchases\n{}",
            render_table(&header, &rows, &[2, 3, 4, 5, 6])
        );
    }
    let blend = |kind: &str, series: &BTreeMap<String, Vec<f64>>| -> Vec<[String; 4]> {
        series
            .iter()
            .map(|(offer, values)| {
                let mut sorted = values.clone();
                sorted.sort_by(f64::total_cmp);
                let median = sorted[sorted.len() / 2];
                let peak = sorted.last().copied().unwrap_or(0.0);
                [
                    offer.clone(),
                    kind.to_owned(),
                    format!("{median:.2}"),
                    format!("{peak:.2}"),
                ]
            })
            .collect()
    };
    let mut rows = blend("spot", &r.hourly.spot_instances);
    rows.extend(blend("on_demand", &r.hourly.on_demand_instances));
    if !rows.is_empty() {
        let _ = write!(
            out,
            "\nHourly instances\n{}",
            render_table(&["OFFER", "KIND", "MEDIAN", "PEAK"], &rows, &[2, 3])
        );
    }
    if let Some(v3) = &r.v3 {
        out.push_str(&frontier_report(v3));
    }
    let expected = r.v3.as_ref().and_then(|v| v.expected_cost);
    if let (Some(total), Some(c)) = (expected.or(r.objective), &r.cost_breakdown) {
        let _ = writeln!(
            out,
            "\n{} over the horizon: {total:.2} USD (reserved {:.2}, spot {:.2}, on-demand {:.2})",
            if expected.is_some() {
                "Expected cost"
            } else {
                "Cost"
            },
            c.reserved,
            c.spot,
            c.on_demand
        );
    }
    if let (Some(gap), Some(bound)) = (r.gap, r.best_bound) {
        let _ = writeln!(
            out,
            "NOT PROVEN OPTIMAL: the time limit stopped the search; this is the best plan found, \
             at most {:.3}% above the optimum (best bound {bound:.2} USD).",
            gap * 100.0
        );
    }
    if let Some(v2) = &r.v2 {
        if !v2.owned.is_empty() {
            let _ = writeln!(
                out,
                "Owned reservations: sunk cost {:.2} USD, used {}; with them the horizon costs {}.",
                v2.sunk_cost,
                v2.owned_utilization
                    .map_or_else(|| "-".to_owned(), |u| format!("{:.1}%", u * 100.0)),
                v2.total_cost
                    .map_or_else(|| "-".to_owned(), |t| format!("{t:.2} USD"))
            );
        }
        for c in &v2.classes {
            let s = &c.served_units;
            let _ = writeln!(
                out,
                "Class {}: {:.2} units of work; served reserved {:.2}, spot {:.2}, on-demand {:.2}.",
                c.id, c.demand_units, s.reserved, s.spot, s.on_demand
            );
        }
    }
    match (r.baseline_on_demand_cost, r.savings, r.savings_pct) {
        (Some(b), Some(s), Some(p)) => {
            let _ = writeln!(
                out,
                "All on-demand would cost {b:.2} USD: this plan saves {s:.2} USD ({p:.1}%)."
            );
        }
        (None, _, _) if r.status == "time_limit" => {
            let _ = writeln!(out, "No on-demand baseline within the time limit.");
        }
        (None, _, _) => {
            let _ = writeln!(out, "On-demand alone cannot cover this demand.");
        }
        _ => {}
    }
    out
}

/// The risk frontier (docs/planning-model.md §11.6) as a table, and what it says.
fn frontier_report(v3: &crate::optimizer::V3Result) -> String {
    let mut out = String::new();
    let beta = v3.risk.beta;
    let cvar = format!("CVAR {:.0}%", beta * 100.0);
    let header = [
        "λ",
        "RESERVED PURCHASES",
        "MEAN USD",
        "P95 USD",
        cvar.as_str(),
        "",
    ];
    let rows: Vec<[String; 6]> = v3
        .frontier
        .iter()
        .map(|p| {
            let bought = if p.reserved.is_empty() {
                "none".to_owned()
            } else {
                p.reserved
                    .iter()
                    .map(|h| format!("{} x {} ({})", h.count, h.offer, h.option))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            [
                format!("{}", p.lambda),
                bought,
                format!("{:.2}", p.expected_cost),
                format!("{:.2}", p.p95_cost),
                format!("{:.2}", p.cvar_cost),
                if p.primary { "<- this plan" } else { "" }.to_owned(),
            ]
        })
        .collect();
    let _ = write!(
        out,
        "\nRisk frontier over {} scenarios (measure {}, the tail is the worst {:.0}%)\n{}",
        v3.scenarios.len(),
        v3.risk.measure,
        (1.0 - beta) * 100.0,
        render_table(&header, &rows, &[2, 3, 4])
    );
    match v3.frontier_flat {
        Some(true) => {
            let _ = writeln!(
                out,
                "Flat frontier: risk does not change the purchase (no risk-averse plan lowers P95 or CVaR by more than {:.0}%); the risk-neutral plan is the recommendation.",
                v3.risk.flat_tolerance * 100.0
            );
        }
        Some(false) => {
            let _ = writeln!(
                out,
                "Not flat: a higher λ pays more on average for a thinner tail (up to {:.1}% off P95 or CVaR); how much to pay is your call.",
                v3.frontier_tail_gain.unwrap_or(0.0) * 100.0
            );
        }
        None => {}
    }
    out
}

/// The configured rules, with how many of their keys are fired and when one
/// last fired.
pub(super) fn rules_table(
    rules: &[crate::alerts::rules::Rule],
    states: &[crate::store::AlertState],
) -> String {
    let rows: Vec<[String; 5]> = rules
        .iter()
        .map(|r| {
            let keys: Vec<_> = states.iter().filter(|s| s.rule == r.name).collect();
            let fired = keys.iter().filter(|s| s.fired).count();
            let last = keys.iter().filter_map(|s| s.last_fired_at).max();
            [
                r.name.clone(),
                r.kind.as_str().to_owned(),
                r.channels.join(","),
                format!("{fired}/{}", keys.len()),
                last.map_or_else(
                    || "-".to_owned(),
                    |t| t.format("%Y-%m-%d %H:%M UTC").to_string(),
                ),
            ]
        })
        .collect();
    render_table(
        &["RULE", "KIND", "CHANNELS", "FIRED/KEYS", "LAST FIRED"],
        &rows,
        &[3],
    )
}

/// Alert messages, newest first, with their delivery state.
pub(super) fn history_table(messages: &[crate::store::OutboxMessage]) -> String {
    let rows: Vec<[String; 6]> = messages
        .iter()
        .map(|m| {
            [
                m.created_at.format("%Y-%m-%d %H:%M:%S").to_string(),
                m.rule.clone(),
                m.channel.clone(),
                m.delivered_at.map_or_else(
                    || "pending".to_owned(),
                    |t| format!("delivered {}", t.format("%H:%M:%S")),
                ),
                m.attempts.to_string(),
                m.payload["message"].as_str().unwrap_or("").to_owned(),
            ]
        })
        .collect();
    render_table(
        &["QUEUED", "RULE", "CHANNEL", "STATUS", "TRIES", "MESSAGE"],
        &rows,
        &[4],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_short_and_readable() {
        let now = Utc::now();
        assert_eq!(age(now, now - chrono::Duration::seconds(30)), "30s");
        assert_eq!(age(now, now - chrono::Duration::minutes(30)), "30m");
        assert_eq!(age(now, now - chrono::Duration::hours(5)), "5h");
        assert_eq!(age(now, now - chrono::Duration::days(3)), "3d");
    }

    fn cells(rows: &[&[&str]]) -> Vec<Vec<String>> {
        rows.iter()
            .map(|r| r.iter().map(|c| (*c).to_owned()).collect())
            .collect()
    }

    #[test]
    fn a_table_in_a_pipe_keeps_whole_cells_two_spaces_apart() {
        let header = cells(&[&["NAME", "N", "USD/H"]]).remove(0);
        let rows = cells(&[
            &["p4d.24xlarge", "8", "32.7726"],
            &["g5.xlarge", "1", "1.0060"],
            &["x", "", ""],
        ]);
        assert_eq!(
            layout(&header, &rows, &[1, 2], None),
            "NAME          N    USD/H\n\
             p4d.24xlarge  8  32.7726\n\
             g5.xlarge     1   1.0060\n\
             x\n"
        );
    }

    #[test]
    fn a_table_on_a_narrow_terminal_cuts_text_never_numbers_and_keeps_one_line_a_row() {
        let header = cells(&[&["PROVIDER", "INSTANCE", "GPU", "USD/H"]]).remove(0);
        let rows = cells(&[
            &[
                "aws",
                "Standard_ND96amsr_A100_v4_extra_long_name",
                "A100-80GB",
                "32.7726",
            ],
            &["azure", "g5.xlarge", "A10G-24GB", "1.0060"],
        ]);
        let text = layout(&header, &rows, &[3], Some(40));
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert!(lines.iter().all(|l| l.chars().count() <= 40), "{text}");
        assert!(lines[1].contains('…'), "{text}");
        assert_eq!(
            lines[0].split_whitespace().collect::<Vec<_>>(),
            ["PROVIDER", "INSTANCE", "GPU", "USD/H"],
            "{text}"
        );
        // The price column ends every line, whole and right-aligned.
        assert!(
            lines[1].ends_with("32.7726") && lines[2].ends_with(" 1.0060"),
            "{text}"
        );
        // Columns start where the header's do.
        let at = |l: &str, what: &str| l[..l.find(what).unwrap()].chars().count();
        assert_eq!(at(lines[0], "GPU"), at(lines[1], "A100"), "{text}");
        assert_eq!(at(lines[0], "GPU"), at(lines[2], "A10G"), "{text}");
    }
}
