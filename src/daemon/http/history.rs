//! Spot history as an answer keeps it between requests: the series of one
//! question as read for a window, each point already in its JSON. A later
//! window of the same question, while the catalog is unchanged, is the same
//! read with its oldest points left out: `since=30d` asked again a second
//! later trims the read instead of reading and encoding 2 MiB again. After
//! spot syncs that only appended to their series, the read is extended by
//! the points they added instead of read again, and a prune of what is older
//! than the window leaves it as it is.

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};

use crate::catalog::{self, Freshness, SpotPointOf, SpotQuery, SpotStats};
use crate::store::{Generation, SpotPrice, SpotSeriesPoints, StoreError};

/// How long a read is extended by what later syncs append before its
/// window is read again: its points before the windows asked for since then
/// are kept meanwhile.
const EXTENDED_FOR: chrono::TimeDelta = chrono::TimeDelta::days(1);

/// The series one question read, from `since` on, each with a point at least.
pub(crate) struct KeptHistory {
    since: DateTime<Utc>,
    /// The catalog's state read before the series were: the read holds
    /// everything written up to it.
    generation: Generation,
    /// When the window was read whole.
    read_at: DateTime<Utc>,
    /// Shared with the read this one was extended from: a series no sync
    /// appended to is kept once.
    series: Vec<Arc<Encoded>>,
    /// Every point as (series, point), in order of price (see
    /// [`catalog::by_price`]): each window's statistics without a sort.
    by_price: Vec<(usize, usize)>,
}

/// A series as read, and its points' JSON one after another, comma
/// separated: point `i`'s starts at `at[i]`.
#[derive(Clone)]
struct Encoded {
    read: SpotSeriesPoints,
    json: Vec<u8>,
    at: Vec<usize>,
}

impl Encoded {
    fn new(read: SpotSeriesPoints) -> Result<Self, serde_json::Error> {
        let mut encoded = Self {
            json: Vec::with_capacity(read.points.len() * 180),
            at: Vec::with_capacity(read.points.len()),
            read: SpotSeriesPoints {
                points: Vec::new(),
                ..read
            },
        };
        encoded.push(&read.points)?;
        Ok(encoded)
    }

    /// Adds `points`, newer than those it holds, oldest first.
    fn push(&mut self, points: &[SpotPrice]) -> Result<(), serde_json::Error> {
        let s = &self.read;
        for p in points {
            if !self.at.is_empty() {
                self.json.push(b',');
            }
            self.at.push(self.json.len());
            serde_json::to_writer(
                &mut self.json,
                &SpotPointOf {
                    provider: &s.provider,
                    region: &s.region,
                    zone: &s.zone,
                    instance_type: &s.instance_type,
                    observed_at: p.observed_at,
                    usd_per_hour: p.usd_per_hour,
                },
            )?;
        }
        self.read.points.extend_from_slice(points);
        Ok(())
    }
}

