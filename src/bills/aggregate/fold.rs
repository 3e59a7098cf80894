//! Charges folded into a billing period's aggregates, row by row.

use super::*;

/// Spend rows before their strings are resolved, keyed by interned ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct SpendKey {
    day: i64,
    provider: u32,
    account: u32,
    team: u32,
    service: u32,
    category: Category,
    gpu: bool,
    currency: u32,
}

/// Usage rows before their strings are resolved, keyed by interned ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct UsageIds {
    start: i64,
    provider: u32,
    account: u32,
    team: u32,
    region: u32,
    instance_type: u32,
    gpu_model: u32,
    price_kind: UsageKind,
    currency: u32,
}

/// Interned strings: repeated texts (accounts, teams, categories) cost a
/// hash lookup per row, not an allocation.
#[derive(Default)]
struct Names {
    ids: HashMap<Box<str>, u32>,
    names: Vec<Box<str>>,
}

impl Names {
    pub(super) fn id(&mut self, s: &str) -> u32 {
        if let Some(id) = self.ids.get(s) {
            return *id;
        }
        let id = u32::try_from(self.names.len()).unwrap_or(u32::MAX);
        self.names.push(s.into());
        self.ids.insert(s.into(), id);
        id
    }

    fn name(&self, id: u32) -> &str {
        self.names.get(id as usize).map_or("", |s| s)
    }
}

#[derive(Default)]
struct Open {
    data: PeriodData,
    usage: HashMap<UsageIds, UsageValue>,
    spend: HashMap<SpendKey, (f64, f64)>,
    corrections: BTreeMap<(String, String), Correction>,
    /// Rows per interned provider name.
    provider_rows: HashMap<u32, u64>,
}

/// Folds charges into periods.
pub struct Aggregator<'a> {
    source: &'a BillSource,
    gpus: &'a GpuTables,
    names: Names,
    periods: Vec<Open>,
    /// Periods by (interned billing account, start).
    index: HashMap<(u32, i64), usize>,
    /// What each instance type seen so far is, without the row's hint, per
    /// [`provider_slot`].
    placed: [HashMap<Box<str>, Placement<'a>>; 1 + BillProvider::ALL.len()],
}

/// Where a provider's memo of instance types is: another provider's
/// first, then each cloud's.
fn provider_slot(provider: Option<BillProvider>) -> usize {
    provider.map_or(0, |p| 1 + p as usize)
}

/// What a row that is neither a commitment's nor a correction adds beyond
/// its amounts: its period, the day-less key of its spend, and for GPU
/// usage the hour-less key of its usage. Every row with the same text adds
/// the same (see [`Aggregator::add_plain`]).
#[derive(Debug, Clone, Copy)]
pub struct Plain {
    period: usize,
    period_start: i64,
    period_end: i64,
    spend: SpendKey,
    /// A GPU usage row's hourly key, unit and GPUs per instance.
    usage: Option<(UsageIds, TimeUnit, Option<f64>)>,
}

impl Plain {
    /// Whether a row of this billing period, with a quantity or not, adds
    /// what this one did.
    #[must_use]
    pub fn fits(&self, period_start: i64, period_end: i64, quantity: Option<f64>) -> bool {
        self.period_start == period_start
            && self.period_end == period_end
            && (self.usage.is_none() || quantity.is_some())
    }
}

/// Instance types remembered before the memo starts over.
const PLACED_LIMIT: usize = 100_000;

/// What a charge is, as GPU usage.
enum Gpu<'g> {
    Usage {
        instance_type: &'g str,
        gpu_model: &'g str,
        /// The row's quantity in hours.
        hours: f64,
        /// GPUs per instance; `None` for a per-GPU SKU (see [`usage_hours`]).
        gpus: Option<f64>,
    },
    /// Cost of GPU usage billed on another line (a negation).
    Cost {
        instance_type: &'g str,
        gpu_model: &'g str,
    },
    Unmapped(String),
    No,
}

