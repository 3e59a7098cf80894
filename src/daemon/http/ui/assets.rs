//! The files the pages load, embedded in the binary and served from
//! `/ui/assets/`. Names carry no version; links add a fingerprint of the content
//! (`?v=`) so that a browser never keeps a stale copy across upgrades.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
    /// For vendored files: the sha256 recorded in `vendor/VENDORED.md`.
    pub vendored_sha256: Option<&'static str>,
}

pub const ASSETS: &[Asset] = &[
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("static/app.js"),
        vendored_sha256: None,
    },
    Asset {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("static/app.css"),
        vendored_sha256: None,
    },
    Asset {
        name: "uPlot.iife.min.js",
        content_type: "text/javascript; charset=utf-8",
        bytes: include_bytes!("vendor/uPlot.iife.min.js"),
        vendored_sha256: Some("19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f"),
    },
    Asset {
        name: "uPlot.min.css",
        content_type: "text/css; charset=utf-8",
        bytes: include_bytes!("vendor/uPlot.min.css"),
        vendored_sha256: Some("df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04"),
    },
];

fn find(name: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.name == name)
}

/// Each asset's link, with a fingerprint of its content: computed once, not
/// on every page.
static HREFS: LazyLock<BTreeMap<&'static str, String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|a| {
            let version = crate::fingerprint::fingerprint(a.bytes);
            (a.name, format!("/ui/assets/{}?v={version}", a.name))
        })
        .collect()
});

/// The link to an asset, with a fingerprint of its content.
pub fn href(name: &str) -> &'static str {
    HREFS.get(name).map_or("", String::as_str)
}

pub async fn serve(Path(name): Path<String>) -> Response {
    match find(&name) {
        Some(asset) => (
            [
                (header::CONTENT_TYPE, asset.content_type),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            asset.bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use sha2::{Digest, Sha256};

    use super::*;

    fn sha256_hex(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    #[test]
    fn vendored_files_are_the_published_bytes() {
        let record = include_str!("vendor/VENDORED.md");
        for asset in ASSETS {
            let Some(expected) = asset.vendored_sha256 else {
                continue;
            };
            assert_eq!(sha256_hex(asset.bytes), expected, "{}", asset.name);
            assert!(record.contains(expected), "{} is not recorded", asset.name);
        }
        assert!(
            ASSETS
                .iter()
                .filter(|a| a.vendored_sha256.is_some())
                .count()
                == 2
        );
    }
}
