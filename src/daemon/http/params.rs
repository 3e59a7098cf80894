//! Query-string parsing for the API: repeated or comma-separated values, and a
//! 400 that names the parameter for anything unknown or malformed.

use std::collections::BTreeMap;

use super::error::ApiError;

/// The query's values by parameter, each list split on commas.
pub struct Params {
    values: BTreeMap<String, Vec<String>>,
}

impl Params {
    /// Parses `query`, refusing parameters not in `known`.
    ///
    /// # Errors
    /// A 400 naming the first unknown parameter.
    pub fn parse(query: Option<&str>, known: &[&str]) -> Result<Self, ApiError> {
        let mut values: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
            if !known.contains(&key.as_ref()) {
                return Err(ApiError::bad_parameter(
                    &key,
                    format!("unknown parameter; known: {}", known.join(", ")),
                ));
            }
            let list = values.entry(key.into_owned()).or_default();
            list.extend(
                value
                    .split(',')
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_owned),
            );
        }
        Ok(Self { values })
    }

    /// Every value given for `key`.
    #[must_use]
    pub fn all(&self, key: &str) -> Vec<String> {
        self.values.get(key).cloned().unwrap_or_default()
    }

    /// The single value of `key`, if given.
    ///
    /// # Errors
    /// A 400 when it was given more than once.
    pub fn one(&self, key: &str) -> Result<Option<String>, ApiError> {
        match self.values.get(key).map(Vec::as_slice) {
            None | Some([]) => Ok(None),
            Some([v]) => Ok(Some(v.clone())),
            Some(_) => Err(ApiError::bad_parameter(key, "give it once")),
        }
    }

    /// The single value of `key` parsed as `T`.
    ///
    /// # Errors
    /// A 400 naming `key` with `what` it should have been.
    pub fn parsed<T: std::str::FromStr>(
        &self,
        key: &str,
        what: &str,
    ) -> Result<Option<T>, ApiError> {
        self.one(key)?
            .map(|v| {
                v.parse::<T>()
                    .map_err(|_| ApiError::bad_parameter(key, format!("`{v}` is not {what}")))
            })
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Any query string: parsed values or a 400 naming a parameter.
        #[test]
        fn any_query_parses_or_names_its_parameter(query in "\\PC{0,64}", raw in proptest::collection::vec(proptest::num::u8::ANY, 0..48)) {
            let bytes = String::from_utf8_lossy(&raw).into_owned();
            for q in [query.clone(), bytes, format!("limit={query}&since={query}")] {
                match Params::parse(Some(&q), &["limit", "since", "gpu"]) {
                    Ok(p) => {
                        let _ = p.all("gpu");
                        for (key, r) in [("limit", p.parsed::<u32>("limit", "a count").err()), ("since", p.one("since").err())] {
                            if let Some(e) = r {
                                proptest::prop_assert_eq!(e.parameter.as_deref(), Some(key));
                            }
                        }
                    }
                    Err(e) => proptest::prop_assert!(e.parameter.is_some()),
                }
            }
        }
    }

    #[test]
    fn values_repeat_or_split_on_commas_and_unknown_keys_are_refused() {
        let p = Params::parse(Some("gpu=H100,A100&gpu=L4&max=2.5"), &["gpu", "max"]).unwrap();
        assert_eq!(p.all("gpu"), vec!["H100", "A100", "L4"]);
        assert_eq!(p.parsed::<f64>("max", "a number").unwrap(), Some(2.5));
        let err = Params::parse(Some("gpus=H100"), &["gpu"]).err().unwrap();
        assert_eq!(err.parameter.as_deref(), Some("gpus"));
        let err = p.parsed::<u32>("max", "a count").err().unwrap();
        assert!(err.message.contains("`2.5` is not a count"));
    }
}