impl<'a> Aggregator<'a> {
    pub fn new(source: &'a BillSource, gpus: &'a GpuTables) -> Self {
        Self {
            source,
            gpus,
            names: Names::default(),
            periods: Vec::new(),
            index: HashMap::default(),
            placed: Default::default(),
        }
    }

    /// The (billing account, period name) of every period seen so far.
    pub fn keys(&self) -> BTreeSet<(String, String)> {
        self.periods
            .iter()
            .map(|o| (o.data.billing_account.clone(), o.data.period.clone()))
            .collect()
    }

    /// Adds one charge; what it added, when it is a plain row.
    ///
    /// # Errors
    /// A usage row that spans more than [`MAX_SPREAD_HOURS`].
    pub fn add(&mut self, ch: &Charge<'_>) -> Result<Option<Plain>, String> {
        let cloud = ch.provider.cloud();
        let placed = ch
            .instance_type
            .as_deref()
            .map(|t| self.place(cloud, t, ch.gpu_count));
        let gpu = self.gpu(ch, placed);
        let names_gpu = ch
            .sku_id
            .is_some_and(|s| self.gpus.of(cloud).sku(s).is_some())
            || matches!(placed, Some(Placement::Gpu(_)));
        let team = ch
            .team
            .as_deref()
            .or_else(|| {
                ch.sub_account
                    .and_then(|a| self.source.teams_by_account.get(a))
                    .map(String::as_str)
            })
            .unwrap_or(UNALLOCATED);
        let at = self.period_at(ch.billing_account, ch.period_start, ch.period_end);
        let provider = self.names.id(ch.provider.name());
        let period = &mut self.periods[at];
        *period.provider_rows.entry(provider).or_default() += 1;
        let d = &mut period.data;
        d.rows += 1;
        d.period_end = d.period_end.max(ch.period_end);
        // Looked up by the borrowed text: a key is allocated once per currency.
        if !d.totals.contains_key(ch.currency) {
            d.totals.insert(
                ch.currency.to_owned(),
                Total {
                    currency: ch.currency.to_owned(),
                    ..Total::default()
                },
            );
        }
        if let Some(total) = d.totals.get_mut(ch.currency) {
            total.rows += 1;
            total.billed_cost += ch.billed;
            total.effective_cost += ch.effective;
        }

        let names = &mut self.names;
        let spend_key = SpendKey {
            day: floor_day(ch.start.max(ch.period_start)),
            provider,
            account: names.id(ch.sub_account.unwrap_or_default()),
            team: names.id(team),
            service: names.id(ch.service_category.unwrap_or_default()),
            category: ch.category,
            gpu: names_gpu,
            currency: names.id(ch.currency),
        };
        let s = period.spend.entry(spend_key).or_default();
        s.0 += ch.billed;
        s.1 += ch.effective;
        let plain = !ch.correction
            && !ch.cost_only
            && ch.commitment.is_none()
            && matches!(gpu, Gpu::No | Gpu::Usage { .. });
        let mut plain_usage = None;

        if ch.correction {
            let corrects = period_name(ch.start);
            let c = period
                .corrections
                .entry((corrects.clone(), ch.currency.to_owned()))
                .or_insert_with(|| Correction {
                    corrects,
                    currency: ch.currency.to_owned(),
                    rows: 0,
                    billed_cost: 0.0,
                    effective_cost: 0.0,
                });
            c.rows += 1;
            c.billed_cost += ch.billed;
            c.effective_cost += ch.effective;
        }

        let mut covered = (0.0, 0.0);
        match gpu {
            Gpu::Usage {
                instance_type,
                gpu_model,
                hours,
                gpus,
            } => {
                let kind = price_kind(cloud, ch);
                let (instance_hours, gpu_hours) = usage_hours(hours, gpus);
                d.gpu_rows += 1;
                d.gpu_hours += gpu_hours;
                covered = (instance_hours.unwrap_or(0.0), gpu_hours);
                let key = UsageIds::of(names, ch, team, instance_type, gpu_model, kind);
                plain_usage = ch.unit.map(|unit| (key, unit, gpus));
                add_usage(&mut period.usage, ch, key, instance_hours, gpu_hours)?;
            }
            Gpu::Cost {
                instance_type,
                gpu_model,
            } => {
                let kind = price_kind(cloud, ch);
                let key = UsageIds::of(names, ch, team, instance_type, gpu_model, kind);
                add_usage(&mut period.usage, ch, key, Some(0.0), 0.0)?;
            }
            Gpu::Unmapped(name) => *d.unmapped.entry(name).or_default() += 1,
            Gpu::No => {
                if ch.category == Category::Usage
                    && !ch.unused
                    && let Some(h) = hours(ch)
                {
                    covered.0 = h;
                }
            }
        }

        if let Some(cu) = &ch.commitment {
            let c = d
                .commitments
                .entry(cu.id.to_owned())
                .or_insert_with(|| Commitment {
                    id: cu.id.to_owned(),
                    provider: ch.provider.name().to_owned(),
                    kind: None,
                    category: None,
                    unit: None,
                    regions: BTreeSet::new(),
                    instance_types: BTreeSet::new(),
                    untyped_cover: false,
                    first_seen: ch.start,
                    last_seen: None,
                    currency: ch.currency.to_owned(),
                });
            c.kind = c.kind.or(cu.kind);
            if c.category.is_none() {
                c.category = cu.category.map(str::to_owned);
            }
            if c.unit.is_none() {
                c.unit = cu.unit.as_deref().map(str::to_owned);
            }
            if let Some(r) = ch.region
                && !c.regions.contains(r)
            {
                c.regions.insert(r.to_owned());
            }
            c.first_seen = c.first_seen.min(ch.start);
            if cu.is_use {
                c.last_seen = Some(c.last_seen.map_or(ch.end, |l| l.max(ch.end)));
                if cu.covers {
                    match ch.instance_type.as_deref() {
                        Some(t) => {
                            let t = match placed {
                                Some(Placement::Gpu(g)) => g.instance_type.as_str(),
                                _ => t,
                            };
                            if !c.instance_types.contains(t) {
                                c.instance_types.insert(t.to_owned());
                            }
                        }
                        None => c.untyped_cover = true,
                    }
                }
                let id = cu.id;
                let hours_map = &mut d.commitment_hours;
                let covers = cu.covers;
                spread(ch.start, ch.end, |hour, share| {
                    let h = hours_map.entry((id.to_owned(), hour)).or_default();
                    if let Some(q) = cu.used_quantity {
                        h.used_quantity = Some(h.used_quantity.unwrap_or(0.0) + q * share);
                    }
                    if let Some(q) = cu.unused_quantity {
                        h.unused_quantity = Some(h.unused_quantity.unwrap_or(0.0) + q * share);
                    }
                    h.used_cost += cu.used_cost * share;
                    h.unused_cost += cu.unused_cost * share;
                    if covers {
                        h.covered_instance_hours += covered.0 * share;
                        h.covered_gpu_hours += covered.1 * share;
                    }
                })?;
            }
        }
        Ok(plain.then_some(Plain {
            period: at,
            period_start: ch.period_start,
            period_end: ch.period_end,
            spend: spend_key,
            usage: plain_usage,
        }))
    }

