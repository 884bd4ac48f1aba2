use std::sync::{Arc, Mutex};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, sys};

use crate::Error;

/// A CUDA device and one stream on it, plus the GEMM workspace reused by
/// every launch on this stream (allocated once, grown when a kernel needs more).
pub struct Stream {
    stream: Arc<CudaStream>,
    sm_count: i32,
    workspace: Mutex<Option<CudaSlice<u8>>>,
}

impl Stream {
    /// A new (non-null) stream on device `ordinal`.
    pub fn new(ordinal: usize) -> Result<Stream, Error> {
        // SAFETY: only probes whether libcuda can be loaded.
        if !unsafe { sys::is_culib_present() } {
            return Err(Error::NoDevice("the CUDA driver library (libcuda.so) is not installed".into()));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| Error::NoDevice(format!("device {ordinal}: {e:?}")))?;
        let (major, minor) = ctx.compute_capability()?;
        if (major, minor) != (9, 0) {
            return Err(Error::NoDevice(format!(
                "device {ordinal} is sm_{major}{minor}; CODA kernels are built for sm_90a (H100/H200)"
            )));
        }
        let sm_count = ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?;
        Ok(Stream { stream: ctx.new_stream()?, sm_count, workspace: Mutex::new(None) })
    }

    /// The cudarc stream, for allocations and copies.
    pub fn cuda(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn ordinal(&self) -> usize {
        self.stream.context().ordinal()
    }

    pub fn sm_count(&self) -> i32 {
        self.sm_count
    }

    pub fn synchronize(&self) -> Result<(), Error> {
        Ok(self.stream.synchronize()?)
    }

    pub(crate) fn raw(&self) -> *mut std::ffi::c_void {
        self.stream.cu_stream() as *mut std::ffi::c_void
    }

    /// Runs `f` with a device workspace of at least `bytes` bytes.
    pub(crate) fn with_workspace<R>(&self, bytes: usize, f: impl FnOnce(u64, usize) -> R) -> Result<R, Error> {
        let mut ws = self.workspace.lock().unwrap_or_else(|p| p.into_inner());
        if bytes == 0 {
            return Ok(f(0, 0));
        }
        if ws.as_ref().is_none_or(|w| w.len() < bytes) {
            *ws = Some(self.stream.alloc_zeros::<u8>(bytes)?);
        }
        let w = ws.as_mut().expect("allocated above");
        let len = w.len();
        let (ptr, _sync) = cudarc::driver::DevicePtrMut::device_ptr_mut(w, &self.stream);
        Ok(f(ptr, len))
    }
}
