//! Which files of an export folder count. Exports leave old deliveries in
//! place (AWS create-new mode keeps every refresh's folder, Azure with
//! overwrite off keeps every run), so where a manifest governs a folder only
//! the files the newest manifest lists are read; listing the folder instead
//! would count a month twice.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A file to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataFile {
    pub path: PathBuf,
    /// The path under the source's folder, as reports and errors name it.
    pub shown: String,
    /// Size and modification time: a file whose fingerprint is stored was
    /// read as it is now.
    pub fingerprint: String,
}

/// What a folder holds.
#[derive(Debug, Default)]
pub struct Listing {
    pub files: Vec<DataFile>,
    /// Data files left out because no current manifest lists them.
    pub excluded: usize,
    /// Manifests that could not be read, or that list files not there;
    /// their deliveries are not read at all.
    pub errors: Vec<String>,
}

/// Files and folders walked before giving up: an export folder holds
/// thousands, not millions.
const MAX_ENTRIES: usize = 200_000;

fn is_data(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with(".csv") || n.ends_with(".csv.gz") || n.ends_with(".parquet")
}

/// AWS: `<export>/metadata/billing_period=YYYY-MM/<export>-Manifest.json`.
#[derive(Deserialize)]
struct AwsManifest {
    #[serde(rename = "dataFiles")]
    data_files: Vec<String>,
}

/// Azure: `manifest.json` of one export run.
#[derive(Deserialize)]
struct AzureManifest {
    #[serde(rename = "exportConfig")]
    export_config: Option<AzureExportConfig>,
    #[serde(rename = "runInfo")]
    run_info: AzureRunInfo,
    blobs: Vec<AzureBlob>,
}

#[derive(Deserialize)]
struct AzureExportConfig {
    #[serde(rename = "exportName")]
    export_name: Option<String>,
}

#[derive(Deserialize)]
struct AzureRunInfo {
    #[serde(rename = "submittedTime")]
    submitted_time: String,
    #[serde(rename = "startDate")]
    start_date: Option<String>,
}

#[derive(Deserialize)]
struct AzureBlob {
    #[serde(rename = "blobName")]
    blob_name: String,
}

/// Lists the files of `root` that count.
///
/// # Errors
/// When `root` cannot be read at all.
pub fn list(root: &Path) -> Result<Listing, String> {
    let mut data = Vec::new();
    let mut aws = Vec::new();
    let mut azure = Vec::new();
    walk(root, &mut data, &mut aws, &mut azure)?;
    let mut listing = Listing::default();

    // Folders a manifest governs, and the files counted in them.
    let mut governed: Vec<PathBuf> = Vec::new();
    let mut counted: BTreeSet<PathBuf> = BTreeSet::new();
    for manifest in &aws {
        let Some(export_root) = aws_export_root(manifest) else {
            continue;
        };
        governed.push(export_root.join("data"));
        match read_aws(manifest, &export_root) {
            Ok(files) => check_listed(root, manifest, files, &mut counted, &mut listing.errors),
            Err(why) => listing
                .errors
                .push(format!("{}: {why}", shown(root, manifest))),
        }
    }
    // Azure: the newest run per (export, month) wins.
    let mut newest: BTreeMap<(String, String), (String, PathBuf, Vec<PathBuf>)> = BTreeMap::new();
    for manifest in &azure {
        let Some(dir) = manifest.parent() else {
            continue;
        };
        // The folder above the run's counts as governed too, so a run still
        // being written (its manifest not there yet) is not read either.
        governed.push(dir.parent().unwrap_or(dir).to_path_buf());
        match read_azure(root, manifest) {
            Ok((export, month, submitted, files)) => {
                let slot = newest.entry((export, month));
                match slot {
                    std::collections::btree_map::Entry::Vacant(v) => {
                        v.insert((submitted, manifest.clone(), files));
                    }
                    std::collections::btree_map::Entry::Occupied(mut o) => {
                        if submitted > o.get().0 {
                            o.insert((submitted, manifest.clone(), files));
                        }
                    }
                }
            }
            Err(why) => listing
                .errors
                .push(format!("{}: {why}", shown(root, manifest))),
        }
    }
    for (_, manifest, files) in newest.into_values() {
        check_listed(root, &manifest, files, &mut counted, &mut listing.errors);
    }
    for file in data {
        let under_manifest = governed.iter().any(|g| file.starts_with(g));
        if under_manifest && !counted.contains(&file) {
            listing.excluded += 1;
            continue;
        }
        match fingerprint(&file) {
            Ok(fp) => listing.files.push(DataFile {
                shown: shown(root, &file),
                path: file,
                fingerprint: fp,
            }),
            Err(why) => listing
                .errors
                .push(format!("{}: {why}", shown(root, &file))),
        }
    }
    listing.files.sort_by(|a, b| a.shown.cmp(&b.shown));
    Ok(listing)
}

