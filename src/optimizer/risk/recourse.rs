//! One scenario level's recourse once the purchases are fixed: the small LP
//! of that level's rows and hourly columns, with the purchases moved to the
//! right-hand side, solved by a bounded dual simplex that keeps its basis
//! from one solve to the next.
//!
//! Why a simplex of our own: the decomposition needs each level's dual
//! values (the slope of its cost in the purchases), which microlp does not
//! report, and from one master iteration to the next only the right-hand
//! side moves, so the last optimal basis stays dual feasible and a few dual
//! pivots reach the new optimum. Every hourly cost is non-negative, so the
//! slack basis is dual feasible too and no first phase is needed.

use super::super::lp::{Milp, Row, Sense};

/// A pivot smaller than this is refused: the basis would be near singular.
const PIVOT: f64 = 1e-9;

/// A level's LP is not for this method (a negative or whole-count column),
/// or the simplex lost its way (iteration cap, near-singular pivot). Either
/// sends the problem back to the extensive form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Unsuited(pub &'static str);

/// What a solve at given purchases found.
#[derive(Debug, Clone)]
pub(super) enum Outcome {
    /// The level's least recourse cost and its slope in each purchase
    /// column (`(column, ∂cost/∂R)`, a subgradient: the cost is convex).
    Optimal { cost: f64, slope: Vec<(usize, f64)> },
    /// No recourse at these purchases: every feasible purchase satisfies
    /// `Σ coef·R ≥ rhs`, which these violate.
    Infeasible(Row),
}

/// The basis a solve ended on.
#[derive(Debug, Clone)]
struct Basis {
    head: Vec<usize>,
    at_upper: Vec<bool>,
}

/// One level's LP: columns `0..n` are its hourly columns, `n..n+m` the
/// rows' logicals (`a_i·y + s_i = b_i`, `s_i ≤ 0` for `≥` rows, `≥ 0` for
/// `≤` rows, `= 0` for equalities).
#[derive(Debug, Clone)]
pub(super) struct LevelLp {
    cost: Vec<f64>,
    upper: Vec<f64>,
    cols: Vec<Vec<(usize, f64)>>,
    /// Each column's index in its scenario's model.
    index: Vec<usize>,
    sense: Vec<Sense>,
    rhs: Vec<f64>,
    /// Per row, its terms on purchase columns.
    bought: Vec<Vec<(usize, f64)>>,
    warm: Option<Basis>,
    /// The hourly values of the last optimal solve.
    values: Vec<f64>,
}

/// A scenario model split into levels: their LPs and the rows on purchases
/// alone (coverage only reserved capacity can give), which belong to the
/// master.
pub(super) struct Split {
    pub(super) levels: Vec<LevelLp>,
    pub(super) master_rows: Vec<Row>,
}

/// Splits `milp` (purchase columns `0..reserved`, rows on purchases alone
/// first, `skip` of them) into its levels, whose columns are the ranges
/// `levels`.
///
/// # Errors
/// `Unsuited` when an hourly column is whole or has a negative cost.
pub(super) fn split(
    milp: &Milp,
    reserved: usize,
    skip: usize,
    levels: &[std::ops::Range<usize>],
) -> Result<Split, Unsuited> {
    let mut out: Vec<LevelLp> = levels
        .iter()
        .map(|range| {
            let vars = &milp.vars[range.clone()];
            LevelLp {
                cost: vars.iter().map(|v| v.cost).collect(),
                upper: vars
                    .iter()
                    .map(|v| v.upper.unwrap_or(f64::INFINITY))
                    .collect(),
                cols: vec![Vec::new(); vars.len()],
                index: range.clone().collect(),
                sense: Vec::new(),
                rhs: Vec::new(),
                bought: Vec::new(),
                warm: None,
                values: vec![0.0; vars.len()],
            }
        })
        .collect();
    if milp.vars[reserved..]
        .iter()
        .any(|v| v.integer || v.cost < 0.0)
    {
        return Err(Unsuited("a whole or negative-cost hourly count"));
    }
    let mut master_rows = Vec::new();
    for row in &milp.rows[skip..] {
        let Some(first) = row.terms.iter().find(|(i, _)| *i >= reserved).map(|t| t.0) else {
            master_rows.push(row.clone());
            continue;
        };
        let l = levels.partition_point(|r| r.end <= first);
        let lp = &mut out[l];
        let start = levels[l].start;
        let own: Vec<(usize, f64)> = row
            .terms
            .iter()
            .filter(|(i, _)| *i >= reserved)
            .map(|(i, c)| (i - start, *c))
            .collect();
        let bought: Vec<(usize, f64)> = row
            .terms
            .iter()
            .filter(|(i, _)| *i < reserved)
            .copied()
            .collect();
        if let ([(j, c)], true, Sense::AtMost) = (&own[..], bought.is_empty(), row.sense)
            && *c > 0.0
        {
            // A cap on one column is its bound, not a row.
            lp.upper[*j] = lp.upper[*j].min(row.rhs / c);
            continue;
        }
        let i = lp.rhs.len();
        for (j, c) in own {
            lp.cols[j].push((i, c));
        }
        lp.sense.push(row.sense);
        lp.rhs.push(row.rhs);
        lp.bought.push(bought);
    }
    Ok(Split {
        levels: out,
        master_rows,
    })
}

