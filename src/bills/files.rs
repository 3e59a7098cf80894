//! Which files of an export folder count. Exports leave old deliveries in
//! place (AWS create-new mode keeps every refresh's folder, Azure with
//! overwrite off keeps every run), so where a manifest governs a folder only
//! the files the newest manifest lists are read; listing the folder instead
//! would count a month twice.
//!
//! The rules work on paths relative to the source's folder, with `/`
//! between parts, so a local folder and an object-store prefix
//! ([`super::s3`]) are read the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A file of a folder: its path under the folder and what tells a changed
/// file from an unchanged one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub rel: String,
    /// Size and modification time (an object's ETag): a file whose
    /// fingerprint is stored was read as it is now.
    pub fingerprint: String,
}

/// A file's bytes: on disk, fetched into memory, or fetched into a
/// temporary file (deleted when dropped).
pub enum Contents {
    Local(PathBuf),
    Memory(bytes::Bytes),
    Spooled(tempfile::NamedTempFile),
}

impl Contents {
    /// The file on disk that holds the bytes, if one does.
    #[must_use]
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Local(p) => Some(p),
            Self::Spooled(f) => Some(f.path()),
            Self::Memory(_) => None,
        }
    }

    /// The file's size in bytes (0 when its metadata cannot be read: the
    /// read that follows says why).
    #[must_use]
    pub fn size(&self) -> u64 {
        match self {
            Self::Memory(b) => b.len() as u64,
            _ => self
                .path()
                .and_then(|p| std::fs::metadata(p).ok())
                .map_or(0, |m| m.len()),
        }
    }
}

/// Where a source's export folders are.
pub trait Folder {
    /// Every data file and manifest under the folder.
    ///
    /// # Errors
    /// When the folder cannot be listed.
    fn entries(&self) -> Result<Vec<Entry>, String>;

    /// One file's contents.
    ///
    /// # Errors
    /// When it cannot be read.
    fn open(&self, rel: &str) -> Result<Contents, String>;
}

/// A file to read.
pub type DataFile = Entry;

/// What a folder holds that counts.
#[derive(Debug, Default)]
pub struct Listing {
    pub files: Vec<DataFile>,
    /// Data files left out because no current manifest lists them.
    pub excluded: usize,
    /// Manifests that could not be read, or that list files not there;
    /// their deliveries are not read at all.
    pub errors: Vec<String>,
}

fn is_data(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.ends_with(".csv") || n.ends_with(".csv.gz") || n.ends_with(".parquet")
}

/// Whether a folder entry is one the listing needs: data or a manifest.
#[must_use]
pub fn wanted(name: &str) -> bool {
    is_data(name) || name.ends_with("-Manifest.json") || name.eq_ignore_ascii_case("manifest.json")
}

fn name_of(rel: &str) -> &str {
    rel.rsplit('/').next().unwrap_or(rel)
}

fn parent_of(rel: &str) -> &str {
    rel.rsplit_once('/').map_or("", |(p, _)| p)
}

fn join(dir: &str, rel: &str) -> String {
    if dir.is_empty() {
        rel.to_owned()
    } else {
        format!("{dir}/{rel}")
    }
}

/// Whether `rel` is inside the folder `dir` (`""` is the root).
fn under(rel: &str, dir: &str) -> bool {
    dir.is_empty() || rel.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
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

/// Manifests are small; a larger one is not a manifest.
const MAX_MANIFEST_BYTES: u64 = 16 << 20;

fn read_text(folder: &dyn Folder, rel: &str) -> Result<String, String> {
    let contents = folder.open(rel)?;
    let bytes = match (&contents, contents.path()) {
        (Contents::Memory(b), _) => b.to_vec(),
        (_, Some(p)) => {
            let len = std::fs::metadata(p)
                .map_err(|e| format!("cannot read: {e}"))?
                .len();
            if len > MAX_MANIFEST_BYTES {
                return Err(format!("{len} bytes is too large for a manifest"));
            }
            std::fs::read(p).map_err(|e| format!("cannot read: {e}"))?
        }
        (_, None) => Vec::new(),
    };
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_owned())
}

/// Lists the files of `folder` that count.
///
/// # Errors
/// When the folder cannot be listed at all.
pub fn list(folder: &dyn Folder) -> Result<Listing, String> {
    let entries = folder.entries()?;
    let present: BTreeSet<&str> = entries.iter().map(|e| e.rel.as_str()).collect();
    let mut listing = Listing::default();
    // Folders a manifest governs, and the files counted in them.
    let mut governed: Vec<String> = Vec::new();
    let mut counted: BTreeSet<String> = BTreeSet::new();
    let mut newest: BTreeMap<(String, String), (String, String, Vec<String>)> = BTreeMap::new();
    for e in &entries {
        let name = name_of(&e.rel);
        if name.ends_with("-Manifest.json") {
            let Some(export_root) = aws_export_root(&e.rel) else {
                continue;
            };
            governed.push(join(&export_root, "data"));
            match read_text(folder, &e.rel).and_then(|t| aws_files(&t, &export_root)) {
                Ok(files) => {
                    check_listed(&e.rel, files, &present, &mut counted, &mut listing.errors)
                }
                Err(why) => listing.errors.push(format!("{}: {why}", e.rel)),
            }
        } else if name.eq_ignore_ascii_case("manifest.json") {
            let dir = parent_of(&e.rel);
            // The folder above the run's counts as governed too, so a run
            // still being written (its manifest not there yet) is not read.
            governed.push(parent_of(dir).to_owned());
            match read_text(folder, &e.rel).and_then(|t| azure_run(&t, dir, &present)) {
                // The newest run per (export, month) wins.
                Ok((export, month, submitted, files)) => {
                    let slot = newest.entry((export, month)).or_default();
                    if slot.1.is_empty() || submitted > slot.0 {
                        *slot = (submitted, e.rel.clone(), files);
                    }
                }
                Err(why) => listing.errors.push(format!("{}: {why}", e.rel)),
            }
        }
    }
    for (_, manifest, files) in newest.into_values() {
        check_listed(
            &manifest,
            files,
            &present,
            &mut counted,
            &mut listing.errors,
        );
    }
    for e in entries {
        if !is_data(name_of(&e.rel)) {
            continue;
        }
        if governed.iter().any(|g| under(&e.rel, g)) && !counted.contains(&e.rel) {
            listing.excluded += 1;
            continue;
        }
        listing.files.push(e);
    }
    listing.files.sort_by(|a, b| a.rel.cmp(&b.rel));
    Ok(listing)
}

