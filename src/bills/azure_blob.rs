//! The client of an Azure Blob Storage container (a Cost Management export
//! destination), read as an [`ObjectFolder`]. It is configured the way the
//! Azure tools are, from the environment: `AZURE_STORAGE_ACCOUNT_NAME` and
//! `AZURE_STORAGE_ACCOUNT_KEY`, a SAS token in `AZURE_STORAGE_SAS_TOKEN`, a
//! service principal (`AZURE_CLIENT_ID`, `AZURE_CLIENT_SECRET`,
//! `AZURE_TENANT_ID`), workload identity, or else the managed identity.
//! `AZURE_STORAGE_USE_EMULATOR` with `AZURITE_BLOB_STORAGE_URL` reaches
//! Azurite.

use object_store::azure::MicrosoftAzureBuilder;

use super::CloudLocation;
use super::object_folder::{ObjectFolder, client_options, retries};

/// The folder of an Azure source; nothing is requested yet.
///
/// # Errors
/// When the client cannot be built from the environment, naming the URL.
pub fn folder(loc: &CloudLocation) -> Result<ObjectFolder, String> {
    let rt = ObjectFolder::runtime(&loc.url)?;
    let mut builder = MicrosoftAzureBuilder::from_env()
        .with_container_name(&loc.container)
        .with_retry(retries())
        .with_client_options(client_options());
    if let Some(account) = &loc.account {
        builder = builder.with_account(account);
    }
    // A SAS request's URL is redacted in errors.
    ObjectFolder::cloud(rt, builder.build(), loc, "Azure")
}
