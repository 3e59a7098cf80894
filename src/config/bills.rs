//! `[bills.NAME]`: billing exports (FOCUS, AWS CUR 2.0) to read usage, spend
//! and commitments from.

use super::*;
use crate::bills::{BillFormat, BillLocation, BillProvider, BillSource, S3Location};

/// Bills refresh a few times a day; reading them every six hours, away from
/// the hourly price syncs at :00, keeps the open month current.
pub(super) const DEFAULT_BILLS_SCHEDULE: &str = "0 15 */6 * * *";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawBillSource {
    format: Option<String>,
    provider: Option<String>,
    path: Option<String>,
    url: Option<String>,
    endpoint: Option<String>,
    region: Option<String>,
    schedule: Option<String>,
    enabled: Option<bool>,
    #[serde(default)]
    team_tags: Vec<String>,
    #[serde(default)]
    teams_by_account: BTreeMap<String, String>,
    restated_after_days: Option<i64>,
}

/// A configured source with its schedule.
#[derive(Debug, Clone)]
pub struct BillSourceConfig {
    pub enabled: bool,
    pub source: BillSource,
    pub schedule: Schedule,
}

/// `[bills.*]`, with paths resolved by `resolve`.
pub(super) fn validate(
    raw: BTreeMap<String, RawBillSource>,
    c: &mut Checker,
    resolve: &dyn Fn(&str) -> PathBuf,
) -> BTreeMap<String, BillSourceConfig> {
    let mut out = BTreeMap::new();
    for (name, s) in raw {
        let at = format!("bills.{name}");
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        {
            c.fail(&at, "a source name may only use a-z, 0-9, '-' and '_'");
        }
        let format = match s.format.as_deref() {
            None => {
                c.fail(format!("{at}.format"), "missing; one of: focus, cur2");
                None
            }
            Some(f) => BillFormat::parse(f).or_else(|| {
                c.fail(
                    format!("{at}.format"),
                    format!("`{f}` is not a bill format; one of: focus, cur2"),
                );
                None
            }),
        };
        let provider = match s.provider.as_deref() {
            None => {
                c.fail(
                    format!("{at}.provider"),
                    "missing; one of: aws, azure, gcp, oci",
                );
                None
            }
            Some(p) => BillProvider::parse(p).or_else(|| {
                c.fail(
                    format!("{at}.provider"),
                    format!("`{p}` is not a bill provider; one of: aws, azure, gcp, oci"),
                );
                None
            }),
        };
        if format == Some(BillFormat::Cur2) && provider.is_some_and(|p| p != BillProvider::Aws) {
            c.fail(
                format!("{at}.provider"),
                "format cur2 is AWS's Cost and Usage Report; its provider is aws",
            );
        }
        if s.url.is_none() {
            for (key, set) in [
                ("endpoint", s.endpoint.is_some()),
                ("region", s.region.is_some()),
            ] {
                if set {
                    c.fail(
                        format!("{at}.{key}"),
                        "goes with url (an s3:// bucket), not with path",
                    );
                }
            }
        }
        let location = match (s.path, s.url) {
            (Some(p), None) if !p.trim().is_empty() => Some(BillLocation::Folder(resolve(&p))),
            (Some(_), None) => {
                c.fail(format!("{at}.path"), "must not be empty");
                None
            }
            (None, Some(url)) => match s3_location(&url, s.endpoint, s.region) {
                Ok(loc) => {
                    #[cfg(not(feature = "aws"))]
                    c.fail(
                        format!("{at}.url"),
                        "this gpuplan was built without the `aws` feature, which reads s3:// bills",
                    );
                    Some(BillLocation::S3(loc))
                }
                Err((key, why)) => {
                    c.fail(format!("{at}.{key}"), why);
                    None
                }
            },
            (Some(_), Some(_)) => {
                c.fail(format!("{at}.url"), "path is set too; use one or the other");
                None
            }
            (None, None) => {
                c.fail(
                    &at,
                    "give path (a folder holding the export) or url (s3://bucket/prefix)",
                );
                None
            }
        };
        for (i, tag) in s.team_tags.iter().enumerate() {
            if tag.trim().is_empty() {
                c.fail(format!("{at}.team_tags[{i}]"), "must not be empty");
            }
        }
        for (account, team) in &s.teams_by_account {
            if team.trim().is_empty() {
                c.fail(
                    format!("{at}.teams_by_account.{account}"),
                    "must name a team",
                );
            }
        }
        let grace = s
            .restated_after_days
            .map(|d| c.bounded(&format!("{at}.restated_after_days"), Some(d), 0, 0..=366));
        let schedule = c.schedule(
            &format!("{at}.schedule"),
            Some(s.schedule.as_deref().unwrap_or(DEFAULT_BILLS_SCHEDULE)),
        );
        if let (Some(format), Some(provider), Some(location)) = (format, provider, location) {
            out.insert(
                name.clone(),
                BillSourceConfig {
                    enabled: s.enabled.unwrap_or(true),
                    source: BillSource {
                        name,
                        format,
                        provider,
                        location,
                        team_tags: s.team_tags,
                        teams_by_account: s.teams_by_account,
                        grace_days: grace.unwrap_or_else(|| provider.grace_days()),
                    },
                    schedule,
                },
            );
        }
    }
    out
}

/// `s3://bucket/prefix`; the error names the key at fault.
fn s3_location(
    url: &str,
    endpoint: Option<String>,
    region: Option<String>,
) -> Result<S3Location, (&'static str, String)> {
    let rest = url
        .strip_prefix("s3://")
        .ok_or(("url", format!("`{url}` is not an s3://bucket/prefix URL")))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    if !bucket_ok {
        return Err(("url", format!("`{bucket}` is not an S3 bucket name")));
    }
    let prefix = prefix.trim_matches('/');
    if prefix.split('/').any(|p| p == "..") {
        return Err(("url", "the prefix must not hold `..`".to_owned()));
    }
    if let Some(e) = endpoint.as_deref().filter(|e| !is_http_url(e)) {
        return Err((
            "endpoint",
            format!("`{e}` is not an http:// or https:// URL"),
        ));
    }
    let region_ok = |r: &str| {
        !r.is_empty()
            && r.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    };
    if let Some(r) = region.as_deref().filter(|r| !region_ok(r)) {
        return Err(("region", format!("`{r}` is not an AWS region")));
    }
    Ok(S3Location {
        bucket: bucket.to_owned(),
        prefix: prefix.to_owned(),
        endpoint: endpoint.map(|e| e.trim_end_matches('/').to_owned()),
        region,
    })
}
