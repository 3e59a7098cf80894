//! The buyer's side: billing exports (FOCUS 1.0-1.2 from AWS, Azure, GCP and
//! OCI; AWS CUR 2.0) read into hourly GPU usage, daily spend and commitments.
//!
//! Data flows one way: [`files`] picks the files an export's manifests say
//! count, [`read`] turns each file (CSV, CSV.gz, Parquet) into rows of cells,
//! [`focus`] and [`cur2`] map a row into one normalized [`charge::Charge`],
//! [`aggregate`] folds charges into per-period aggregates, and [`load`] writes
//! each (source, billing account, billing period) to the store in one
//! transaction. Raw rows are never kept. docs/bills.md is the user's guide.

pub mod advice;
pub mod aggregate;
pub mod allocation;
#[cfg(feature = "azure")]
mod azure_blob;
pub mod budgets;
pub mod charge;
mod cur2;
pub mod files;
pub mod focus;
#[cfg(feature = "gcp")]
mod gcs;
pub mod gpus;
pub mod health;
pub mod load;
#[cfg(any(feature = "aws", feature = "azure", feature = "gcp"))]
mod object_folder;
pub mod query;
pub mod read;
#[cfg(feature = "aws")]
mod s3;
pub(crate) mod time;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::Serialize;

pub use crate::store::bills::period::{CommitmentType, UsageKind};
pub use aggregate::{Commitment, CommitmentHour, PeriodData, SpendDay, UsageKey, UsageValue};
pub use load::{LoadReport, PeriodOutcome, SourceReport};

/// Which export format a source holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BillFormat {
    /// FOCUS 1.0, 1.1 or 1.2 (and the pre-1.0 names OCI still writes).
    Focus,
    /// AWS Cost and Usage Report 2.0.
    Cur2,
}

impl BillFormat {
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "focus" => Some(Self::Focus),
            "cur2" => Some(Self::Cur2),
            _ => None,
        }
    }
}

/// Whose instance types and SKUs the rows name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BillProvider {
    Aws,
    Azure,
    Gcp,
    Oci,
}

impl BillProvider {
    pub const ALL: [Self; 4] = [Self::Aws, Self::Azure, Self::Gcp, Self::Oci];

    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "aws" => Some(Self::Aws),
            "azure" => Some(Self::Azure),
            "gcp" => Some(Self::Gcp),
            "oci" => Some(Self::Oci),
            _ => None,
        }
    }

    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Aws => "aws",
            Self::Azure => "azure",
            Self::Gcp => "gcp",
            Self::Oci => "oci",
        }
    }

    /// The cloud a FOCUS provider name means, as the clouds and the FinOps
    /// tools that merge their exports write it.
    #[must_use]
    pub fn from_provider_name(name: &str) -> Option<Self> {
        const NAMES: &[(&str, BillProvider)] = &[
            ("aws", BillProvider::Aws),
            ("amazon web services", BillProvider::Aws),
            ("amazon", BillProvider::Aws),
            ("microsoft", BillProvider::Azure),
            ("microsoft azure", BillProvider::Azure),
            ("azure", BillProvider::Azure),
            ("google cloud", BillProvider::Gcp),
            ("google cloud platform", BillProvider::Gcp),
            ("google", BillProvider::Gcp),
            ("gcp", BillProvider::Gcp),
            ("oracle", BillProvider::Oci),
            ("oracle cloud infrastructure", BillProvider::Oci),
            ("oci", BillProvider::Oci),
        ];
        let name = name.trim();
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, p)| *p)
    }

    /// Days after a billing period ends during which the provider may still
    /// rewrite it (AWS about two weeks, the others until the 5th).
    #[must_use]
    pub fn grace_days(self) -> u32 {
        match self {
            Self::Aws => 15,
            Self::Azure | Self::Gcp | Self::Oci => 5,
        }
    }
}