impl LevelLp {
    fn n(&self) -> usize {
        self.cost.len()
    }

    fn m(&self) -> usize {
        self.rhs.len()
    }

    fn lower(&self, j: usize) -> f64 {
        let n = self.n();
        if j < n {
            return 0.0;
        }
        match self.sense[j - n] {
            Sense::AtLeast => f64::NEG_INFINITY,
            Sense::AtMost | Sense::Equal => 0.0,
        }
    }

    fn upper(&self, j: usize) -> f64 {
        let n = self.n();
        if j < n {
            return self.upper[j];
        }
        match self.sense[j - n] {
            Sense::AtMost => f64::INFINITY,
            Sense::AtLeast | Sense::Equal => 0.0,
        }
    }

    fn column_cost(&self, j: usize) -> f64 {
        if j < self.n() { self.cost[j] } else { 0.0 }
    }

    /// `π·a_j` for column `j`.
    fn dot(&self, pi: &[f64], j: usize) -> f64 {
        let n = self.n();
        if j < n {
            self.cols[j].iter().map(|(i, a)| pi[*i] * a).sum()
        } else {
            pi[j - n]
        }
    }

    /// The hourly values of the last optimal solve, as `(model column, value)`.
    pub(super) fn values(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.index.iter().copied().zip(self.values.iter().copied())
    }

