//! The scenario generator of docs/planning-model.md §11.4 and §11.7: a
//! SplitMix64 stream, two-state pool chains with common shocks, and demand
//! paths bootstrapped from out-of-sample forecast errors and rescaled to
//! their conformal half-widths. It is part of the model: the same seed gives
//! the same scenarios in any implementation, so every step follows the
//! document's arithmetic to the bit.

use std::collections::BTreeMap;

use serde::Serialize;

/// The guard that keeps `⌈(n+1)·ℓ⌉` from rounding past an integer product.
const CONFORMAL_GUARD: f64 = 1e-9;

/// Vigna's SplitMix64 (§11.4.1).
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next raw output.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float in [0, 1), exact in a double: the top 53 bits over 2^53.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// An integer in [0, n), computed exactly as `⌊(x >> 11)·n / 2^53⌋`.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64() >> 11) * u128::from(n)) >> 53) as u64
    }
}

/// Where a chain starts in hour 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Initial {
    Stationary,
    Up,
    Down,
}

/// A two-state availability chain (§11.4.2): a pool's own, or a shock's.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub p_down: f64,
    pub p_up: f64,
    pub initial: Initial,
}

impl Chain {
    /// The chain's path over `hours` hours, one draw per hour; `true` is up.
    pub fn path(&self, rng: &mut SplitMix64, hours: usize) -> Vec<bool> {
        let mut out = Vec::with_capacity(hours);
        let mut up = true;
        for t in 0..hours {
            let u = rng.unit();
            up = if t == 0 {
                match self.initial {
                    Initial::Up => true,
                    Initial::Down => false,
                    Initial::Stationary if self.p_up + self.p_down == 0.0 => true,
                    Initial::Stationary => u < self.p_up / (self.p_up + self.p_down),
                }
            } else if up {
                u >= self.p_down
            } else {
                u < self.p_up
            };
            out.push(up);
        }
        out
    }
}

/// One class's out-of-sample errors: `errors[fold][lead]`, `actual − forecast`.
#[derive(Debug, Clone, PartialEq)]
pub struct Residuals {
    pub class: usize,
    pub errors: Vec<Vec<f64>>,
}

/// The generator's demand part (§11.7).
#[derive(Debug, Clone, PartialEq)]
pub struct DemandPaths {
    /// In the order the document lists them.
    pub residuals: Vec<Residuals>,
    pub block_hours: usize,
    /// `None` pools every lead into one bucket.
    pub bucket_hours: Option<usize>,
    pub level: f64,
    pub range_levels: Vec<f64>,
}

/// A validated `scenario_generator` (§11.4).
#[derive(Debug, Clone, PartialEq)]
pub struct Generator {
    pub seed: u64,
    pub count: usize,
    pub demand: Option<DemandPaths>,
    /// `(pool, chain)` in list order.
    pub pools: Vec<(String, Chain)>,
    /// `(pools, chain)` per shock, in list order.
    pub shocks: Vec<(Vec<String>, Chain)>,
}

/// One generated scenario: demand per class and hour, and the availability
/// of every pool that is down in some hour.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    pub demand: Vec<Vec<f64>>,
    pub available: BTreeMap<String, Vec<bool>>,
}

/// A bucket's split-conformal statistics for one class.
#[derive(Debug, Clone, PartialEq)]
struct Bucket {
    /// `|E|` over every fold and lead of the bucket, ascending.
    scores: Vec<f64>,
}

/// The split-conformal half-width `q(ℓ) = e_(k)`, `k = ⌈(n+1)·ℓ − 1e-9⌉`,
/// of scores sorted ascending; `None` when `k > n` (unbounded).
#[must_use]
pub fn half_width(sorted: &[f64], level: f64) -> Option<f64> {
    let n = sorted.len();
    let k = ((n as f64 + 1.0) * level - CONFORMAL_GUARD).ceil().max(1.0) as usize;
    (k <= n).then(|| sorted[k - 1])
}

impl Bucket {
    fn half_width(&self, level: f64) -> Option<f64> {
        half_width(&self.scores, level)
    }

    /// The empirical quantile `e_(k')`, `k' = max(1, ⌈n·ℓ − 1e-9⌉)`.
    fn empirical(&self, level: f64) -> f64 {
        let n = self.scores.len();
        let k = ((n as f64) * level - CONFORMAL_GUARD).ceil().max(1.0) as usize;
        self.scores[k.min(n) - 1]
    }
}

/// One class's buckets and scales.
struct ClassBuckets {
    buckets: Vec<Bucket>,
    /// `κ` per bucket.
    scale: Vec<f64>,
    width: usize,
    leads: usize,
}