    /// Adds a row with the same text as the one `plain` came from, which
    /// [`Plain::fits`]: exactly what [`Aggregator::add`] would, from its
    /// times, quantity and costs alone.
    ///
    /// # Errors
    /// A usage row that spans more than [`MAX_SPREAD_HOURS`].
    pub fn add_plain(&mut self, plain: &Plain, row: &Amounts) -> Result<(), String> {
        let Amounts {
            start,
            end,
            billed,
            effective,
            quantity,
            ..
        } = *row;
        let period = &mut self.periods[plain.period];
        *period
            .provider_rows
            .entry(plain.spend.provider)
            .or_default() += 1;
        let d = &mut period.data;
        d.rows += 1;
        if let Some(total) = d.totals.get_mut(self.names.name(plain.spend.currency)) {
            total.rows += 1;
            total.billed_cost += billed;
            total.effective_cost += effective;
        }
        let s = period
            .spend
            .entry(SpendKey {
                day: floor_day(start.max(plain.period_start)),
                ..plain.spend
            })
            .or_default();
        s.0 += billed;
        s.1 += effective;
        if let Some((key, unit, gpus)) = plain.usage
            && let Some(hours) = quantity.and_then(|q| in_hours(q, unit))
        {
            let (instance_hours, gpu_hours) = usage_hours(hours, gpus);
            d.gpu_rows += 1;
            d.gpu_hours += gpu_hours;
            let cost = (start, end, billed, effective);
            add_usage_at(&mut period.usage, cost, key, instance_hours, gpu_hours)?;
        }
        Ok(())
    }

