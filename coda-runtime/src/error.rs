/// Everything the runtime can refuse or fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument broke a rule; nothing was launched.
    #[error("argument `{name}`: {rule}")]
    Arg { name: String, rule: String },
    /// No usable CUDA device or driver.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// A CUDA driver call failed.
    #[error("CUDA driver error: {0:?}")]
    Driver(#[from] cudarc::driver::DriverError),
    /// A generated launcher refused or failed (CUTLASS status, launch error).
    #[error("kernel {kernel} failed (code {code}): {message}")]
    Kernel { kernel: &'static str, code: i32, message: String },
    /// A vendor library (cuBLAS, cuBLASLt) is missing or failed.
    #[error("{library}: {message}")]
    Library { library: &'static str, message: String },
    /// The tuning cache could not be read or written.
    #[error("tuning cache {path}: {source}")]
    TuningCache {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// An argument error: `name` breaks `rule`.
    pub fn arg(name: &str, rule: impl Into<String>) -> Error {
        Error::Arg { name: name.to_string(), rule: rule.into() }
    }
}
