//! Price sources for gpuplan.
//!
//! Every source implements [`Provider`]: one call fetches everything the source
//! knows right now and returns it as a normalized [`Snapshot`]. Providers speak
//! HTTP and their own wire format and nothing else; they never touch the store,
//! which is the daemon's job.

#[cfg(feature = "alibaba")]
pub mod alibaba;
#[cfg(feature = "aws")]
pub mod aws;
#[cfg(feature = "azure")]
pub mod azure;
pub mod config;
pub mod error;
#[cfg(feature = "file")]
pub mod file;
#[cfg(feature = "gcp")]
pub mod gcp;
pub mod gpu;
pub mod http;
#[cfg(any(feature = "alibaba", feature = "tencent"))]
pub mod json;
#[cfg(feature = "lambda")]
pub mod lambda;
#[cfg(feature = "nebius")]
pub mod nebius;
#[cfg(feature = "oci")]
pub mod oci;
pub mod progress;
#[cfg(feature = "runpod")]
pub mod runpod;
pub mod secret;
pub mod snapshot;
#[cfg(feature = "tencent")]
pub mod tencent;
#[cfg(any(test, feature = "testing"))]
pub mod test_server;
#[cfg(feature = "vast")]
pub mod vast;

pub use error::ProviderError;
pub use snapshot::{
    AvailabilityRecord, AvailabilitySignal, Currency, FetchContext, FormFactor, InstanceType,
    OfferingClass, PriceKind, PriceRecord, PriceScope, Scope, Snapshot, SpotObservation, Term,
    Upfront, Window,
};

pub use async_trait::async_trait;

/// Which regions a complete snapshot must keep: a region that the last good
/// snapshot had and that is still wanted, but is missing now, means a partial
/// download, and the sync is rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegionScope {
    /// Every region the source lists is wanted.
    All,
    /// Only these (configured) regions are wanted; dropping one from the config
    /// lets its prices be withdrawn.
    Only(Vec<String>),
    /// The source is its own authority (a price sheet): any region may go.
    NotChecked,
}

impl RegionScope {
    /// The scope of a source configured with `regions`, where none means all.
    #[must_use]
    pub fn of_configured(regions: &[String]) -> Self {
        if regions.is_empty() {
            Self::All
        } else {
            Self::Only(regions.to_vec())
        }
    }
}

/// One price source. Object-safe so the daemon can hold `Box<dyn Provider>`.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The name records carry in their `provider` field (`aws`, `file:onprem`, ...).
    fn id(&self) -> &str;

    /// Which regions of the last good snapshot a new one must still have.
    fn region_scope(&self) -> RegionScope {
        RegionScope::All
    }

    /// Fetches one complete snapshot of the source.
    ///
    /// # Errors
    /// Any [`ProviderError`]; the caller keeps its last good data.
    async fn fetch(&self, ctx: &FetchContext) -> Result<Snapshot, ProviderError>;
}