    /// The index of a period, opened when new.
    fn period_at(&mut self, billing_account: &str, start: i64, end: i64) -> usize {
        let account = self.names.id(billing_account);
        if let Some(at) = self.index.get(&(account, start)) {
            return *at;
        }
        self.periods.push(Open {
            data: PeriodData {
                billing_account: billing_account.to_owned(),
                period: period_name(start),
                period_start: start,
                period_end: end,
                ..PeriodData::default()
            },
            ..Open::default()
        });
        self.index.insert((account, start), self.periods.len() - 1);
        self.periods.len() - 1
    }

    /// Adds another aggregator's rows (a worker's share of a file), as
    /// [`Aggregator::absorb`] does; one that has none yet takes the other
    /// whole, sparing the round trip of every key through its strings.
    pub fn merge(&mut self, other: Self) {
        if self.periods.is_empty() {
            *self = other;
        } else {
            self.absorb(other.finish());
        }
    }

    /// Adds what another aggregator made of other rows (a worker's share of
    /// a file): every sum, set and count, as if its rows had come here.
    fn absorb(&mut self, periods: Vec<PeriodData>) {
        for p in periods {
            let at = self.period_at(&p.billing_account, p.period_start, p.period_end);
            let names = &mut self.names;
            let open = &mut self.periods[at];
            for (provider, n) in &p.provider_rows {
                *open.provider_rows.entry(names.id(provider)).or_default() += n;
            }
            let d = &mut open.data;
            d.rows += p.rows;
            d.gpu_rows += p.gpu_rows;
            d.gpu_hours += p.gpu_hours;
            d.period_end = d.period_end.max(p.period_end);
            for (currency, t) in p.totals {
                let mine = d.totals.entry(currency).or_insert_with(|| Total {
                    currency: t.currency.clone(),
                    ..Total::default()
                });
                mine.rows += t.rows;
                mine.billed_cost += t.billed_cost;
                mine.effective_cost += t.effective_cost;
            }
            for (k, v) in p.usage {
                let key = UsageIds {
                    start: k.start,
                    provider: names.id(&k.provider),
                    account: names.id(&k.account),
                    team: names.id(&k.team),
                    region: names.id(&k.region),
                    instance_type: names.id(&k.instance_type),
                    gpu_model: names.id(&k.gpu_model),
                    price_kind: k.price_kind,
                    currency: names.id(&k.currency),
                };
                let mine = open.usage.entry(key).or_default();
                if let Some(h) = v.instance_hours {
                    mine.instance_hours = Some(mine.instance_hours.unwrap_or(0.0) + h);
                }
                mine.gpu_hours += v.gpu_hours;
                mine.billed_cost += v.billed_cost;
                mine.effective_cost += v.effective_cost;
            }
            for s in p.spend {
                let key = SpendKey {
                    day: s.day,
                    provider: names.id(&s.provider),
                    account: names.id(&s.account),
                    team: names.id(&s.team),
                    service: names.id(&s.service_category),
                    category: Category::parse(&s.charge_category).unwrap_or(Category::Adjustment),
                    gpu: s.gpu,
                    currency: names.id(&s.currency),
                };
                let mine = open.spend.entry(key).or_default();
                mine.0 += s.billed_cost;
                mine.1 += s.effective_cost;
            }
            for (id, c) in p.commitments {
                match d.commitments.get_mut(&id) {
                    None => {
                        d.commitments.insert(id, c);
                    }
                    Some(mine) => {
                        mine.kind = mine.kind.or(c.kind);
                        if mine.category.is_none() {
                            mine.category = c.category;
                        }
                        if mine.unit.is_none() {
                            mine.unit = c.unit;
                        }
                        mine.regions.extend(c.regions);
                        mine.instance_types.extend(c.instance_types);
                        mine.untyped_cover |= c.untyped_cover;
                        mine.first_seen = mine.first_seen.min(c.first_seen);
                        mine.last_seen = match (mine.last_seen, c.last_seen) {
                            (Some(a), Some(b)) => Some(a.max(b)),
                            (a, b) => a.or(b),
                        };
                    }
                }
            }
            for (key, h) in p.commitment_hours {
                let mine = d.commitment_hours.entry(key).or_default();
                let add = |a: Option<f64>, b: Option<f64>| match (a, b) {
                    (None, None) => None,
                    (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
                };
                mine.used_quantity = add(mine.used_quantity, h.used_quantity);
                mine.unused_quantity = add(mine.unused_quantity, h.unused_quantity);
                mine.used_cost += h.used_cost;
                mine.unused_cost += h.unused_cost;
                mine.covered_instance_hours += h.covered_instance_hours;
                mine.covered_gpu_hours += h.covered_gpu_hours;
            }
            for c in p.corrections {
                let mine = open
                    .corrections
                    .entry((c.corrects.clone(), c.currency.clone()))
                    .or_insert_with(|| Correction {
                        rows: 0,
                        billed_cost: 0.0,
                        effective_cost: 0.0,
                        ..c.clone()
                    });
                mine.rows += c.rows;
                mine.billed_cost += c.billed_cost;
                mine.effective_cost += c.effective_cost;
            }
            for (t, n) in p.unmapped {
                *d.unmapped.entry(t).or_default() += n;
            }
        }
    }

    /// The periods with their spend and corrections resolved.
    pub fn finish(self) -> Vec<PeriodData> {
        let names = self.names;
        let mut out: Vec<PeriodData> = self
            .periods
            .into_iter()
            .map(|mut o| {
                let mut spend: Vec<SpendDay> = o
                    .spend
                    .into_iter()
                    .map(|(k, (billed, effective))| SpendDay {
                        day: k.day,
                        provider: names.name(k.provider).to_owned(),
                        account: names.name(k.account).to_owned(),
                        team: names.name(k.team).to_owned(),
                        service_category: names.name(k.service).to_owned(),
                        charge_category: k.category.as_str().to_owned(),
                        gpu: k.gpu,
                        currency: names.name(k.currency).to_owned(),
                        billed_cost: billed,
                        effective_cost: effective,
                    })
                    .collect();
                spend.sort_by(|a, b| {
                    (
                        a.day,
                        &a.provider,
                        &a.account,
                        &a.team,
                        &a.service_category,
                        &a.charge_category,
                        a.gpu,
                        &a.currency,
                    )
                        .cmp(&(
                            b.day,
                            &b.provider,
                            &b.account,
                            &b.team,
                            &b.service_category,
                            &b.charge_category,
                            b.gpu,
                            &b.currency,
                        ))
                });
                o.data.spend = spend;
                o.data.usage = o
                    .usage
                    .into_iter()
                    .map(|(k, v)| (k.key(&names), v))
                    .collect();
                o.data.corrections = o.corrections.into_values().collect();
                o.data.provider_rows = o
                    .provider_rows
                    .into_iter()
                    .map(|(p, n)| (names.name(p).to_owned(), n))
                    .collect();
                o.data
            })
            .collect();
        out.sort_by(|a, b| {
            (&a.billing_account, a.period_start).cmp(&(&b.billing_account, b.period_start))
        });
        out
    }

    /// What an instance type is, remembered per type.
    fn place(
        &mut self,
        provider: Option<BillProvider>,
        instance_type: &str,
        hint: Option<f64>,
    ) -> Placement<'a> {
        let placed = &mut self.placed[provider_slot(provider)];
        let known = match placed.get(instance_type) {
            Some(p) => *p,
            None => {
                let p = self.gpus.of(provider).place(instance_type, None);
                if placed.len() >= PLACED_LIMIT {
                    placed.clear();
                }
                placed.insert(instance_type.into(), p);
                p
            }
        };
        match known {
            Placement::NotGpu if hint.is_some_and(|n| n > 0.0) => Placement::Unmapped,
            p => p,
        }
    }

