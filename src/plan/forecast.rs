//! A forecast of demand from past hourly usage (a demand CSV, see
//! [`crate::plan::inputs`]).
//!
//! The forecast is an hour-of-week seasonal profile on a linear trend:
//! `y(t) = a + b·t + s(t mod P)`, with `P` = 168 hours when the history has at
//! least two weeks, 24 with at least two days, else no season. The trend is
//! the least-squares line through the means of whole cycles (which carry no
//! season), the season the mean detrended value per slot; the forecast is
//! clipped at zero. The backtest
//! fits on all but the last week (or day) and reports the error of forecasting
//! it: mean absolute error in GPUs and WAPE (total absolute error / total usage).

use crate::plan::inputs::Demand;

/// A forecast and how well the same method predicted the recent past.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Forecast {
    pub gpus: Vec<f64>,
    pub method: String,
    /// Season length in hours (168, 24, or 1 for none).
    pub period: usize,
    /// Trend in GPUs per hour.
    pub trend_per_hour: f64,
    pub backtest: Option<Backtest>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Backtest {
    pub hours: usize,
    pub mae_gpus: f64,
    /// Total absolute error over total usage; `None` when usage was all zero.
    pub wape: Option<f64>,
}

/// The fitted model: intercept, slope and seasonal offsets.
struct Fit {
    a: f64,
    b: f64,
    season: Vec<f64>,
}

impl Fit {
    fn at(&self, t: usize, slot: usize) -> f64 {
        (self.a + self.b * t as f64 + self.season[slot % self.season.len()]).max(0.0)
    }
}

fn period_for(len: usize) -> usize {
    if len >= 2 * 168 {
        168
    } else if len >= 2 * 24 {
        24
    } else {
        1
    }
}

/// Fits `y` whose first point sits at seasonal slot `offset`. The trend comes
/// from the means of whole cycles, which carry no season, so trend and season
/// do not leak into each other; the season is the mean detrended value per
/// slot, centred on the level.
fn fit(y: &[f64], period: usize, offset: usize) -> Fit {
    let cycles = y.len() / period;
    let (centers, means): (Vec<f64>, Vec<f64>) = (0..cycles)
        .map(|c| {
            let chunk = &y[c * period..(c + 1) * period];
            (
                c as f64 * period as f64 + (period as f64 - 1.0) / 2.0,
                chunk.iter().sum::<f64>() / period as f64,
            )
        })
        .unzip();
    let n = centers.len() as f64;
    let (mean_x, mean_y) = (
        centers.iter().sum::<f64>() / n,
        means.iter().sum::<f64>() / n,
    );
    let den: f64 = centers.iter().map(|x| (x - mean_x).powi(2)).sum();
    let num: f64 = centers
        .iter()
        .zip(&means)
        .map(|(x, m)| (x - mean_x) * (m - mean_y))
        .sum();
    let b = if den > 0.0 { num / den } else { 0.0 };
    let a = mean_y - b * mean_x;
    let mut sums = vec![0.0; period];
    let mut counts = vec![0.0; period];
    for (t, v) in y.iter().enumerate() {
        let slot = (t + offset) % period;
        sums[slot] += v - (a + b * t as f64);
        counts[slot] += 1.0;
    }
    let mut season: Vec<f64> = sums
        .iter()
        .zip(&counts)
        .map(|(s, c)| if *c > 0.0 { s / c } else { 0.0 })
        .collect();
    let mean_s = season.iter().sum::<f64>() / period as f64;
    for s in &mut season {
        *s -= mean_s;
    }
    Fit {
        a: a + mean_s,
        b,
        season,
    }
}

/// The hour of the week (Monday 00:00 = 0) of `usage`'s first hour; 0 when
/// the history has no timestamps.
fn first_slot(usage: &Demand) -> usize {
    usage.start.map_or(0, |t| {
        use chrono::{Datelike, Timelike};
        t.weekday().num_days_from_monday() as usize * 24 + t.hour() as usize
    })
}

/// Folds of rolling-origin errors when a request does not say (§11.8.2).
pub const DEFAULT_FOLDS: usize = 4;

