//! CODA code generation: IR → CUTLASS 3.x SM90 C++ ([`emit`]), via the EVT
//! node plan ([`plan`]), plus the build-script helper ([`epilogues`]) that
//! compiles the generated kernels with the pinned nvcc ([`toolchain`]).

pub mod build;
pub mod cache;
pub mod emit;
pub mod plan;
pub mod registry;
pub mod templates;
pub mod toolchain;

pub use build::{Build, ConfigSet, Kernel, Report, epilogues};
pub use emit::emit;
pub use toolchain::Toolchain;