    fn gpu(&self, ch: &Charge<'_>, placed: Option<Placement<'a>>) -> Gpu<'a> {
        if ch.cost_only {
            return match placed {
                Some(Placement::Gpu(g)) => Gpu::Cost {
                    instance_type: &g.instance_type,
                    gpu_model: &g.gpu_model,
                },
                _ => Gpu::No,
            };
        }
        if ch.category != Category::Usage || ch.correction || ch.unused {
            return Gpu::No;
        }
        let Some(quantity) = hours(ch) else {
            return Gpu::No;
        };
        let provider = ch.provider.cloud();
        if matches!(provider, Some(BillProvider::Gcp | BillProvider::Oci)) {
            // Per-GPU SKUs are the only GPU usage there: a GCP machine's core
            // and RAM rows name its a2/a3 type, and counting them too would
            // count the GPUs twice.
            return match ch.sku_id.and_then(|s| self.gpus.of(provider).sku(s)) {
                Some(g) => Gpu::Usage {
                    instance_type: &g.instance_type,
                    gpu_model: &g.gpu_model,
                    hours: quantity,
                    gpus: None,
                },
                None if says_gpu(ch) => Gpu::Unmapped(unmapped_name(ch, "unknown SKU")),
                None => Gpu::No,
            };
        }
        match (ch.instance_type.as_deref(), placed) {
            (Some(t), Some(placed)) => match placed {
                Placement::Gpu(g) => Gpu::Usage {
                    instance_type: &g.instance_type,
                    gpu_model: &g.gpu_model,
                    hours: quantity,
                    gpus: Some(g.gpu_count.unwrap_or(1.0)),
                },
                Placement::Unmapped => Gpu::Unmapped(t.to_owned()),
                Placement::NotGpu => Gpu::No,
            },
            _ if says_gpu(ch) => Gpu::Unmapped(unmapped_name(ch, "unknown instance type")),
            _ => Gpu::No,
        }
    }
}

