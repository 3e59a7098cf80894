//! The extensive form of a version 3 problem: every scenario group's model
//! in one, sharing the reserved columns, with the mean-CVaR objective of
//! one λ.

use std::collections::BTreeMap;

use super::super::build::Vars;
use super::super::lp::{Milp, Row, Sense};
use super::super::setup::Setup;

/// Pool availability per hour, for the pools down in some hour.
pub(super) type Availability = BTreeMap<String, Vec<bool>>;

/// Scenarios with equal demand and availability, solved once.
pub(super) struct Group {
    /// Input scenarios it stands for, in input order.
    pub(super) members: Vec<usize>,
    pub(super) probability: f64,
}

/// One scenario group's model and what was built from it.
pub(super) struct Part<'a> {
    pub(super) setup: Setup<'a>,
    pub(super) milp: Milp,
    pub(super) vars: Vars,
}

/// The extensive form's layout: reserved columns `0..reserved`, then each
/// group's recourse columns, then η⁺, η⁻ and the `u` (when built).
pub(super) struct Extensive {
    pub(super) milp: Milp,
    reserved: usize,
    /// Where group g's recourse columns start.
    offsets: Vec<usize>,
    /// Per column, its coefficient in its scenario's cost (`C_ω`).
    cost: Vec<f64>,
    /// Per column, its group (`None`: a reserved column, in every cost).
    group: Vec<Option<usize>>,
}

impl Extensive {
    pub(super) fn new(parts: &[Part<'_>], reserved: usize) -> Self {
        let mut milp = Milp::default();
        let mut cost = Vec::new();
        let mut group = Vec::new();
        for v in &parts[0].milp.vars[..reserved] {
            milp.vars.push(v.clone());
            cost.push(v.cost);
            group.push(None);
        }
        let mut offsets = Vec::with_capacity(parts.len());
        for (g, part) in parts.iter().enumerate() {
            let offset = milp.vars.len();
            offsets.push(offset);
            for v in &part.milp.vars[reserved..] {
                milp.vars.push(v.clone());
                cost.push(v.cost);
                group.push(Some(g));
            }
            let remap = |i: usize| {
                if i < reserved {
                    i
                } else {
                    i - reserved + offset
                }
            };
            // The rows on purchases alone are the same in every scenario.
            let skip = if g > 0 { part.vars.reserved_rows } else { 0 };
            for row in &part.milp.rows[skip..] {
                milp.rows.push(Row {
                    terms: row.terms.iter().map(|(i, c)| (remap(*i), *c)).collect(),
                    sense: row.sense,
                    rhs: row.rhs,
                });
            }
        }
        Self {
            milp,
            reserved,
            offsets,
            cost,
            group,
        }
    }

    /// The model for one λ: `(1−λ)·Σ p_ω C_ω + λ·(η + 1/(1−β)·Σ p_ω u_ω)`
    /// with rows R1 `u_ω + η − C_ω ≥ −B_ω` (B only for the shortfall). With
    /// `cap = Some(V)` (λ = 1, second step) it minimises the mean subject to
    /// CVaR ≤ V instead.
    pub(super) fn model(
        &self,
        groups: &[Group],
        lambda: f64,
        beta: f64,
        shift: &[f64],
        cap: Option<f64>,
    ) -> Milp {
        let mut m = self.milp.clone();
        let mean = if cap.is_some() { 1.0 } else { 1.0 - lambda };
        for (i, v) in m.vars.iter_mut().enumerate() {
            let p = self.group[i].map_or(1.0, |g| groups[g].probability);
            v.cost = mean * p * self.cost[i];
        }
        let eta = m.vars.len();
        if lambda == 0.0 {
            return m;
        }
        let tail = if cap.is_some() { 0.0 } else { lambda };
        m.add_var(tail, None, false);
        m.add_var(-tail, None, false);
        let mut cvar_terms = vec![(eta, 1.0), (eta + 1, -1.0)];
        for (g, group) in groups.iter().enumerate() {
            let weight = group.probability / (1.0 - beta);
            let u = m.add_var(tail * weight, None, false);
            cvar_terms.push((u, weight));
            let mut terms = vec![(u, 1.0), (eta, 1.0), (eta + 1, -1.0)];
            let end = self.offsets.get(g + 1).copied().unwrap_or(self.cost.len());
            for i in (0..self.reserved).chain(self.offsets[g]..end) {
                if self.cost[i] != 0.0 {
                    terms.push((i, -self.cost[i]));
                }
            }
            m.rows.push(Row {
                terms,
                sense: Sense::AtLeast,
                rhs: -shift[g],
            });
        }
        if let Some(v) = cap {
            m.rows.push(Row {
                terms: cvar_terms,
                sense: Sense::AtMost,
                rhs: v + 1e-9 * v.abs().max(1.0),
            });
        }
        m
    }

    /// Group g's values in its own model's column order.
    pub(super) fn values_of(&self, values: &[f64], g: usize, len: usize) -> Vec<f64> {
        let mut out = values[..self.reserved].to_vec();
        let start = self.offsets[g];
        out.extend_from_slice(&values[start..start + len - self.reserved]);
        out
    }
}
