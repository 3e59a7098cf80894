//! The risk measures of §11.6 over a discrete distribution of
//! `(value, probability)` pairs: a leaf that the version 3 solve and its
//! one-class scan both use. `verify` keeps its own copy on purpose: it shares
//! no code with the solver it checks.

/// The quantile guard of §11.6: sums such as 0.35 + 0.35 + 0.25 reach 0.95
/// however the additions round.
const QUANTILE_GUARD: f64 = 1e-9;

/// `Q_α[X]`: the smallest `X_ω` whose cumulative probability reaches
/// `α − 1e-9`; `xs` holds `(value, probability)`.
#[must_use]
pub fn quantile(xs: &[(f64, f64)], alpha: f64) -> f64 {
    let mut sorted = xs.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut cumulative = 0.0;
    for (x, p) in &sorted {
        cumulative += p;
        if cumulative >= alpha - QUANTILE_GUARD {
            return *x;
        }
    }
    sorted.last().map_or(0.0, |(x, _)| *x)
}

/// `CVaR_β[X] = Q_β + 1/(1−β)·Σ p·max(0, X − Q_β)`.
#[must_use]
pub fn cvar(xs: &[(f64, f64)], beta: f64) -> f64 {
    let q = quantile(xs, beta);
    q + xs.iter().map(|(x, p)| p * (x - q).max(0.0)).sum::<f64>() / (1.0 - beta)
}
