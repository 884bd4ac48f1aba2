//! Our CUTLASS headers (the `coda-cutlass-templates` crate), written into
//! each build's `OUT_DIR` so that the generated kernels include them from
//! there; the cache key hashes that folder's contents.

use std::path::{Path, PathBuf};

pub use coda_cutlass_templates::HEADERS;

/// Writes the headers under `dir/coda/` (only when changed) and returns `dir`.
pub fn write(dir: &Path) -> Result<PathBuf, String> {
    let coda = dir.join("coda");
    std::fs::create_dir_all(&coda).map_err(|e| format!("coda: cannot create {}: {e}", coda.display()))?;
    for (name, text) in HEADERS {
        let path = coda.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            crate::cache::write_atomic(&path, text)?;
        }
    }
    Ok(dir.to_path_buf())
}