    /// Solves the level with the purchase columns at `bought` (indexed by
    /// model column).
    ///
    /// # Errors
    /// `Unsuited` when the simplex cannot finish (see the type).
    pub(super) fn solve(&mut self, bought: &[f64]) -> Result<Outcome, Unsuited> {
        let (n, m) = (self.n(), self.m());
        let b: Vec<f64> = self
            .rhs
            .iter()
            .zip(&self.bought)
            .map(|(r, terms)| r - terms.iter().map(|(k, a)| a * bought[*k]).sum::<f64>())
            .collect();
        if m == 0 {
            self.values.iter_mut().for_each(|v| *v = 0.0);
            return Ok(Outcome::Optimal {
                cost: 0.0,
                slope: Vec::new(),
            });
        }
        let scale = b.iter().fold(1.0_f64, |s, x| s.max(x.abs()));
        let primal_tol = 1e-9 * scale;
        let (mut head, mut at_upper, mut inv) = self.start();
        let mut basic = vec![false; n + m];
        for &h in &head {
            basic[h] = true;
        }
        let value = |j: usize, at_upper: &[bool], lp: &Self| {
            if at_upper[j] {
                lp.upper(j)
            } else {
                lp.lower(j)
            }
        };
        let limit = 50 * (n + m) + 100;
        for _ in 0..limit {
            // Basic values: B⁻¹(b − Σ nonbasic a_j x_j); logicals sit at 0.
            let mut w = b.clone();
            for (j, col) in self.cols.iter().enumerate().filter(|(j, _)| !basic[*j]) {
                let x = value(j, &at_upper, self);
                if x != 0.0 {
                    for (i, a) in col {
                        w[*i] -= a * x;
                    }
                }
            }
            let xb: Vec<f64> = (0..m)
                .map(|r| (0..m).map(|i| inv[r * m + i] * w[i]).sum())
                .collect();
            let mut leave: Option<(usize, f64)> = None;
            for (r, &x) in xb.iter().enumerate() {
                let j = head[r];
                let viol = (self.lower(j) - x).max(x - self.upper(j));
                if viol > primal_tol && leave.is_none_or(|(_, v)| viol > v) {
                    leave = Some((r, viol));
                }
            }
            let pi: Vec<f64> = (0..m)
                .map(|i| {
                    (0..m)
                        .map(|r| self.column_cost(head[r]) * inv[r * m + i])
                        .sum()
                })
                .collect();
            let Some((r, _)) = leave else {
                let values: Vec<f64> = (0..n)
                    .map(|j| match head.iter().position(|h| *h == j) {
                        Some(r) => xb[r].max(0.0),
                        None => value(j, &at_upper, self),
                    })
                    .collect();
                let cost = self.cost.iter().zip(&values).map(|(c, x)| c * x).sum();
                self.values = values;
                self.warm = Some(Basis { head, at_upper });
                return Ok(Outcome::Optimal {
                    cost,
                    slope: self.slope(&pi),
                });
            };
            let rho = &inv[r * m..(r + 1) * m];
            let up = xb[r] < self.lower(head[r]);
            // Entering column: the dual ratio test, two passes (Harris):
            // the loosest step within a small tolerance, then the largest
            // pivot among the columns that reach it.
            let candidates: Vec<(usize, f64, f64)> = (0..n + m)
                .filter(|j| !basic[*j] && self.lower(*j) < self.upper(*j))
                .filter_map(|j| {
                    let alpha = self.dot(rho, j);
                    let d = self.column_cost(j) - self.dot(&pi, j);
                    let eligible = if up {
                        (!at_upper[j] && alpha < -PIVOT) || (at_upper[j] && alpha > PIVOT)
                    } else {
                        (!at_upper[j] && alpha > PIVOT) || (at_upper[j] && alpha < -PIVOT)
                    };
                    eligible.then_some((j, alpha, d.abs()))
                })
                .collect();
            if candidates.is_empty() {
                self.warm = Some(Basis {
                    head: head.clone(),
                    at_upper: at_upper.clone(),
                });
                return Ok(Outcome::Infeasible(
                    self.farkas(rho, &basic, &at_upper, up, head[r]),
                ));
            }
            let bound = candidates
                .iter()
                .map(|(_, a, d)| (d + 1e-12) / a.abs())
                .fold(f64::INFINITY, f64::min);
            let Some(&(q, _, _)) = candidates
                .iter()
                .filter(|(_, a, d)| d / a.abs() <= bound)
                .max_by(|x, y| x.1.abs().total_cmp(&y.1.abs()))
            else {
                return Err(Unsuited("no entering column"));
            };
            let column = self.inverse_times(&inv, q);
            let pivot = column[r];
            if pivot.abs() < PIVOT {
                return Err(Unsuited("a near-singular pivot"));
            }
            let leaving = head[r];
            at_upper[leaving] = !up;
            basic[leaving] = false;
            basic[q] = true;
            head[r] = q;
            pivot_inverse(&mut inv, m, r, &column);
        }
        Err(Unsuited("the dual simplex's iteration cap"))
    }

    /// `B⁻¹ a_q`.
    fn inverse_times(&self, inv: &[f64], q: usize) -> Vec<f64> {
        let (n, m) = (self.n(), self.m());
        (0..m)
            .map(|r| {
                if q < n {
                    self.cols[q].iter().map(|(i, a)| inv[r * m + i] * a).sum()
                } else {
                    inv[r * m + q - n]
                }
            })
            .collect()
    }