impl ClassBuckets {
    fn new(errors: &[Vec<f64>], bucket_hours: Option<usize>, level: f64) -> Self {
        let leads = errors[0].len();
        let width = bucket_hours.unwrap_or(leads).max(1);
        let buckets: Vec<Bucket> = (0..leads.div_ceil(width))
            .map(|g| {
                let mut scores: Vec<f64> = errors
                    .iter()
                    .flat_map(|row| row[g * width..leads.min((g + 1) * width)].iter())
                    .map(|e| e.abs())
                    .collect();
                scores.sort_by(f64::total_cmp);
                Bucket { scores }
            })
            .collect();
        let scale = buckets
            .iter()
            .map(|b| {
                let m = b.empirical(level);
                match b.half_width(level) {
                    Some(q) if m > 0.0 => q / m,
                    _ => 1.0,
                }
            })
            .collect();
        Self {
            buckets,
            scale,
            width,
            leads,
        }
    }

    /// `g(t) = ⌊(t mod H) / b⌋`.
    fn bucket_of(&self, t: usize) -> usize {
        (t % self.leads) / self.width
    }
}

/// A level the paths cannot be scaled to: `(class index, bucket, scores)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooFewResiduals {
    pub class: usize,
    pub bucket: usize,
    pub scores: usize,
}

impl DemandPaths {
    /// Checks that every bucket's half-width at `level` is finite (§11.7.3).
    ///
    /// # Errors
    /// The first class and bucket with too few scores.
    pub fn check(&self) -> Result<(), TooFewResiduals> {
        for r in &self.residuals {
            let b = ClassBuckets::new(&r.errors, self.bucket_hours, self.level);
            if let Some(g) = b
                .buckets
                .iter()
                .position(|x| x.half_width(self.level).is_none())
            {
                return Err(TooFewResiduals {
                    class: r.class,
                    bucket: g,
                    scores: b.buckets[g].scores.len(),
                });
            }
        }
        Ok(())
    }

    /// The `ranges` result (§11.7.4) around the base demand `base[class][t]`.
    #[must_use]
    pub fn ranges(&self, class_ids: &[String], base: &[Vec<f64>]) -> Ranges {
        let mut classes = BTreeMap::new();
        for r in &self.residuals {
            let b = ClassBuckets::new(&r.errors, self.bucket_hours, self.level);
            let point = &base[r.class];
            let bands = self
                .range_levels
                .iter()
                .map(|&level| {
                    let half: Vec<Option<f64>> =
                        b.buckets.iter().map(|x| x.half_width(level)).collect();
                    let at = |t: usize| half[b.bucket_of(t)];
                    Band {
                        level,
                        lower: (0..point.len())
                            .map(|t| at(t).map_or(0.0, |q| (point[t] - q).max(0.0)))
                            .collect(),
                        upper: (0..point.len())
                            .map(|t| at(t).map(|q| point[t] + q))
                            .collect(),
                        half_width: half,
                    }
                })
                .collect();
            classes.insert(
                class_ids[r.class].clone(),
                ClassRanges {
                    point: point.clone(),
                    folds: r.errors.len(),
                    lead_hours: b.leads,
                    scores: b.buckets.iter().map(|x| x.scores.len()).collect(),
                    scale: b.scale.clone(),
                    bands,
                },
            );
        }
        Ranges {
            level: self.level,
            range_levels: self.range_levels.clone(),
            bucket_hours: self.bucket_hours,
            block_hours: self.block_hours,
            classes,
        }
    }
}

/// The forecast's calibrated ranges (§11.7.4).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ranges {
    pub level: f64,
    pub range_levels: Vec<f64>,
    pub bucket_hours: Option<usize>,
    pub block_hours: usize,
    pub classes: BTreeMap<String, ClassRanges>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClassRanges {
    pub point: Vec<f64>,
    pub folds: usize,
    pub lead_hours: usize,
    pub scores: Vec<usize>,
    pub scale: Vec<f64>,
    pub bands: Vec<Band>,
}

/// One range level: `half_width` per bucket, `None` when unbounded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Band {
    pub level: f64,
    pub half_width: Vec<Option<f64>>,
    pub lower: Vec<f64>,
    pub upper: Vec<Option<f64>>,
}

