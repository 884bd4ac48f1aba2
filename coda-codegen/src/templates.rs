//! Our CUTLASS headers (the `coda-cutlass-templates` crate), written into
//! each build's `OUT_DIR` so that the generated kernels include them from
//! there; the cache key hashes that folder's contents.

use std::path::{Path, PathBuf};

pub use coda_cutlass_templates::HEADERS;

/// Writes the headers under `dir/coda/` (only when changed), removes any
/// other file there (a header since renamed, which the cache key's hash of
/// the folder would count), and returns `dir`.
pub fn write(dir: &Path) -> Result<PathBuf, String> {
    let coda = dir.join("coda");
    std::fs::create_dir_all(&coda).map_err(|e| format!("coda: cannot create {}: {e}", coda.display()))?;
    for (name, text) in HEADERS {
        let path = coda.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            crate::cache::write_atomic(&path, text)?;
        }
    }
    let entries = std::fs::read_dir(&coda).map_err(|e| format!("coda: cannot read {}: {e}", coda.display()))?;
    for entry in entries {
        let path = entry.map_err(|e| format!("coda: cannot read {}: {e}", coda.display()))?.path();
        if !HEADERS.iter().any(|(name, _)| path.file_name().is_some_and(|f| f == *name)) {
            let removed = if path.is_dir() { std::fs::remove_dir_all(&path) } else { std::fs::remove_file(&path) };
            removed.map_err(|e| format!("coda: cannot remove {}: {e}", path.display()))?;
        }
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    /// A header renamed since the last build must not stay in the folder the cache key hashes.
    #[test]
    fn write_removes_stale_headers() {
        let dir = std::env::temp_dir().join(format!("coda-templates-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("coda")).unwrap();
        std::fs::write(dir.join("coda/renamed.hpp"), "old").unwrap();
        super::write(&dir).unwrap();
        let mut names: Vec<String> =
            std::fs::read_dir(dir.join("coda")).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        let want: Vec<&str> = super::HEADERS.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, want);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
