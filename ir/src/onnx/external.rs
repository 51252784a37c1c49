//! External data: tensor payloads stored in files beside the model.
//!
//! Each referenced file is memory-mapped once and shared by every tensor that points into it.
//! The `location` key is untrusted: it must be a relative path without `..` components, and
//! the file it names, after resolving symlinks, must lie inside the model's directory.
//! `offset` and `length` are checked against the file's size with checked arithmetic.

use super::proto::StringStringEntryProto;
use bytes::Bytes;
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// Maps of the external data files of one model.
pub struct ExternalData {
    /// The model's directory, canonicalized; `None` when the model came from memory.
    base_dir: Option<PathBuf>,
    maps: HashMap<PathBuf, Bytes>,
}

impl ExternalData {
    pub fn new(model_dir: Option<&Path>) -> ExternalData {
        let base_dir =
            model_dir.map(|d| std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf()));
        ExternalData {
            base_dir,
            maps: HashMap::new(),
        }
    }

    /// The bytes an `external_data` entry list points at. `size` is the byte size the tensor's
    /// type needs, used when `length` is absent.
    pub fn load(&mut self, entries: &[StringStringEntryProto], size: u64) -> Result<Bytes, String> {
        let get = |key: &str| {
            entries
                .iter()
                .find(|e| e.key == key)
                .map(|e| e.value.as_str())
        };
        let location = get("location").ok_or("its external data has no `location`")?;
        let parse = |key: &str| -> Result<Option<u64>, String> {
            get(key)
                .map(|v| {
                    v.trim().parse::<u64>().map_err(|_| {
                        format!("external data `{key}` is not a non-negative integer: {v:?}")
                    })
                })
                .transpose()
        };
        let offset = parse("offset")?.unwrap_or(0);
        let length = parse("length")?.unwrap_or(size);
        let path = self.resolve(location)?;
        let map = self.map(&path, location)?;
        let end = offset
            .checked_add(length)
            .ok_or_else(|| format!("external data offset {offset} + length {length} overflows"))?;
        if end > map.len() as u64 {
            return Err(format!(
                "external data `{location}` has {} bytes, but the tensor reads bytes {offset}..{end}",
                map.len()
            ));
        }
        // Both bounds are at most map.len(), which fits in usize.
        Ok(map.slice(offset as usize..end as usize))
    }

    /// Checks `location` and returns the canonical path of the file it names.
    fn resolve(&self, location: &str) -> Result<PathBuf, String> {
        let relative = Path::new(location);
        if location.is_empty() {
            return Err("external data `location` is empty".to_string());
        }
        if relative.is_absolute() || location.starts_with('/') || location.starts_with('\\') {
            return Err(format!("external data location `{location}` is absolute; it must be relative to the model's directory"));
        }
        if relative.components().any(|c| {
            matches!(
                c,
                Component::ParentDir | Component::Prefix(_) | Component::RootDir
            )
        }) {
            return Err(format!("external data location `{location}` contains `..`; it must stay inside the model's directory"));
        }
        let Some(base) = &self.base_dir else {
            return Err(format!(
                "the model refers to external data `{location}`, but it was not loaded from a file"
            ));
        };
        let joined = base.join(relative);
        let canonical = std::fs::canonicalize(&joined).map_err(|e| {
            format!(
                "cannot open external data `{location}` ({}): {e}",
                joined.display()
            )
        })?;
        if !canonical.starts_with(base) {
            return Err(format!(
                "external data location `{location}` resolves to {}, outside the model's directory {}",
                canonical.display(),
                base.display()
            ));
        }
        Ok(canonical)
    }

    fn map(&mut self, path: &Path, location: &str) -> Result<Bytes, String> {
        if let Some(map) = self.maps.get(path) {
            return Ok(map.clone());
        }
        let map =
            map_file(path).map_err(|e| format!("cannot map external data `{location}`: {e}"))?;
        self.maps.insert(path.to_path_buf(), map.clone());
        Ok(map)
    }
}

/// Memory-maps a whole file read-only as `Bytes` (an empty file gives empty bytes).
pub fn map_file(path: &Path) -> std::io::Result<Bytes> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the map is read-only. memc assumes model files are not modified while it runs;
    // a concurrent truncation could fault, as with any memory-mapped reader (ONNX Runtime's
    // included).
    let map = unsafe { memmap2::Mmap::map(&file)? };
    // Importing reads only protobuf headers between large payloads. Without this hint the
    // kernel reads ahead and maps the cached pages around each header into the process, which
    // grows its resident set with weight bytes nobody reads.
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Random);
    Ok(Bytes::from_owner(map))
}
