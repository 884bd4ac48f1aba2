//! Our CUTLASS headers (`cutlass-templates/include/coda`), embedded so the
//! build helper works wherever this crate is built, and hashed into the
//! kernel cache key through the toolchain fingerprint.

use std::path::{Path, PathBuf};

pub const HEADERS: [(&str, &str); 5] = [
    ("launch.h", include_str!("../../cutlass-templates/include/coda/launch.h")),
    ("math.hpp", include_str!("../../cutlass-templates/include/coda/math.hpp")),
    ("pairwise.hpp", include_str!("../../cutlass-templates/include/coda/pairwise.hpp")),
    ("rowstate.hpp", include_str!("../../cutlass-templates/include/coda/rowstate.hpp")),
    ("sm90_gemm.hpp", include_str!("../../cutlass-templates/include/coda/sm90_gemm.hpp")),
];

/// Writes the headers under `dir/coda/` (only when changed) and returns `dir`.
pub fn write(dir: &Path) -> Result<PathBuf, String> {
    let coda = dir.join("coda");
    std::fs::create_dir_all(&coda).map_err(|e| format!("coda: cannot create {}: {e}", coda.display()))?;
    for (name, text) in HEADERS {
        let path = coda.join(name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(text) {
            std::fs::write(&path, text).map_err(|e| format!("coda: cannot write {}: {e}", path.display()))?;
        }
    }
    Ok(dir.to_path_buf())
}
