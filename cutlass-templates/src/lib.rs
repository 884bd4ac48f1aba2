//! The C++ headers that CODA's generated kernels include as `coda/<name>`,
//! embedded as text: `coda-codegen` writes them into each build's `OUT_DIR`,
//! so no path into a source checkout is needed once the crates are packaged.

/// `(file name, contents)` of every header under `include/coda/`.
pub const HEADERS: [(&str, &str); 8] = [
    ("colpartials.hpp", include_str!("../include/coda/colpartials.hpp")),
    ("fp8_promotion.hpp", include_str!("../include/coda/fp8_promotion.hpp")),
    ("group.hpp", include_str!("../include/coda/group.hpp")),
    ("launch.h", include_str!("../include/coda/launch.h")),
    ("math.hpp", include_str!("../include/coda/math.hpp")),
    ("pairwise.hpp", include_str!("../include/coda/pairwise.hpp")),
    ("rowstate.hpp", include_str!("../include/coda/rowstate.hpp")),
    ("sm90_gemm.hpp", include_str!("../include/coda/sm90_gemm.hpp")),
];