/// The point forecast and the out-of-sample errors of rolling origins
/// (docs/planning-model.md §11.8): every fit, the point forecast's included,
/// uses a window of the same `window` hours, so the backtest errors are
/// exchangeable with the error of the forecast used.
#[derive(Debug, Clone, PartialEq)]
pub struct Rolling {
    pub point: Vec<f64>,
    /// `errors[fold][lead]`: actual − forecast.
    pub errors: Vec<Vec<f64>>,
    pub window: usize,
}

impl Rolling {
    /// Leave-one-fold-out coverage of the conformal range at `level`: the
    /// share of each fold's hours inside the half-width the other folds
    /// give. `None` with one fold, or when the others allow no finite range.
    #[must_use]
    pub fn coverage(&self, level: f64) -> Option<f64> {
        if self.errors.len() < 2 {
            return None;
        }
        let (mut inside, mut total) = (0usize, 0usize);
        for (i, fold) in self.errors.iter().enumerate() {
            let mut others: Vec<f64> = self
                .errors
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != i)
                .flat_map(|(_, row)| row.iter().map(|e| e.abs()))
                .collect();
            others.sort_by(f64::total_cmp);
            let q = crate::optimizer::half_width(&others, level)?;
            inside += fold.iter().filter(|e| e.abs() <= q).count();
            total += fold.len();
        }
        Some(inside as f64 / total as f64)
    }
}

/// Rolling origins over `usage` for a horizon of `horizon` hours and `folds` folds.
///
/// # Errors
/// A message when the history leaves a fit window shorter than 24 hours.
pub fn rolling(usage: &Demand, horizon: usize, folds: usize) -> Result<Rolling, String> {
    let y = &usage.gpus;
    let len = y.len();
    let window = len
        .checked_sub(folds * horizon)
        .filter(|w| *w >= 24)
        .ok_or_else(|| {
            format!(
                "history too short for {folds} folds of {horizon} hours: it has {len} hours, and {} are needed (a fit window of at least 24 hours before the folds)",
                folds * horizon + 24
            )
        })?;
    let s0 = first_slot(usage);
    let forecaster = |from: usize| {
        let period = period_for(window);
        let offset = (s0 + from) % 168 % period;
        let model = fit(&y[from..from + window], period, offset);
        move |t: usize| model.at(t, t + offset)
    };
    let errors = (0..folds)
        .map(|i| {
            let origin = len - (folds - i) * horizon;
            let f = forecaster(origin - window);
            (0..horizon)
                .map(|h| y[origin + h] - f(window + h))
                .collect()
        })
        .collect();
    let f = forecaster(len - window);
    Ok(Rolling {
        point: (0..horizon).map(|t| f(window + t)).collect(),
        errors,
        window,
    })
}