impl Generator {
    /// The `count` scenarios, drawn in the order of §11.4.3 from one stream.
    #[must_use]
    pub fn generate(&self, base: &[Vec<f64>]) -> Vec<Generated> {
        let hours = base.first().map_or(0, Vec::len);
        let mut rng = SplitMix64::new(self.seed);
        let scaled: Vec<(&Residuals, ClassBuckets)> = self
            .demand
            .iter()
            .flat_map(|d| {
                d.residuals
                    .iter()
                    .map(|r| (r, ClassBuckets::new(&r.errors, d.bucket_hours, d.level)))
            })
            .collect();
        (0..self.count)
            .map(|_| {
                let mut demand = base.to_vec();
                if let Some(d) = &self.demand {
                    let folds = d.residuals[0].errors.len() as u64;
                    let draws: Vec<usize> = (0..hours.div_ceil(d.block_hours))
                        .map(|_| rng.below(folds) as usize)
                        .collect();
                    for (r, b) in &scaled {
                        for (t, x) in demand[r.class].iter_mut().enumerate() {
                            let fold = draws[t / d.block_hours];
                            let e = r.errors[fold][t % b.leads];
                            *x = (*x + b.scale[b.bucket_of(t)] * e).max(0.0);
                        }
                    }
                }
                let shocks: Vec<Vec<bool>> = self
                    .shocks
                    .iter()
                    .map(|(_, c)| c.path(&mut rng, hours))
                    .collect();
                let mut available: BTreeMap<String, Vec<bool>> = BTreeMap::new();
                for (pool, chain) in &self.pools {
                    available.insert(pool.clone(), chain.path(&mut rng, hours));
                }
                for ((pools, _), path) in self.shocks.iter().zip(&shocks) {
                    for pool in pools {
                        let own = available
                            .entry(pool.clone())
                            .or_insert_with(|| vec![true; hours]);
                        for (a, up) in own.iter_mut().zip(path) {
                            *a &= *up;
                        }
                    }
                }
                available.retain(|_, a| a.iter().any(|up| !up));
                Generated { demand, available }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_reproduces_the_published_and_the_model_test_vectors() {
        let mut a = SplitMix64::new(1_234_567);
        assert_eq!(
            [a.next_u64(), a.next_u64(), a.next_u64()],
            [
                6_457_827_717_110_365_317,
                3_203_168_211_198_807_973,
                9_817_491_932_198_370_423
            ]
        );
        let mut b = SplitMix64::new(5);
        assert_eq!(
            [b.next_u64(), b.next_u64(), b.next_u64()],
            [
                7_134_611_160_154_358_618,
                13_877_614_986_023_876_344,
                4_292_726_422_858_613_063
            ]
        );
        let mut c = SplitMix64::new(5);
        let floats = [
            0.38677, 0.75231, 0.23271, 0.09934, 0.18796, 0.38061, 0.98556, 0.51110, 0.42645,
            0.60344, 0.45048, 0.13670,
        ];
        for want in floats {
            let u = c.unit();
            assert!((u - want).abs() < 5e-6, "{u} vs {want}");
        }
    }

    #[test]
    fn bounded_integers_use_the_exact_integer_rule() {
        // The top 53 bits all ones times n, shifted: n − 1, never n.
        let mut r = SplitMix64::new(0);
        for n in [1u64, 2, 3, 7, 1000, u64::MAX >> 11] {
            for _ in 0..100 {
                assert!(r.below(n) < n);
            }
        }
        let (mut a, mut b) = (SplitMix64::new(5), SplitMix64::new(5));
        assert_eq!(a.below(2), (b.unit() * 2.0) as u64);
    }

    #[test]
    fn conformal_order_statistics_follow_the_guarded_ceilings() {
        let b = Bucket {
            scores: vec![0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 4.0],
        };
        assert_eq!(b.half_width(0.8), Some(4.0));
        assert_eq!(b.half_width(0.9), None);
        assert_eq!(b.empirical(0.8), 3.0);
        // 100 scores at 0.55: (n+1)·ℓ = 55.55 → 56; n·ℓ is 55.000…01 in
        // double, which the guard keeps at 55.
        let hundred = Bucket {
            scores: (1..=100).map(f64::from).collect(),
        };
        assert_eq!(hundred.empirical(0.55), 55.0);
        assert_eq!(hundred.half_width(0.55), Some(56.0));
    }

    #[test]
    fn a_chain_with_no_moves_stays_where_it_starts() {
        let mut r = SplitMix64::new(9);
        let frozen = Chain {
            p_down: 0.0,
            p_up: 0.0,
            initial: Initial::Stationary,
        };
        assert!(frozen.path(&mut r, 50).iter().all(|up| *up));
        let down = Chain {
            initial: Initial::Down,
            ..frozen
        };
        assert!(down.path(&mut r, 50).iter().all(|up| !up));
    }
}