    /// The starting basis and its inverse: the last solve's when it can be
    /// rebuilt, else the slack basis.
    fn start(&self) -> (Vec<usize>, Vec<bool>, Vec<f64>) {
        let (n, m) = (self.n(), self.m());
        let mut head: Vec<usize> = (n..n + m).collect();
        let mut inv = vec![0.0; m * m];
        for i in 0..m {
            inv[i * m + i] = 1.0;
        }
        let slack = (head.clone(), vec![false; n + m], inv.clone());
        let Some(warm) = &self.warm else {
            return slack;
        };
        // Pivot the warm basis's columns into the slack basis, each in
        // place of a logical the warm basis does not hold.
        let mut wanted = vec![false; n + m];
        for &h in &warm.head {
            wanted[h] = true;
        }
        for &q in warm.head.iter().filter(|h| **h < n) {
            let column = self.inverse_times(&inv, q);
            let Some(r) = (0..m)
                .filter(|r| !wanted[head[*r]])
                .max_by(|a, b| column[*a].abs().total_cmp(&column[*b].abs()))
            else {
                return slack;
            };
            if column[r].abs() < 1e-7 {
                return slack;
            }
            head[r] = q;
            pivot_inverse(&mut inv, m, r, &column);
        }
        (head, warm.at_upper.clone(), inv)
    }

    /// Each purchase column's slope, `−Σ_i π_i·a_ik` (rows of `π = 0` skipped).
    fn slope(&self, pi: &[f64]) -> Vec<(usize, f64)> {
        let mut slope: Vec<(usize, f64)> = Vec::new();
        for (w, terms) in pi.iter().zip(&self.bought) {
            if *w == 0.0 {
                continue;
            }
            for (k, a) in terms {
                match slope.iter_mut().find(|(c, _)| c == k) {
                    Some((_, s)) => *s -= w * a,
                    None => slope.push((*k, -w * a)),
                }
            }
        }
        slope
    }

    /// The feasibility cut of a row with no entering column: basic variable
    /// `x_r = ρ·b − Σ_N α_j x_j` cannot reach its bound whatever the
    /// purchases, unless `ρ·b(R)` moves. `up`: it is below its lower bound.
    fn farkas(&self, rho: &[f64], basic: &[bool], at_upper: &[bool], up: bool, var: usize) -> Row {
        let n = self.n();
        let fixed: f64 = (0..n)
            .filter(|j| !basic[*j])
            .map(|j| {
                let x = if at_upper[j] { self.upper(j) } else { 0.0 };
                if x == 0.0 { 0.0 } else { self.dot(rho, j) * x }
            })
            .sum();
        let base: f64 = rho.iter().zip(&self.rhs).map(|(p, r)| p * r).sum();
        // x_r's reach is base − Σ_k (ρ·B_k) R_k − fixed: its terms on the
        // purchases are the slope's form with ρ for π.
        let terms = self.slope(rho);
        if up {
            Row {
                terms,
                sense: Sense::AtLeast,
                rhs: self.lower(var) + fixed - base,
            }
        } else {
            Row {
                terms,
                sense: Sense::AtMost,
                rhs: self.upper(var) + fixed - base,
            }
        }
    }
}

