//! `[fx]`: exchange rates for sources that price in another currency than
//! USD, and for showing prices in one. Each rate is units of the currency per
//! US dollar (`CNY = 7.1`), as central banks quote them.

use gpuplan_providers::Currency;

use super::*;

/// The configured rates; USD is always 1.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FxRates(BTreeMap<String, f64>);

impl FxRates {
    /// `code` (`CNY`, `usd`) with its rate, if it is USD or configured.
    #[must_use]
    pub fn currency(&self, code: &str) -> Option<Currency> {
        let code = code.trim().to_ascii_uppercase();
        if code == "USD" {
            return Some(Currency::usd());
        }
        self.0.get(&code).map(|&per_usd| Currency { code, per_usd })
    }

    /// Every currency a price can be shown in, for error messages.
    #[must_use]
    pub fn known(&self) -> String {
        std::iter::once("USD")
            .chain(self.0.keys().map(String::as_str))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(super) fn validate(raw: BTreeMap<String, f64>, c: &mut Checker) -> FxRates {
    let mut rates = BTreeMap::new();
    for (code, rate) in raw {
        let path = format!("fx.{code}");
        if code.len() != 3 || !code.chars().all(|ch| ch.is_ascii_uppercase()) {
            c.fail(
                &path,
                "a currency is its three-letter ISO 4217 code in capitals, like CNY",
            );
        } else if code == "USD" {
            c.fail(&path, "USD is the catalog's own unit; its rate is always 1");
        } else if !(rate.is_finite() && rate > 0.0) {
            c.fail(
                &path,
                format!("{rate} is not a rate (units of {code} per US dollar, above 0)"),
            );
        } else {
            rates.insert(code, rate);
        }
    }
    FxRates(rates)
}
