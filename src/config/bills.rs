//! `[bills.NAME]`: billing exports (FOCUS, AWS CUR 2.0) to read usage, spend
//! and commitments from.

use super::*;
use crate::bills::{BillFormat, BillLocation, BillProvider, BillSource, CloudLocation, S3Location};

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
        let s3_url = s.url.as_deref().is_some_and(|u| u.starts_with("s3://"));
        if !s3_url {
            for (key, set) in [
                ("endpoint", s.endpoint.is_some()),
                ("region", s.region.is_some()),
            ] {
                if set {
                    c.fail(format!("{at}.{key}"), "goes with an s3:// url only");
                }
            }
        }
        let location = match (s.path, s.url) {
            (Some(p), None) if !p.trim().is_empty() => Some(BillLocation::Folder(resolve(&p))),
            (Some(_), None) => {
                c.fail(format!("{at}.path"), "must not be empty");
                None
            }
            (None, Some(url)) => {
                let location = if s3_url {
                    s3_location(&url, s.endpoint, s.region).map(BillLocation::S3)
                } else {
                    cloud_location(&url)
                };
                match location {
                    Ok(loc) => {
                        if let Some(feature) = loc.feature().filter(|f| !built_with(f)) {
                            c.fail(
                                format!("{at}.url"),
                                format!("this gpuplan was built without the `{feature}` feature, which reads {loc}"),
                            );
                        }
                        Some(loc)
                    }
                    Err((key, why)) => {
                        c.fail(format!("{at}.{key}"), why);
                        None
                    }
                }
            }
            (Some(_), Some(_)) => {
                c.fail(format!("{at}.url"), "path is set too; use one or the other");
                None
            }
            (None, None) => {
                c.fail(
                    &at,
                    "give path (a folder holding the export) or url (s3://, az:// or gs://)",
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

/// The storage account of an Azure Blob Storage or Data Lake host.
fn azure_host(host: &str) -> Option<&str> {
    [".blob.core.windows.net", ".dfs.core.windows.net"]
        .iter()
        .find_map(|suffix| host.strip_suffix(suffix))
}

/// Whether this build reads bills with `feature`.
fn built_with(feature: &str) -> bool {
    [
        ("aws", cfg!(feature = "aws")),
        ("azure", cfg!(feature = "azure")),
        ("gcp", cfg!(feature = "gcp")),
    ]
    .contains(&(feature, true))
}

/// An Azure Blob Storage or Google Cloud Storage URL: `az://container/prefix`,
/// `abfs[s]://container@account.dfs.core.windows.net/prefix`,
/// `https://account.blob.core.windows.net/container/prefix`, or
/// `gs://bucket/prefix`. A query (a SAS token pasted with the URL) is
/// refused without being repeated: secrets go in the environment.
fn cloud_location(url: &str) -> Result<BillLocation, (&'static str, String)> {
    let (bare, query) = url.split_once('?').unwrap_or((url, ""));
    if !query.is_empty() || url.contains('#') {
        return Err((
            "url",
            format!(
                "`{bare}` carries a query; a SAS token or key goes in the environment (AZURE_STORAGE_SAS_TOKEN), never in the config"
            ),
        ));
    }
    let unknown = || {
        (
            "url",
            format!(
                "`{bare}` is not a bill URL; one of s3://bucket/prefix, az://container/prefix, \
                 abfss://container@account.dfs.core.windows.net/prefix, \
                 https://account.blob.core.windows.net/container/prefix, gs://bucket/prefix"
            ),
        )
    };
    let (scheme, rest) = bare.split_once("://").ok_or_else(unknown)?;
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (account, container, prefix, azure) = match scheme {
        "gs" => (None, host, path, false),
        "az" | "azure" | "abfs" | "abfss" => match host.split_once('@') {
            Some((container, account_host)) => {
                let account = azure_host(account_host).ok_or_else(unknown)?;
                (Some(account), container, path, true)
            }
            None => (None, host, path, true),
        },
        "https" => {
            let account = azure_host(host).ok_or_else(unknown)?;
            let (container, prefix) = path.split_once('/').unwrap_or((path, ""));
            (Some(account), container, prefix, true)
        }
        _ => return Err(unknown()),
    };
    let named = |name: &str, lengths: std::ops::RangeInclusive<usize>, extra: &[char]| {
        lengths.contains(&name.len())
            && name.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || extra.contains(&c)
            })
            && !name.starts_with('-')
    };
    if azure && !named(container, 3..=63, &[]) {
        return Err((
            "url",
            format!("`{container}` is not an Azure container name (3 to 63 of a-z, 0-9, -)"),
        ));
    }
    if !azure && !named(container, 3..=222, &['.', '_']) {
        return Err((
            "url",
            format!("`{container}` is not a Cloud Storage bucket name"),
        ));
    }
    if let Some(a) = account.filter(|a| !named(a, 3..=24, &[]) || a.contains('-')) {
        return Err((
            "url",
            format!("`{a}` is not an Azure storage account name (3 to 24 of a-z, 0-9)"),
        ));
    }
    let prefix = prefix.trim_matches('/');
    if prefix.split('/').any(|p| p == "..") {
        return Err(("url", "the prefix must not hold `..`".to_owned()));
    }
    let location = CloudLocation {
        url: bare.trim_end_matches('/').to_owned(),
        account: account.map(str::to_owned),
        container: container.to_owned(),
        prefix: prefix.to_owned(),
    };
    Ok(if azure {
        BillLocation::Azure(location)
    } else {
        BillLocation::Gcs(location)
    })
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