impl fmt::Display for BillProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One configured billing export.
#[derive(Debug, Clone, PartialEq)]
pub struct BillSource {
    pub name: String,
    pub format: BillFormat,
    pub provider: BillProvider,
    /// Where the export folders are.
    pub location: BillLocation,
    /// Tag keys that name a team, first present wins.
    pub team_tags: Vec<String>,
    /// The team of a sub-account (account, subscription, project) whose rows
    /// carry no team tag.
    pub teams_by_account: BTreeMap<String, String>,
    /// Days after a period's end before it is final.
    pub grace_days: u32,
}

/// Where a source's export folders are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BillLocation {
    /// A folder on this machine, read recursively.
    Folder(PathBuf),
    /// An object-store prefix (an AWS Data Exports bucket), read in place.
    S3(S3Location),
    /// A prefix of an Azure Blob Storage container, read in place.
    Azure(CloudLocation),
    /// A prefix of a Google Cloud Storage bucket, read in place.
    Gcs(CloudLocation),
}

/// An Azure container or a Google Cloud Storage bucket, and a prefix in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CloudLocation {
    /// The URL as configured, without a query: what messages name.
    pub url: String,
    /// The storage account the URL names (Azure); else the environment's.
    pub account: Option<String>,
    /// The container or bucket.
    pub container: String,
    /// Without leading or trailing `/`; empty for the whole container.
    pub prefix: String,
}

/// `s3://bucket/prefix`, with the endpoint and region to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    pub bucket: String,
    /// Without leading or trailing `/`; empty for the whole bucket.
    pub prefix: String,
    /// Another S3 endpoint than AWS's (a mirror, a test server).
    pub endpoint: Option<String>,
    /// The bucket's region; else `AWS_REGION`, else `us-east-1`.
    pub region: Option<String>,
}

impl fmt::Display for BillLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Folder(p) => write!(f, "{}", p.display()),
            Self::S3(s) if s.prefix.is_empty() => write!(f, "s3://{}", s.bucket),
            Self::S3(s) => write!(f, "s3://{}/{}", s.bucket, s.prefix),
            Self::Azure(c) | Self::Gcs(c) => f.write_str(&c.url),
        }
    }
}

impl BillLocation {
    /// The build feature that reads it, for an object store.
    #[must_use]
    pub fn feature(&self) -> Option<&'static str> {
        match self {
            Self::Folder(_) => None,
            Self::S3(_) => Some("aws"),
            Self::Azure(_) => Some("azure"),
            Self::Gcs(_) => Some("gcp"),
        }
    }
}

/// The folder a source reads.
///
/// # Errors
/// When its object store cannot be set up, or this build cannot read it.
pub fn folder(source: &BillSource) -> Result<Box<dyn files::Folder>, String> {
    match &source.location {
        BillLocation::Folder(root) => Ok(Box::new(files::LocalFolder { root: root.clone() })),
        #[cfg(feature = "aws")]
        BillLocation::S3(s3) => Ok(Box::new(s3::folder(s3)?)),
        #[cfg(feature = "azure")]
        BillLocation::Azure(c) => Ok(Box::new(azure_blob::folder(c)?)),
        #[cfg(feature = "gcp")]
        BillLocation::Gcs(c) => Ok(Box::new(gcs::folder(c)?)),
        #[allow(unreachable_patterns)]
        other => Err(format!(
            "this gpuplan was built without the `{}` feature, which reads {other}",
            other.feature().unwrap_or_default()
        )),
    }
}

/// Where in which file a bad value was found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {column}: {why}")]
pub struct BadCell {
    /// The file's path under the source's folder.
    pub file: String,
    /// 1-based; the header is line 1 (Parquet: the row's number plus one).
    pub line: u64,
    pub column: String,
    pub why: String,
}

/// Why a file could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BillError {
    #[error(transparent)]
    Cell(#[from] BadCell),
    /// The file as a whole: unreadable, not the format its name says, or a
    /// required column missing.
    #[error("{file}: {why}")]
    File { file: String, why: String },
}

impl BillError {
    pub(crate) fn file(file: &str, why: impl Into<String>) -> Self {
        Self::File {
            file: file.to_owned(),
            why: why.into(),
        }
    }
}

/// The team of rows that name none.
pub const UNALLOCATED: &str = "unallocated";

#[cfg(test)]
mod tests;