/// Counts the files a manifest lists, unless one of them is missing: a
/// delivery is read whole or not at all.
fn check_listed(
    root: &Path,
    manifest: &Path,
    files: Vec<PathBuf>,
    counted: &mut BTreeSet<PathBuf>,
    errors: &mut Vec<String>,
) {
    let missing: Vec<String> = files
        .iter()
        .filter(|f| !f.is_file())
        .map(|f| shown(root, f))
        .collect();
    if missing.is_empty() {
        counted.extend(files);
    } else {
        errors.push(format!(
            "{}: lists {} file(s) that are not there ({}); this delivery is not read until it is complete",
            shown(root, manifest),
            missing.len(),
            missing.iter().take(3).cloned().collect::<Vec<_>>().join(", ")
        ));
    }
}

fn shown(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .to_string_lossy()
        .into_owned()
}

fn fingerprint(p: &Path) -> Result<String, String> {
    let meta = std::fs::metadata(p).map_err(|e| format!("cannot read its metadata: {e}"))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    Ok(format!("{}:{mtime}", meta.len()))
}

fn walk(
    root: &Path,
    data: &mut Vec<PathBuf>,
    aws: &mut Vec<PathBuf>,
    azure: &mut Vec<PathBuf>,
) -> Result<(), String> {
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| format!("cannot read the folder {}: {e}", dir.display()))?;
        for entry in entries {
            let entry =
                entry.map_err(|e| format!("cannot read the folder {}: {e}", dir.display()))?;
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(format!(
                    "{} holds more than {MAX_ENTRIES} files and folders; point path at one export",
                    root.display()
                ));
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            // Symbolic links to folders are not followed: a loop must not hang a sync.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                stack.push(path);
            } else if name.ends_with("-Manifest.json") {
                aws.push(path);
            } else if name.eq_ignore_ascii_case("manifest.json") {
                azure.push(path);
            } else if is_data(&name) && (kind.is_file() || path.is_file()) {
                data.push(path);
            }
        }
    }
    Ok(())
}

/// The export's folder: the one above `metadata/`.
fn aws_export_root(manifest: &Path) -> Option<PathBuf> {
    let mut p = manifest.parent()?;
    while let Some(parent) = p.parent() {
        if p.file_name().is_some_and(|n| n == "metadata") {
            return Some(parent.to_path_buf());
        }
        p = parent;
    }
    None
}

fn read_aws(manifest: &Path, export_root: &Path) -> Result<Vec<PathBuf>, String> {
    let text = std::fs::read_to_string(manifest).map_err(|e| format!("cannot read: {e}"))?;
    let m: AwsManifest =
        serde_json::from_str(&text).map_err(|e| format!("not an AWS export manifest: {e}"))?;
    let export = export_root
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let marker = format!("/{export}/data/");
    m.data_files
        .iter()
        .map(|uri| {
            let at = uri
                .find(&marker)
                .ok_or_else(|| format!("dataFiles entry `{uri}` is not under `{export}/data/`"))?;
            let rel = &uri[at + marker.len()..];
            if rel.split('/').any(|part| part == "..") {
                return Err(format!("dataFiles entry `{uri}` leaves the export folder"));
            }
            Ok(export_root.join("data").join(rel))
        })
        .collect()
}

type AzureRun = (String, String, String, Vec<PathBuf>);

fn read_azure(root: &Path, manifest: &Path) -> Result<AzureRun, String> {
    let text = std::fs::read_to_string(manifest).map_err(|e| format!("cannot read: {e}"))?;
    let m: AzureManifest =
        serde_json::from_str(&text).map_err(|e| format!("not an Azure export manifest: {e}"))?;
    let dir = manifest.parent().unwrap_or(root);
    let export = m
        .export_config
        .and_then(|c| c.export_name)
        .unwrap_or_else(|| {
            // Without a name, the run's folder two levels up names the export.
            dir.parent()
                .and_then(Path::parent)
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let month = m
        .run_info
        .start_date
        .as_deref()
        .map(|d| d.get(..7).unwrap_or(d).to_owned())
        .unwrap_or_default();
    let files = m
        .blobs
        .iter()
        .map(|b| {
            let name = b.blob_name.trim_start_matches('/');
            if name.split('/').any(|part| part == "..") {
                return Err(format!(
                    "blobName `{}` leaves the source folder",
                    b.blob_name
                ));
            }
            let under_root = root.join(name);
            if under_root.is_file() {
                return Ok(under_root);
            }
            // Synced without its container prefix: the file beside the manifest.
            let beside = Path::new(name)
                .file_name()
                .map(|f| dir.join(f))
                .unwrap_or(under_root.clone());
            Ok(if beside.is_file() { beside } else { under_root })
        })
        .collect::<Result<_, String>>()?;
    Ok((export, month, m.run_info.submitted_time, files))
}