/// Replaces row `r`'s basic column by the one whose `B⁻¹ a_q` is `column`.
fn pivot_inverse(inv: &mut [f64], m: usize, r: usize, column: &[f64]) {
    let pivot = column[r];
    for i in 0..m {
        inv[r * m + i] /= pivot;
    }
    for (row, &factor) in column.iter().enumerate() {
        if row != r && factor != 0.0 {
            for i in 0..m {
                inv[row * m + i] -= factor * inv[r * m + i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::lp::{Backend, Milp, Row, Sense};
    use super::*;

    /// A random level: purchases 0..2, hourly columns 2..2+n, covering
    /// rows, caps and an equality split; solved both ways at random
    /// purchases, the cost agrees with microlp and the slope is a true
    /// subgradient (checked against a nearby solve).
    #[test]
    fn the_dual_simplex_agrees_with_microlp_and_its_slope_bounds_the_cost() {
        let mut seed = 7u64;
        let mut next = move || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        for case in 0..200 {
            let mut milp = Milp::default();
            milp.add_var(5.0, Some(4.0), false);
            milp.add_var(3.0, Some(4.0), false);
            let n = 3 + (next() * 6.0) as usize;
            for _ in 0..n {
                let (u, v) = (next(), next());
                let upper = (u < 0.5).then_some((v * 5.0).round());
                let cost = 0.5 + next() * 3.0;
                milp.add_var(cost, upper, false);
            }
            let classes = 1 + (next() * 3.0) as usize;
            for c in 0..classes {
                let mut terms: Vec<(usize, f64)> = Vec::new();
                for j in 2..2 + n {
                    if next() < 0.6 {
                        terms.push((j, 0.5 + next()));
                    }
                }
                terms.push((c % 2, 1.0));
                let rhs = (next() * 8.0).round();
                milp.rows.push(Row {
                    terms,
                    sense: Sense::AtLeast,
                    rhs,
                });
            }
            let mut shared: Vec<(usize, f64)> = Vec::new();
            for j in 2..2 + n {
                if next() < 0.4 {
                    shared.push((j, 1.0));
                }
            }
            if !shared.is_empty() {
                let rhs = (next() * 6.0).round();
                milp.rows.push(Row {
                    terms: shared,
                    sense: Sense::AtMost,
                    rhs,
                });
            }
            let levels = [std::ops::Range {
                start: 2,
                end: 2 + n,
            }];
            let Ok(mut split) = split(&milp, 2, 0, &levels) else {
                panic!("case {case}: split refused");
            };
            for _ in 0..4 {
                let r = [(next() * 4.0).round(), (next() * 4.0).round()];
                let mut fixed = milp.clone();
                for (k, v) in r.iter().enumerate() {
                    fixed.vars[k].cost = 0.0;
                    fixed.rows.push(Row {
                        terms: vec![(k, 1.0)],
                        sense: Sense::Equal,
                        rhs: *v,
                    });
                }
                let theirs = fixed.solve(Backend::Microlp, None);
                let uncovered = split.master_rows.iter().any(|row| {
                    let lhs: f64 = row.terms.iter().map(|(k, c)| c * r[*k]).sum();
                    lhs < row.rhs - 1e-9
                });
                if uncovered {
                    assert!(
                        theirs.is_err(),
                        "case {case}: a master row fails, yet microlp plans"
                    );
                    continue;
                }
                let lp = &mut split.levels[0];
                match (lp.solve(&r), theirs) {
                    (Ok(Outcome::Optimal { cost, slope }), Ok(values)) => {
                        let their_cost: f64 = fixed
                            .vars
                            .iter()
                            .zip(&values)
                            .map(|(v, x)| v.cost * x)
                            .sum();
                        assert!(
                            (cost - their_cost).abs() <= 1e-7 * (1.0 + cost.abs()),
                            "case {case}: {cost} vs {their_cost}"
                        );
                        let mine: f64 = lp.values().map(|(j, x)| milp.vars[j].cost * x).sum();
                        assert!((mine - cost).abs() <= 1e-7 * (1.0 + cost.abs()));
                        // The cut at r underestimates the cost at a nearby point.
                        let s = [(r[0] + 1.0).min(4.0), (r[1] - 1.0).max(0.0)];
                        if let Ok(Outcome::Optimal { cost: there, .. }) = lp.solve(&s) {
                            let cut =
                                cost + slope.iter().map(|(k, g)| g * (s[*k] - r[*k])).sum::<f64>();
                            assert!(
                                cut <= there + 1e-7 * (1.0 + there.abs()),
                                "case {case}: cut {cut} above {there}"
                            );
                        }
                    }
                    (Ok(Outcome::Infeasible(cut)), Err(_)) => {
                        let lhs: f64 = cut.terms.iter().map(|(k, c)| c * r[*k]).sum();
                        let violated = match cut.sense {
                            Sense::AtLeast => lhs < cut.rhs - 1e-9,
                            _ => lhs > cut.rhs + 1e-9,
                        };
                        assert!(
                            violated,
                            "case {case}: the feasibility cut holds at an infeasible point"
                        );
                    }
                    (mine, theirs) => panic!("case {case}: {mine:?} vs {theirs:?}"),
                }
            }
        }
    }
}