/// Whether an untyped row says it is GPU usage: a GPU count, or a
/// description that names GPUs.
fn says_gpu(ch: &Charge<'_>) -> bool {
    ch.gpu_count.is_some_and(|n| n > 0.0) || ch.says_gpu
}

/// What an untyped GPU row is reported under: its description, which a
/// person reads, else its SKU, else `otherwise`.
fn unmapped_name(ch: &Charge<'_>, otherwise: &str) -> String {
    ch.description
        .or(ch.sku_id)
        .map_or(otherwise, str::trim)
        .to_owned()
}

impl UsageIds {
    fn of(
        names: &mut Names,
        ch: &Charge<'_>,
        team: &str,
        instance_type: &str,
        gpu_model: &str,
        price_kind: UsageKind,
    ) -> Self {
        Self {
            start: 0,
            provider: names.id(ch.provider.name()),
            account: names.id(ch.sub_account.unwrap_or_default()),
            team: names.id(team),
            region: names.id(ch.region.unwrap_or_default()),
            instance_type: names.id(instance_type),
            gpu_model: names.id(gpu_model),
            price_kind,
            currency: names.id(ch.currency),
        }
    }

    fn key(&self, names: &Names) -> UsageKey {
        UsageKey {
            start: self.start,
            provider: names.name(self.provider).to_owned(),
            account: names.name(self.account).to_owned(),
            team: names.name(self.team).to_owned(),
            region: names.name(self.region).to_owned(),
            instance_type: names.name(self.instance_type).to_owned(),
            gpu_model: names.name(self.gpu_model).to_owned(),
            price_kind: self.price_kind,
            currency: names.name(self.currency).to_owned(),
        }
    }
}