/// Counts the files a manifest lists, unless one of them is missing: a
/// delivery is read whole or not at all.
fn check_listed(
    manifest: &str,
    files: Vec<String>,
    present: &BTreeSet<&str>,
    counted: &mut BTreeSet<String>,
    errors: &mut Vec<String>,
) {
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| !present.contains(f.as_str()))
        .collect();
    if missing.is_empty() {
        counted.extend(files);
    } else {
        errors.push(format!(
            "{manifest}: lists {} file(s) that are not there ({}); this delivery is not read until it is complete",
            missing.len(),
            missing.iter().take(3).map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
}

/// The export's folder: the one above `metadata/`.
fn aws_export_root(rel: &str) -> Option<String> {
    let parts: Vec<&str> = rel.split('/').collect();
    let at = parts.iter().rposition(|p| *p == "metadata")?;
    Some(parts[..at].join("/"))
}

fn aws_files(text: &str, export_root: &str) -> Result<Vec<String>, String> {
    let m: AwsManifest =
        serde_json::from_str(text).map_err(|e| format!("not an AWS export manifest: {e}"))?;
    let export = name_of(export_root);
    let marker = format!("/{export}/data/");
    m.data_files
        .iter()
        .map(|uri| {
            let at = uri
                .find(&marker)
                .ok_or_else(|| format!("dataFiles entry `{uri}` is not under `{export}/data/`"))?;
            let rest = &uri[at + marker.len()..];
            if rest.split('/').any(|part| part == ".." || part.is_empty()) {
                return Err(format!(
                    "dataFiles entry `{uri}` is not a file under the export"
                ));
            }
            Ok(join(&join(export_root, "data"), rest))
        })
        .collect()
}

type AzureRun = (String, String, String, Vec<String>);

fn azure_run(text: &str, dir: &str, present: &BTreeSet<&str>) -> Result<AzureRun, String> {
    let m: AzureManifest =
        serde_json::from_str(text).map_err(|e| format!("not an Azure export manifest: {e}"))?;
    // Without a name, the run's folder two levels up names the export.
    let export = m
        .export_config
        .and_then(|c| c.export_name)
        .unwrap_or_else(|| parent_of(parent_of(dir)).to_owned());
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
            // Relative to the source's folder; or, for a folder synced
            // without its container prefix, the file beside the manifest.
            let beside = join(dir, name_of(name));
            Ok(
                if present.contains(name) || !present.contains(beside.as_str()) {
                    name.to_owned()
                } else {
                    beside
                },
            )
        })
        .collect::<Result<_, String>>()?;
    Ok((export, month, m.run_info.submitted_time, files))
}

/// Files and folders walked before giving up: an export folder holds
/// thousands, not millions.
const MAX_ENTRIES: usize = 200_000;

/// A folder on this machine, read recursively.
pub struct LocalFolder {
    pub root: PathBuf,
}

impl Folder for LocalFolder {
    fn entries(&self) -> Result<Vec<Entry>, String> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.clone()];
        let mut seen = 0usize;
        while let Some(dir) = stack.pop() {
            let read = std::fs::read_dir(&dir)
                .map_err(|e| format!("cannot read the folder {}: {e}", dir.display()))?;
            for entry in read {
                let entry =
                    entry.map_err(|e| format!("cannot read the folder {}: {e}", dir.display()))?;
                seen += 1;
                if seen > MAX_ENTRIES {
                    return Err(format!(
                        "{} holds more than {MAX_ENTRIES} files and folders; point path at one export",
                        self.root.display()
                    ));
                }
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.') {
                    continue;
                }
                // Symbolic links to folders are not followed: a loop must not hang a load.
                let Ok(kind) = entry.file_type() else {
                    continue;
                };
                let path = entry.path();
                if kind.is_dir() {
                    stack.push(path);
                } else if wanted(&name) && (kind.is_file() || path.is_file()) {
                    let rel = relative(&self.root, &path);
                    let fingerprint = fingerprint(&path).map_err(|why| format!("{rel}: {why}"))?;
                    out.push(Entry { rel, fingerprint });
                }
            }
        }
        Ok(out)
    }

    fn open(&self, rel: &str) -> Result<Contents, String> {
        Ok(Contents::Local(self.root.join(rel)))
    }
}

fn relative(root: &Path, p: &Path) -> String {
    p.strip_prefix(root)
        .unwrap_or(p)
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("/")
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
