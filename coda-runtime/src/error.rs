use std::fmt;

/// Everything a launch can refuse or fail with.
#[derive(Debug)]
pub enum Error {
    /// An argument broke a rule; nothing was launched.
    Arg { name: String, rule: String },
    /// No usable CUDA device or driver.
    NoDevice(String),
    /// A CUDA driver call failed.
    Driver(cudarc::driver::DriverError),
    /// A generated launcher refused or failed (CUTLASS status, launch error).
    Kernel { kernel: &'static str, code: i32, message: String },
}

impl Error {
    pub(crate) fn arg(name: &str, rule: impl Into<String>) -> Error {
        Error::Arg { name: name.to_string(), rule: rule.into() }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Arg { name, rule } => write!(f, "argument `{name}`: {rule}"),
            Error::NoDevice(why) => write!(f, "no CUDA device: {why}"),
            Error::Driver(e) => write!(f, "CUDA driver error: {e:?}"),
            Error::Kernel { kernel, code, message } => write!(f, "kernel {kernel} failed (code {code}): {message}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<cudarc::driver::DriverError> for Error {
    fn from(e: cudarc::driver::DriverError) -> Self {
        Error::Driver(e)
    }
}