/// Spreads a row's hours and costs over the hours it spans.
fn add_usage(
    usage: &mut HashMap<UsageIds, UsageValue>,
    ch: &Charge<'_>,
    key: UsageIds,
    instance_hours: Option<f64>,
    gpu_hours: f64,
) -> Result<(), String> {
    let cost = (ch.start, ch.end, ch.billed, ch.effective);
    add_usage_at(usage, cost, key, instance_hours, gpu_hours)
}

/// [`add_usage`] of a row's `(start, end, billed, effective)`.
fn add_usage_at(
    usage: &mut HashMap<UsageIds, UsageValue>,
    (start, end, billed, effective): (i64, i64, f64, f64),
    key: UsageIds,
    instance_hours: Option<f64>,
    gpu_hours: f64,
) -> Result<(), String> {
    spread(start, end, |hour, share| {
        let v = usage.entry(UsageIds { start: hour, ..key }).or_default();
        if let Some(h) = instance_hours {
            v.instance_hours = Some(v.instance_hours.unwrap_or(0.0) + h * share);
        }
        v.gpu_hours += gpu_hours * share;
        v.billed_cost += billed * share;
        v.effective_cost += effective * share;
    })
}

/// A usage row's instance-hours and GPU-hours from its hours: each hour of
/// an instance counts its GPUs; a per-GPU SKU's hours are GPU-hours.
fn usage_hours(hours: f64, gpus: Option<f64>) -> (Option<f64>, f64) {
    match gpus {
        Some(n) => (Some(hours), hours * n),
        None => (None, hours),
    }
}

/// The row's quantity in hours, when it is measured in time.
fn hours(ch: &Charge<'_>) -> Option<f64> {
    in_hours(ch.quantity?, ch.unit?)
}

/// A quantity in hours, when its unit is one of time.
fn in_hours(q: f64, unit: TimeUnit) -> Option<f64> {
    match unit {
        TimeUnit::Hours => Some(q),
        TimeUnit::Seconds => Some(q / 3600.0),
        TimeUnit::Other => None,
    }
}

fn price_kind(provider: Option<BillProvider>, ch: &Charge<'_>) -> UsageKind {
    if ch.spot || ch.pricing == Some(Pricing::Dynamic) {
        return UsageKind::Spot;
    }
    let committed =
        ch.pricing == Some(Pricing::Committed) || ch.commitment.as_ref().is_some_and(|c| c.covers);
    if !committed {
        return UsageKind::OnDemand;
    }
    match ch.commitment.as_ref().and_then(|c| c.kind) {
        Some(k) => k.usage_kind(),
        None if provider == Some(BillProvider::Gcp) => UsageKind::Commit,
        None => UsageKind::Reserved,
    }
}

/// Calls `f(hour, share)` for every hour `[start, end)` touches, with the
/// share of the span in it; a span of no length counts whole in its hour.
fn spread(start: i64, end: i64, mut f: impl FnMut(i64, f64)) -> Result<(), String> {
    if end <= start {
        f(floor_hour(start), 1.0);
        return Ok(());
    }
    if end - start > MAX_SPREAD_HOURS * HOUR {
        return Err(format!(
            "a usage row spans {} hours; more than a month ({MAX_SPREAD_HOURS}) is not usage gpuplan can spread",
            (end - start) / HOUR
        ));
    }
    #[allow(clippy::cast_precision_loss)]
    let span = (end - start) as f64;
    let mut hour = floor_hour(start);
    while hour < end {
        let overlap = end.min(hour + HOUR) - start.max(hour);
        #[allow(clippy::cast_precision_loss)]
        f(hour, overlap as f64 / span);
        hour += HOUR;
    }
    Ok(())
}
