//! An export folder in an object store (S3, Azure Blob Storage, Google
//! Cloud Storage), read in place: the prefix is listed like a folder,
//! manifests and the files they list are fetched one at a time, and an
//! object whose ETag is unchanged is not fetched again. Each store's module
//! only builds its client; the reading is the same for all.

use std::sync::Arc;
use std::time::Duration;

use futures_util::TryStreamExt;
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, ObjectStore, ObjectStoreExt, RetryConfig};

use super::files::{Contents, Entry, Folder, wanted};

/// Objects listed before giving up, as for a local folder.
const MAX_OBJECTS: usize = 200_000;

/// Objects up to this size are read in memory; larger ones through a file.
const IN_MEMORY_BYTES: u64 = 64 << 20;

/// Retries of a failed request (5xx, 429, a dropped connection), within a
/// minute: a sync runs again on its schedule.
pub fn retries() -> RetryConfig {
    RetryConfig {
        max_retries: 3,
        retry_timeout: Duration::from_secs(60),
        ..RetryConfig::default()
    }
}

/// Timeouts of every request: a stalled server fails the source instead of
/// holding the sync.
pub fn client_options() -> ClientOptions {
    ClientOptions::new()
        .with_timeout(Duration::from_secs(120))
        .with_connect_timeout(Duration::from_secs(10))
}

pub struct ObjectFolder {
    rt: tokio::runtime::Runtime,
    store: Arc<dyn ObjectStore>,
    /// Without leading or trailing `/`; empty for the whole container.
    prefix: String,
    /// The source's URL, as errors name it (never with a query or a key).
    shown: String,
}

impl ObjectFolder {
    /// A folder of `store` under `prefix`; `rt` runs its requests.
    pub fn new(
        rt: tokio::runtime::Runtime,
        store: Arc<dyn ObjectStore>,
        prefix: &str,
        shown: String,
    ) -> Self {
        Self {
            rt,
            store,
            prefix: prefix.to_owned(),
            shown,
        }
    }

    /// The folder of an Azure or GCS source from its built client, or the
    /// build's error naming the URL and `client`.
    ///
    /// # Errors
    /// When the client could not be built.
    #[cfg(any(feature = "azure", feature = "gcp"))]
    pub fn cloud<S: ObjectStore>(
        rt: tokio::runtime::Runtime,
        built: object_store::Result<S>,
        loc: &super::CloudLocation,
        client: &str,
    ) -> Result<Self, String> {
        // A store's Debug holds its credentials: only its errors' text is
        // ever shown, and that carries no key.
        let store = built.map_err(|e| {
            format!(
                "{}: cannot set up the {client} client from the environment: {}",
                loc.url,
                one_line(&e)
            )
        })?;
        Ok(Self::new(rt, Arc::new(store), &loc.prefix, loc.url.clone()))
    }

    /// A runtime for one folder's requests.
    ///
    /// # Errors
    /// When the runtime cannot start, naming the source.
    pub fn runtime(shown: &str) -> Result<tokio::runtime::Runtime, String> {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("{shown}: cannot start a runtime: {e}"))
    }

    fn key(&self, rel: &str) -> ObjectPath {
        ObjectPath::from(if self.prefix.is_empty() {
            rel.to_owned()
        } else {
            format!("{}/{rel}", self.prefix)
        })
    }
}

/// An object store's error on one line: the servers' XML bodies it quotes
/// span several.
pub fn one_line(e: &object_store::Error) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

impl Folder for ObjectFolder {
    fn entries(&self) -> Result<Vec<Entry>, String> {
        let prefix = (!self.prefix.is_empty()).then(|| ObjectPath::from(self.prefix.as_str()));
        let listed = self.rt.block_on(async {
            let mut out = Vec::new();
            let mut stream = self.store.list(prefix.as_ref());
            while let Some(meta) = stream.try_next().await? {
                out.push(meta);
                if out.len() > MAX_OBJECTS {
                    break;
                }
            }
            Ok::<_, object_store::Error>(out)
        });
        let objects =
            listed.map_err(|e| format!("{}: cannot list: {}", self.shown, one_line(&e)))?;
        if objects.len() > MAX_OBJECTS {
            return Err(format!(
                "{} holds more than {MAX_OBJECTS} objects; point url at one export",
                self.shown
            ));
        }
        let skip = if self.prefix.is_empty() {
            0
        } else {
            self.prefix.len() + 1
        };
        Ok(objects
            .into_iter()
            .filter_map(|meta| {
                let key = meta.location.as_ref();
                let rel = key.get(skip..)?.to_owned();
                let name = rel.rsplit('/').next().unwrap_or(&rel);
                if !wanted(name) || name.starts_with('.') {
                    return None;
                }
                // Only listed ETags are compared, each store's as it lists
                // them (S3's quoted, Azure's and GCS's not).
                let fingerprint = match meta.e_tag {
                    Some(tag) => format!("{}:{tag}", meta.size),
                    None => format!("{}:{}", meta.size, meta.last_modified.timestamp_micros()),
                };
                Some(Entry { rel, fingerprint })
            })
            .collect())
    }

    fn open(&self, rel: &str) -> Result<Contents, String> {
        let key = self.key(rel);
        let spool_error = |why: String| object_store::Error::Generic {
            store: "spool",
            source: why.into(),
        };
        let fetched = self.rt.block_on(async {
            let got = self.store.get(&key).await?;
            if got.meta.size <= IN_MEMORY_BYTES {
                return Ok(Contents::Memory(got.bytes().await?));
            }
            // A large object goes through a file, so a load's memory stays
            // bounded by the batches being read, not by the export's size.
            let mut spool = tempfile::NamedTempFile::new()
                .map_err(|e| spool_error(format!("cannot make a temporary file: {e}")))?;
            let mut stream = got.into_stream();
            while let Some(chunk) = stream.try_next().await? {
                std::io::Write::write_all(&mut spool, &chunk)
                    .map_err(|e| spool_error(format!("cannot write a temporary file: {e}")))?;
            }
            Ok(Contents::Spooled(spool))
        });
        fetched.map_err(|e: object_store::Error| {
            format!("cannot fetch it from {}: {}", self.shown, one_line(&e))
        })
    }
}
