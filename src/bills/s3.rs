//! Bills read in place from an S3 bucket (an AWS Data Exports destination):
//! the prefix is listed like a folder, manifests and the files they list are
//! fetched into memory one at a time, and an object whose ETag is unchanged
//! is not fetched again. Credentials come from the standard AWS chain
//! (environment, profile files, SSO, web identity, ECS and EC2 metadata),
//! resolved by the AWS SDK and handed to `object_store` for signing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use futures_util::TryStreamExt;
use object_store::aws::{AmazonS3, AmazonS3Builder, AwsCredential};
use object_store::path::Path as ObjectPath;
use object_store::{ClientOptions, CredentialProvider, ObjectStore, ObjectStoreExt, RetryConfig};

use super::S3Location;
use super::files::{Contents, Entry, Folder, wanted};

/// Objects listed before giving up, as for a local folder.
const MAX_OBJECTS: usize = 200_000;

pub struct S3Folder {
    rt: tokio::runtime::Runtime,
    store: AmazonS3,
    prefix: String,
    shown: String,
}

/// The SDK's credentials, kept until shortly before they expire (object
/// store asks for them on every request).
#[derive(Debug)]
struct Chain {
    provider: SharedCredentialsProvider,
    cached: Mutex<Option<(Arc<AwsCredential>, Option<SystemTime>)>>,
}

/// Credentials this close to expiry are fetched anew.
const REFRESH_BEFORE: Duration = Duration::from_secs(300);

#[async_trait::async_trait]
impl CredentialProvider for Chain {
    type Credential = AwsCredential;

    async fn get_credential(&self) -> object_store::Result<Arc<AwsCredential>> {
        let fresh = |expiry: &Option<SystemTime>| {
            expiry.is_none_or(|e| e > SystemTime::now() + REFRESH_BEFORE)
        };
        if let Some((c, expiry)) = self.cached.lock().map_or(None, |g| g.clone())
            && fresh(&expiry)
        {
            return Ok(c);
        }
        let c = self.provider.provide_credentials().await.map_err(|e| {
            object_store::Error::Generic {
                store: "S3",
                source: format!("no AWS credentials from the standard chain: {e}").into(),
            }
        })?;
        let credential = Arc::new(AwsCredential {
            key_id: c.access_key_id().to_owned(),
            secret_key: c.secret_access_key().to_owned(),
            token: c.session_token().map(str::to_owned),
        });
        if let Ok(mut g) = self.cached.lock() {
            *g = Some((credential.clone(), c.expiry()));
        }
        Ok(credential)
    }
}

impl S3Folder {
    /// Sets up the client; nothing is requested yet.
    ///
    /// # Errors
    /// When the client cannot be built (a bad endpoint).
    pub fn new(loc: &S3Location) -> Result<Self, String> {
        let shown = super::BillLocation::S3(loc.clone()).to_string();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("{shown}: cannot start a runtime: {e}"))?;
        let region = loc
            .region
            .clone()
            .or_else(|| std::env::var("AWS_REGION").ok())
            .or_else(|| std::env::var("AWS_DEFAULT_REGION").ok())
            .unwrap_or_else(|| "us-east-1".to_owned());
        let sdk = rt.block_on(
            aws_config::defaults(aws_config::BehaviorVersion::latest())
                .region(aws_config::Region::new(region.clone()))
                .load(),
        );
        let provider = sdk
            .credentials_provider()
            .ok_or_else(|| format!("{shown}: no AWS credentials provider could be set up"))?;
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(&loc.bucket)
            .with_region(&region)
            .with_credentials(Arc::new(Chain {
                provider,
                cached: Mutex::new(None),
            }))
            .with_retry(RetryConfig {
                max_retries: 3,
                retry_timeout: Duration::from_secs(60),
                ..RetryConfig::default()
            })
            .with_client_options(
                ClientOptions::new()
                    .with_timeout(Duration::from_secs(120))
                    .with_connect_timeout(Duration::from_secs(10)),
            );
        if let Some(endpoint) = &loc.endpoint {
            builder = builder
                .with_endpoint(endpoint)
                .with_allow_http(endpoint.starts_with("http://"))
                .with_virtual_hosted_style_request(false);
        }
        let store = builder.build().map_err(|e| format!("{shown}: {e}"))?;
        Ok(Self {
            rt,
            store,
            prefix: loc.prefix.clone(),
            shown,
        })
    }

    fn key(&self, rel: &str) -> ObjectPath {
        ObjectPath::from(if self.prefix.is_empty() {
            rel.to_owned()
        } else {
            format!("{}/{rel}", self.prefix)
        })
    }
}

impl Folder for S3Folder {
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
        let objects = listed.map_err(|e| format!("{}: cannot list: {e}", self.shown))?;
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
        let fetched = self.rt.block_on(async {
            let got = self.store.get(&key).await?;
            if got.meta.size <= IN_MEMORY_BYTES {
                return Ok(Contents::Memory(got.bytes().await?));
            }
            // A large object goes through a file, so a load's memory stays
            // bounded by the batches being read, not by the export's size.
            let mut spool =
                tempfile::NamedTempFile::new().map_err(|e| object_store::Error::Generic {
                    store: "S3",
                    source: format!("cannot make a temporary file: {e}").into(),
                })?;
            let mut stream = got.into_stream();
            while let Some(chunk) = stream.try_next().await? {
                std::io::Write::write_all(&mut spool, &chunk).map_err(|e| {
                    object_store::Error::Generic {
                        store: "S3",
                        source: format!("cannot write a temporary file: {e}").into(),
                    }
                })?;
            }
            Ok(Contents::Spooled(spool))
        });
        fetched
            .map_err(|e: object_store::Error| format!("cannot fetch it from {}: {e}", self.shown))
    }
}

/// Objects up to this size are read in memory; larger ones through a file.
const IN_MEMORY_BYTES: u64 = 64 << 20;
