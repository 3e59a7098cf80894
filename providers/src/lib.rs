//! Price sources for gpuplan.
//!
//! Every source implements [`Provider`]: one call fetches everything the source
//! knows right now and returns it as a normalized [`Snapshot`]. Providers speak
//! HTTP and their own wire format and nothing else; they never touch the store,
//! which is the daemon's job.

#[cfg(feature = "azure")]
pub mod azure;
pub mod error;
#[cfg(feature = "file")]
pub mod file;
#[cfg(feature = "gcp")]
pub mod gcp;
pub mod gpu;
pub mod http;
#[cfg(feature = "lambda")]
pub mod lambda;
pub mod secret;
pub mod snapshot;
#[cfg(any(test, feature = "testing"))]
pub mod test_server;

pub use error::ProviderError;
pub use snapshot::{
    AvailabilityRecord, AvailabilitySignal, FetchContext, InstanceType, OfferingClass, PriceKind,
    PriceRecord, Scope, Snapshot, SpotObservation, Term, Upfront,
};

pub use async_trait::async_trait;

/// One price source. Object-safe so the daemon can hold `Box<dyn Provider>`.
#[async_trait]
pub trait Provider: Send + Sync {
    /// The name records carry in their `provider` field (`aws`, `file:onprem`, ...).
    fn id(&self) -> &str;

    /// Fetches one complete snapshot of the source.
    ///
    /// # Errors
    /// Any [`ProviderError`]; the caller keeps its last good data.
    async fn fetch(&self, ctx: &FetchContext) -> Result<Snapshot, ProviderError>;
}