/// Forecasts `horizon` hours after `usage`. `start` is the time of the first
/// usage hour, when known, so the week's slots follow the calendar.
///
/// # Errors
/// A message when the history is shorter than a day.
pub fn forecast(usage: &Demand, horizon: usize) -> Result<Forecast, String> {
    let y = &usage.gpus;
    if y.len() < 24 {
        return Err(format!(
            "usage history has {} hours; a forecast needs at least 24",
            y.len()
        ));
    }
    let period = period_for(y.len());
    // Slot of the first hour: hour of the week (Monday 00:00 = 0) or of the day.
    let offset = first_slot(usage) % period.max(1);
    let model = fit(y, period, offset);
    let gpus = (0..horizon)
        .map(|k| model.at(y.len() + k, y.len() + k + offset))
        .collect();

    let held_out = if period == 1 { 0 } else { period };
    let backtest = (held_out > 0 && y.len() >= held_out + period).then(|| {
        let train = &y[..y.len() - held_out];
        let model = fit(train, period, offset);
        let actual = &y[y.len() - held_out..];
        let abs: f64 = actual
            .iter()
            .enumerate()
            .map(|(k, v)| (model.at(train.len() + k, train.len() + k + offset) - v).abs())
            .sum();
        let total: f64 = actual.iter().sum();
        Backtest {
            hours: held_out,
            mae_gpus: abs / held_out as f64,
            wape: (total > 0.0).then(|| abs / total),
        }
    });
    Ok(Forecast {
        gpus,
        method: format!(
            "linear trend + {} seasonal profile",
            match period {
                168 => "hour-of-week",
                24 => "hour-of-day",
                _ => "no",
            }
        ),
        period,
        trend_per_hour: model.b,
        backtest,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_weekly_pattern_with_growth_is_forecast_closely() {
        // Weekdays 40 GPUs in working hours, else 10; growing 0.01 GPU per hour.
        let series = |from: usize, n: usize| -> Vec<f64> {
            (from..from + n)
                .map(|t| {
                    let (day, hour) = ((t / 24) % 7, t % 24);
                    let base = if day < 5 && (9..18).contains(&hour) {
                        40.0
                    } else {
                        10.0
                    };
                    base + 0.01 * t as f64
                })
                .collect()
        };
        let usage = Demand {
            gpus: series(0, 4 * 168),
            start: None,
        };
        let f = forecast(&usage, 168).unwrap();
        assert_eq!(f.period, 168);
        let truth = series(4 * 168, 168);
        let worst = f
            .gpus
            .iter()
            .zip(&truth)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        assert!(worst < 0.5, "worst error {worst}");
        assert!((f.trend_per_hour - 0.01).abs() < 1e-3);
        let bt = f.backtest.unwrap();
        assert!(bt.wape.unwrap() < 0.02, "{bt:?}");
    }

    #[test]
    fn x8_rolling_origins_give_out_of_sample_errors() {
        let mut usage = Demand {
            gpus: (0..30).map(|t| 5.0 + 0.5 * f64::from(t)).collect(),
            start: None,
        };
        let r = rolling(&usage, 2, 2).unwrap();
        assert_eq!(r.window, 26);
        for e in r.errors.iter().flatten() {
            assert!(e.abs() < 1e-9, "{:?}", r.errors);
        }
        usage.gpus[29] = 30.0;
        let r = rolling(&usage, 2, 2).unwrap();
        assert!(r.errors[0].iter().all(|e| e.abs() < 1e-9));
        assert!(r.errors[1][0].abs() < 1e-9 && (r.errors[1][1] - 10.5).abs() < 1e-9);
        let mut scores: Vec<f64> = r.errors.iter().flatten().map(|e| e.abs()).collect();
        scores.sort_by(f64::total_cmp);
        assert_eq!(crate::optimizer::half_width(&scores, 0.8), Some(scores[3]));
        assert!((scores[3] - 10.5).abs() < 1e-9);
        let short = Demand {
            gpus: vec![1.0; 30],
            start: None,
        };
        assert!(
            rolling(&short, 4, 2)
                .unwrap_err()
                .contains("history too short for 2 folds of 4 hours")
        );
    }

    #[test]
    fn leave_one_fold_out_coverage_counts_held_out_hours() {
        let r = Rolling {
            point: vec![0.0; 2],
            errors: vec![
                vec![1.0, 2.0],
                vec![1.0, 1.0],
                vec![3.0, 1.0],
                vec![1.0, 9.0],
            ],
            window: 24,
        };
        // Each fold against the other six scores at 0.5: k = ⌈3.5⌉ = 4.
        let c = r.coverage(0.5).unwrap();
        assert!((c - 5.0 / 8.0).abs() < 1e-12, "{c}");
        assert_eq!(r.coverage(0.99), None);
    }

    #[test]
    fn short_histories_fall_back_to_a_daily_profile_or_refuse() {
        let usage = Demand {
            gpus: (0..72)
                .map(|t| if t % 24 < 12 { 8.0 } else { 2.0 })
                .collect(),
            start: None,
        };
        let f = forecast(&usage, 24).unwrap();
        assert_eq!(f.period, 24);
        assert!((f.gpus[0] - 8.0).abs() < 1e-6 && (f.gpus[12] - 2.0).abs() < 1e-6);
        let short = Demand {
            gpus: vec![1.0; 10],
            start: None,
        };
        assert!(forecast(&short, 24).unwrap_err().contains("24"));
    }
}