impl KeptHistory {
    /// What [`catalog::spot_series`] read from `since` on, in the catalog's
    /// state `generation` (read before the series), at `now`.
    ///
    /// # Errors
    /// When a point cannot be encoded.
    pub(crate) fn new(
        read: Vec<SpotSeriesPoints>,
        since: DateTime<Utc>,
        generation: Generation,
        now: DateTime<Utc>,
    ) -> Result<Self, serde_json::Error> {
        let series = read
            .into_iter()
            .filter(|s| !s.points.is_empty())
            .map(|s| Encoded::new(s).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            since,
            generation,
            read_at: now,
            by_price: by_price(&series),
            series,
        })
    }

    /// Whether this read holds everything of the catalog's state
    /// `generation`: it was read in it or later.
    pub(crate) fn is_current_in(&self, generation: Generation) -> bool {
        self.generation.data >= generation.data
    }

    /// Whether this read, extended by what spot writes appended since, is
    /// the catalog's state `generation` (see
    /// [`Generation::only_appended_since`]) and recent enough at `now` to
    /// be extended.
    pub(crate) fn extends_to(&self, generation: Generation, now: DateTime<Utc>) -> bool {
        generation.only_appended_since(&self.generation, self.since)
            && now - self.read_at < EXTENDED_FOR
    }

    /// The spot writes this read holds: those numbered up to this.
    pub(crate) fn spot_writes(&self) -> i64 {
        self.generation.spot
    }

    /// The newest point this read holds of each series, by series id.
    pub(crate) fn newest(&self) -> HashMap<i64, DateTime<Utc>> {
        self.series
            .iter()
            .filter_map(|s| Some((s.read.series_id, s.read.points.last()?.observed_at)))
            .collect()
    }

    /// This read with `appended` (points after each series' newest, by
    /// series id, oldest first) added, as the catalog's state `generation`.
    ///
    /// # Errors
    /// When a point cannot be encoded.
    pub(crate) fn extended(
        &self,
        appended: &HashMap<i64, Vec<SpotPrice>>,
        generation: Generation,
    ) -> Result<Self, serde_json::Error> {
        let series = self
            .series
            .iter()
            .map(|s| match appended.get(&s.read.series_id) {
                Some(points) => {
                    let mut grown = Encoded::clone(s);
                    grown.push(points)?;
                    Ok(Arc::new(grown))
                }
                None => Ok(s.clone()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // Nothing appended (only prunes before the window since, say): the
        // order stands.
        let grown = series
            .iter()
            .zip(&self.series)
            .any(|(a, b)| !Arc::ptr_eq(a, b));
        Ok(Self {
            since: self.since,
            generation,
            read_at: self.read_at,
            by_price: if grown {
                by_price(&series)
            } else {
                self.by_price.clone()
            },
            series,
        })
    }

    /// Whether the answer to a window from `since` on is in this read.
    pub(crate) fn holds(&self, since: DateTime<Utc>) -> bool {
        self.since <= since
    }

    /// Bytes this read holds, about.
    pub(crate) fn bytes(&self) -> usize {
        self.series
            .iter()
            .map(|s| {
                s.json.len()
                    + s.at.len() * std::mem::size_of::<usize>()
                    + std::mem::size_of_val(s.read.points.as_slice())
                    + 200
            })
            .sum::<usize>()
            + self.by_price.len() * std::mem::size_of::<(usize, usize)>()
    }

    /// The answer to `q` (whose window this read [`holds`](Self::holds)) as
    /// JSON: what `catalog::spot_history` answers, byte for byte.
    ///
    /// # Errors
    /// `TooLarge` past `q.max_observations`, as the store refuses.
    pub(crate) fn answer(&self, q: &SpotQuery, fresh: &Freshness) -> Result<Vec<u8>, StoreError> {
        // Per series: its points from `q.since` on and the one in force then,
        // as the store reads them. The read from an earlier time holds every
        // point since then and the one before it, so the point just before
        // `q.since`, if any, is in it; and each series keeps a point at least
        // (its last), so none drops out of the answer.
        let windows: Vec<(&Encoded, usize)> = self
            .series
            .iter()
            .map(|s| {
                let first_in = s.read.points.partition_point(|p| p.observed_at < q.since);
                (&**s, first_in.saturating_sub(1))
            })
            .collect();
        let observations: usize = windows
            .iter()
            .map(|(s, first)| s.read.points.len() - first)
            .sum();
        if let Some(limit) = q.max_observations.filter(|&l| observations > l) {
            return Err(StoreError::TooLarge {
                what: "spot observations",
                limit,
            });
        }
        let points: Vec<&[SpotPrice]> = windows
            .iter()
            .map(|(s, first)| &s.read.points[*first..])
            .collect();
        let by_price = self
            .by_price
            .iter()
            .filter_map(|&(w, i)| Some((w, i.checked_sub(windows[w].1)?)));
        let (each, overall) = catalog::window_stats(&points, by_price, q.since, fresh.now);
        encode(q, fresh, overall.as_ref(), &windows, &each)
            .map_err(|e| StoreError::Corrupt(e.to_string()))
    }
}

/// The answer to `q` as serde encodes a [`catalog::SpotHistory`], with each
/// series' points copied from their kept JSON (`windows`: the series, in
/// order, and the first point; `each`: their statistics).
fn encode(
    q: &SpotQuery,
    fresh: &Freshness,
    overall: Option<&SpotStats>,
    windows: &[(&Encoded, usize)],
    each: &[Option<SpotStats>],
) -> Result<Vec<u8>, serde_json::Error> {
    use serde_json::to_writer as put;
    let points: usize = windows.iter().map(|(s, i)| s.json.len() - s.at[*i]).sum();
    let mut out = Vec::with_capacity(points + 512 * (windows.len() + 1));
    out.extend_from_slice(b"{\"instance_type\":");
    put(&mut out, &q.instance_type)?;
    out.extend_from_slice(b",\"since\":");
    put(&mut out, &q.since)?;
    out.extend_from_slice(b",\"until\":");
    put(&mut out, &fresh.now)?;
    out.extend_from_slice(b",\"stats\":");
    put(&mut out, &overall)?;
    out.extend_from_slice(b",\"series\":[");
    let answered = windows
        .iter()
        .zip(each)
        .filter_map(|(w, stats)| Some((w, stats.as_ref()?)));
    for (n, ((kept, first), stats)) in answered.enumerate() {
        if n > 0 {
            out.push(b',');
        }
        let s = &kept.read;
        out.extend_from_slice(b"{\"provider\":");
        put(&mut out, &s.provider)?;
        out.extend_from_slice(b",\"region\":");
        put(&mut out, &s.region)?;
        out.extend_from_slice(b",\"zone\":");
        put(&mut out, &s.zone)?;
        out.extend_from_slice(b",\"stale\":");
        put(&mut out, &fresh.is_stale(&s.provider))?;
        out.extend_from_slice(b",\"stats\":");
        put(&mut out, stats)?;
        out.extend_from_slice(b",\"points\":[");
        out.extend_from_slice(&kept.json[kept.at[*first]..]);
        out.extend_from_slice(b"]}");
    }
    out.extend_from_slice(b"]}");
    Ok(out)
}

fn by_price(series: &[Arc<Encoded>]) -> Vec<(usize, usize)> {
    let points: Vec<&[SpotPrice]> = series.iter().map(|s| s.read.points.as_slice()).collect();
    catalog::by_price(&points)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::Duration;

    use super::*;

    fn at(hours: i64) -> DateTime<Utc> {
        DateTime::UNIX_EPOCH + Duration::hours(hours) + Duration::microseconds(hours * 7)
    }

    /// Three zones' series: hourly points from hour 0, every second hour
    /// from hour 1, and one point at hour 30.
    fn series() -> Vec<SpotSeriesPoints> {
        let zone = |zone: &str, hours: Vec<i64>| SpotSeriesPoints {
            series_id: i64::from(zone.as_bytes()[zone.len() - 1]),
            provider: "aws".to_owned(),
            region: "us-east-1".to_owned(),
            zone: zone.to_owned(),
            instance_type: "p5.48xlarge".to_owned(),
            points: hours
                .into_iter()
                .map(|h| SpotPrice {
                    observed_at: at(h),
                    usd_per_hour: 10.0 + (h % 7) as f64 / 3.0,
                })
                .collect(),
        };
        vec![
            zone("us-east-1a", (0..48).collect()),
            zone("us-east-1b", (1..48).step_by(2).collect()),
            zone("us-east-1c", vec![30]),
        ]
    }

    /// What the store reads for a window from `since` on: the points from
    /// then, and the one in force then.
    fn store_read(since: DateTime<Utc>) -> Vec<SpotSeriesPoints> {
        series()
            .into_iter()
            .map(|mut s| {
                let before = s.points.iter().rposition(|p| p.observed_at < since);
                s.points = s
                    .points
                    .iter()
                    .enumerate()
                    .filter(|(i, p)| p.observed_at >= since || Some(*i) == before)
                    .map(|(_, p)| *p)
                    .collect();
                s
            })
            .filter(|s| !s.points.is_empty())
            .collect()
    }

    #[test]
    fn a_later_window_of_a_kept_read_answers_what_a_read_of_it_would() {
        let kept = KeptHistory::new(store_read(at(3)), at(3), STATE, at(50)).unwrap();
        let stale = |h| {
            Freshness::new(
                BTreeMap::from([("aws".to_owned(), at(h))]),
                BTreeMap::from([("aws".to_owned(), std::time::Duration::from_secs(3600))]),
                at(50),
            )
        };
        for (since, fresh) in [
            (at(3), stale(49)),
            (at(3) + Duration::minutes(30), stale(20)),
            (at(20), stale(49)),
            (at(31), stale(49)),
            (at(47), stale(49)),
            (at(60), stale(49)),
        ] {
            assert!(kept.holds(since));
            let q = SpotQuery {
                instance_type: "p5.48xlarge".to_owned(),
                provider: None,
                region: None,
                zone: None,
                since,
                max_observations: Some(1000),
            };
            let answered = kept.answer(&q, &fresh).unwrap();
            let expected =
                serde_json::to_vec(&catalog::spot_history_of(store_read(since), &q, &fresh))
                    .unwrap();
            assert_eq!(
                String::from_utf8(answered).unwrap(),
                String::from_utf8(expected).unwrap(),
                "since {since}"
            );
        }
        assert!(!kept.holds(at(2)));
    }

    const STATE: Generation = Generation {
        data: 10,
        list_prices: 4,
        spot: 6,
        spot_prunes: 2,
        spot_pruned_before: 0,
    };

    fn query(since: DateTime<Utc>) -> SpotQuery {
        SpotQuery {
            instance_type: "p5.48xlarge".to_owned(),
            provider: None,
            region: None,
            zone: None,
            since,
            max_observations: None,
        }
    }

    #[test]
    fn a_read_extended_by_what_syncs_appended_answers_what_a_read_of_all_would() {
        // Read at hour 40; then syncs append each series' later points.
        let read: Vec<SpotSeriesPoints> = store_read(at(3))
            .into_iter()
            .map(|mut s| {
                s.points.retain(|p| p.observed_at <= at(40));
                s
            })
            .collect();
        let kept = KeptHistory::new(read, at(3), STATE, at(40)).unwrap();
        let newest = kept.newest();
        assert_eq!(newest.len(), 3);
        let appended: HashMap<i64, Vec<SpotPrice>> = store_read(at(3))
            .into_iter()
            .filter_map(|s| {
                let after = newest[&s.series_id];
                let points: Vec<SpotPrice> = s
                    .points
                    .into_iter()
                    .filter(|p| p.observed_at > after)
                    .collect();
                (!points.is_empty()).then_some((s.series_id, points))
            })
            .collect();
        assert_eq!(appended.len(), 2, "the zone of one point gets none");
        let later = Generation {
            data: 13,
            spot: 9,
            ..STATE
        };
        assert!(kept.extends_to(later, at(41)));
        let extended = kept.extended(&appended, later).unwrap();
        assert!(extended.is_current_in(later) && !kept.is_current_in(later));
        let fresh = Freshness::new(BTreeMap::new(), BTreeMap::new(), at(50));
        for since in [at(3), at(39), at(40), at(45)] {
            let expected = catalog::spot_history_of(store_read(since), &query(since), &fresh);
            assert_eq!(
                String::from_utf8(extended.answer(&query(since), &fresh).unwrap()).unwrap(),
                serde_json::to_string(&expected).unwrap(),
                "since {since}"
            );
        }
        // The series nothing was appended to is shared, not copied.
        assert!(Arc::ptr_eq(&kept.series[2], &extended.series[2]));
        assert_eq!(extended.read_at, kept.read_at);
    }

    #[test]
    fn only_a_state_that_spot_writes_appended_to_and_a_recent_read_extend() {
        let kept = KeptHistory::new(store_read(at(3)), at(3), STATE, at(40)).unwrap();
        let moved = |data, list_prices, spot| Generation {
            data: STATE.data + data,
            list_prices: STATE.list_prices + list_prices,
            spot: STATE.spot + spot,
            ..STATE
        };
        assert!(kept.extends_to(moved(1, 0, 1), at(40)));
        assert!(kept.extends_to(moved(5, 0, 5), at(40) + Duration::hours(23)));
        // A day after the whole read, it is read again.
        assert!(!kept.extends_to(moved(1, 0, 1), at(40) + Duration::hours(24)));
        // A prune of spot history before the read's window changed nothing
        // it holds; one within it did.
        let pruned = |before: DateTime<Utc>| Generation {
            spot_prunes: STATE.spot_prunes + 1,
            spot_pruned_before: before.timestamp_micros(),
            ..moved(2, 0, 1)
        };
        assert!(kept.extends_to(pruned(at(3)), at(40)));
        assert!(!kept.extends_to(pruned(at(4)), at(40)));
        // Any other change, a write before a series' newest, a sync of list
        // prices.
        assert!(!kept.extends_to(moved(1, 0, 0), at(40)));
        assert!(!kept.extends_to(moved(2, 0, 1), at(40)));
        assert!(!kept.extends_to(moved(1, 1, 1), at(40)));
        // An older state is not one to extend to.
        assert!(!kept.extends_to(moved(-1, 0, -1), at(40)));
        assert!(kept.is_current_in(moved(-1, 0, -1)) && kept.is_current_in(STATE));
    }

    #[test]
    fn a_window_of_more_observations_than_asked_for_is_refused() {
        let kept = KeptHistory::new(store_read(at(0)), at(0), STATE, at(50)).unwrap();
        let fresh = Freshness::new(BTreeMap::new(), BTreeMap::new(), at(50));
        let q = |since, limit| SpotQuery {
            instance_type: "p5.48xlarge".to_owned(),
            provider: None,
            region: None,
            zone: None,
            since,
            max_observations: Some(limit),
        };
        // From hour 40, with the point in force then: 9 of the first zone,
        // 5 of the second, the third zone's one.
        assert!(kept.answer(&q(at(40), 15), &fresh).is_ok());
        assert!(matches!(
            kept.answer(&q(at(40), 14), &fresh),
            Err(StoreError::TooLarge { limit: 14, .. })
        ));
    }
}
