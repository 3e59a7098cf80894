//! Reading JSON fields that APIs send in more than one form.

use serde::{Deserialize, Deserializer};

/// A number sent as a JSON number or a numeric string (`"100.000000"`);
/// null, absent or an empty string is `None`.
///
/// # Errors
/// A string that is not a number.
pub fn number_or_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Value {
        Number(f64),
        Text(String),
    }
    match Option::<Value>::deserialize(d)? {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n)),
        Some(Value::Text(t)) if t.trim().is_empty() => Ok(None),
        Some(Value::Text(t)) => t
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| serde::de::Error::custom(format!("`{t}` is not a number"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Field {
        #[serde(default, deserialize_with = "number_or_string")]
        v: Option<f64>,
    }

    #[test]
    fn numbers_come_as_numbers_or_strings() {
        let read = |s: &str| serde_json::from_str::<Field>(s).map(|f| f.v);
        assert_eq!(read(r#"{"v": 1.5}"#).unwrap(), Some(1.5));
        assert_eq!(read(r#"{"v": "100.000000"}"#).unwrap(), Some(100.0));
        assert_eq!(read(r#"{"v": ""}"#).unwrap(), None);
        assert_eq!(read(r#"{"v": null}"#).unwrap(), None);
        assert_eq!(read("{}").unwrap(), None);
        assert!(read(r#"{"v": "n/a"}"#).is_err());
    }
}
