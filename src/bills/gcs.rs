//! The client of a Google Cloud Storage bucket (where BigQuery's FOCUS
//! export is written out), read as an [`ObjectFolder`]. It is configured
//! from the environment: a service account key file in
//! `GOOGLE_SERVICE_ACCOUNT` (or `GOOGLE_APPLICATION_CREDENTIALS`), or else
//! the metadata server of the machine it runs on.

use object_store::gcp::GoogleCloudStorageBuilder;

use super::CloudLocation;
use super::object_folder::{ObjectFolder, client_options, retries};

/// The folder of a `gs://` source; nothing is requested yet.
///
/// # Errors
/// When the client cannot be built from the environment, naming the URL.
pub fn folder(loc: &CloudLocation) -> Result<ObjectFolder, String> {
    let rt = ObjectFolder::runtime(&loc.url)?;
    let built = GoogleCloudStorageBuilder::from_env()
        .with_bucket_name(&loc.container)
        .with_retry(retries())
        // http as object_store allows it for GCS by default (options set
        // here would reset that): the base URL is Google's, https, unless
        // the service account file names another, such as an emulator.
        .with_client_options(client_options().with_allow_http(true))
        .build();
    ObjectFolder::cloud(rt, built, loc, "Google Cloud Storage")
}
