//! The client of an S3 bucket (an AWS Data Exports destination), read as an
//! [`ObjectFolder`]. Credentials come from the standard AWS chain
//! (environment, profile files, SSO, web identity, ECS and EC2 metadata),
//! resolved by the AWS SDK and handed to `object_store` for signing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider};
use object_store::CredentialProvider;
use object_store::aws::{AmazonS3Builder, AwsCredential};

use super::S3Location;
use super::object_folder::{ObjectFolder, client_options, retries};

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

/// The folder of an `s3://` source; nothing is requested yet.
///
/// # Errors
/// When the client cannot be built (a bad endpoint).
pub fn folder(loc: &S3Location) -> Result<ObjectFolder, String> {
    let shown = super::BillLocation::S3(loc.clone()).to_string();
    let rt = ObjectFolder::runtime(&shown)?;
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
        .with_retry(retries())
        .with_client_options(client_options());
    if let Some(endpoint) = &loc.endpoint {
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"))
            .with_virtual_hosted_style_request(false);
    }
    let store = builder.build().map_err(|e| format!("{shown}: {e}"))?;
    Ok(ObjectFolder::new(rt, Arc::new(store), &loc.prefix, shown))
}
