use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cudarc::driver::{CudaContext, CudaSlice, CudaStream, sys};

use crate::Error;

/// The handles cuda.h defines as `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD`.
const LEGACY: sys::CUstream = std::ptr::without_provenance_mut(0x1);
const PER_THREAD: sys::CUstream = std::ptr::without_provenance_mut(0x2);

/// Device `ordinal`'s primary context. An `ordinal` past `i32::MAX` is
/// [`Error::Arg`] (the driver takes an `int`: it would wrap to another
/// device), checked before the driver is loaded.
fn primary_context(ordinal: usize) -> Result<Arc<CudaContext>, Error> {
    if i32::try_from(ordinal).is_err() {
        return Err(Error::arg("ordinal", format!("{ordinal} must be ≤ 2^31 − 1 (a CUDA device index)")));
    }
    // SAFETY: only probes whether libcuda can be loaded.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::NoDevice("the CUDA driver library (libcuda.so) is not installed".into()));
    }
    CudaContext::new(ordinal).map_err(|e| Error::NoDevice(format!("device {ordinal}: {e:?}")))
}

/// A CUDA device and one stream on it, plus the GEMM workspace reused by
/// every launch on this stream (allocated once, grown when a kernel needs more).
pub struct Stream {
    stream: Arc<CudaStream>,
    sm_count: i32,
    device_name: String,
    workspace: Mutex<Option<CudaSlice<u8>>>,
    /// Zero bf16 operands of the empty GEMM that map programs run on.
    zeros: Mutex<Option<CudaSlice<half::bf16>>>,
    launches: [AtomicUsize; 3],
}

/// Device memory of a stream's memory pool (see [`Stream::pool_usage`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolUsage {
    pub used: usize,
    pub peak: usize,
}

/// Kernels enqueued on a stream so far, by kind (see [`Stream::launches`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Launches {
    /// Fused GEMM-epilogue programs (map programs included).
    pub fused: usize,
    /// Aux reductions.
    pub aux: usize,
    /// Plain cuBLAS GEMMs.
    pub blas: usize,
}

/// The launches between two counts, `later - earlier`. Saturating, as
/// `Instant - Instant` is: counts taken in the wrong order give zero, never
/// a wrapped count or a panic.
impl std::ops::Sub for Launches {
    type Output = Launches;
    fn sub(self, o: Launches) -> Launches {
        Launches {
            fused: self.fused.saturating_sub(o.fused),
            aux: self.aux.saturating_sub(o.aux),
            blas: self.blas.saturating_sub(o.blas),
        }
    }
}

/// What kind of kernel a launch enqueued (see [`Stream::count`]).
#[derive(Clone, Copy, Debug)]
pub enum LaunchKind {
    Fused = 0,
    Aux = 1,
    Blas = 2,
}

impl Stream {
    /// A new (non-null) stream on device `ordinal`. An `ordinal` past
    /// `i32::MAX` is [`Error::Arg`] (the driver takes an `int`: it would wrap
    /// to another device), checked before the driver is loaded.
    pub fn new(ordinal: usize) -> Result<Stream, Error> {
        let ctx = primary_context(ordinal)?;
        Stream::from_cuda(ctx.new_stream()?)
    }

    /// Launches on a stream another library made (candle's, or any cudarc
    /// stream): work is ordered with everything else on it. Tensors are
    /// launch arguments when they were allocated on this same `Arc` (or
    /// borrowed for it: [`crate::TensorView`], [`crate::RawTensor`]).
    ///
    /// The null stream is refused (launchers would reject it; for the legacy
    /// default stream use [`Stream::from_raw`] with a null handle), and so is
    /// the per-thread default stream: a `Stream` is shared across threads,
    /// and its workspace must be ordered on one stream.
    pub fn from_cuda(stream: Arc<CudaStream>) -> Result<Stream, Error> {
        let raw = stream.cu_stream();
        if raw.is_null() || raw == PER_THREAD {
            return Err(Error::arg(
                "stream",
                "the null or per-thread default stream cannot be shared by a Stream; \
                 use a created stream, or Stream::from_raw(ordinal, null) for the legacy default stream",
            ));
        }
        let ctx = stream.context();
        let (major, minor) = ctx.compute_capability()?;
        if (major, minor) != (9, 0) {
            return Err(Error::NoDevice(format!(
                "device {} is sm_{major}{minor}; CODA kernels are built for sm_90a (H100/H200)",
                ctx.ordinal()
            )));
        }
        Ok(Stream {
            device_name: ctx.name()?,
            sm_count: ctx.attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            stream,
            workspace: Mutex::new(None),
            zeros: Mutex::new(None),
            launches: Default::default(),
        })
    }

    /// Launches on a raw `CUstream` of device `ordinal`'s primary context
    /// (the one PyTorch and the CUDA runtime use), e.g.
    /// `torch.cuda.current_stream().cuda_stream`. A null handle means the
    /// legacy default stream, which launches then name explicitly
    /// (`CU_STREAM_LEGACY`: the launchers refuse a null stream, which can
    /// only mean one was not passed). The per-thread default stream and a
    /// stream of another context are refused.
    ///
    /// # Safety
    /// `raw` is a live stream (or null, or `CU_STREAM_LEGACY`) that its owner
    /// keeps alive while this `Stream`, anything launched on it, and every
    /// tensor allocated on it (they free on it when dropped) may use it.
    pub unsafe fn from_raw(ordinal: usize, raw: sys::CUstream) -> Result<Stream, Error> {
        let ctx = primary_context(ordinal)?;
        let raw = if raw.is_null() { LEGACY } else { raw };
        if raw == PER_THREAD {
            return Err(Error::arg("stream", "the per-thread default stream cannot be shared by a Stream; pass a created stream"));
        }
        if raw != LEGACY {
            ctx.bind_to_thread()?;
            let mut owner = std::ptr::null_mut();
            // SAFETY: `raw` is a live stream (the caller's promise); `owner` is written once.
            unsafe { sys::cuStreamGetCtx(raw, &mut owner) }.result()?;
            if owner != ctx.cu_ctx() {
                return Err(Error::arg(
                    "stream",
                    format!("belongs to another CUDA context than device {ordinal}'s primary context"),
                ));
            }
        }
        // SAFETY: the caller keeps `raw` alive; it belongs to `ctx` (checked above).
        Stream::from_cuda(unsafe { ctx.wrap_borrowed_stream(raw) })
    }

    /// The cudarc stream, for allocations and copies.
    pub fn cuda(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    pub fn ordinal(&self) -> usize {
        self.stream.context().ordinal()
    }

    /// The device's name, e.g. `NVIDIA H200` (a key of tuning caches).
    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    pub fn sm_count(&self) -> i32 {
        self.sm_count
    }

    /// How many kernels of each kind this stream has enqueued, to count an op's launches.
    pub fn launches(&self) -> Launches {
        let n = |k: LaunchKind| self.launches[k as usize].load(Ordering::Relaxed);
        Launches { fused: n(LaunchKind::Fused), aux: n(LaunchKind::Aux), blas: n(LaunchKind::Blas) }
    }

    /// Counts one launch of `kind` (libraries count the vendor GEMMs they enqueue).
    pub fn count(&self, kind: LaunchKind) {
        self.launches[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Bytes of the device's current memory pool in use now and at most
    /// since the last [`Stream::reset_pool_peak`]. CODA's tensors, workspaces
    /// and chunk buffers are allocated stream-ordered from that pool (on a
    /// device with memory pools, as every Hopper has), so this is what CODA
    /// holds beside a framework whose allocator does not use the pool
    /// (PyTorch's default one does not).
    pub fn pool_usage(&self) -> Result<PoolUsage, Error> {
        let pool = self.pool()?;
        let get = |attr| -> Result<usize, Error> {
            let mut v: u64 = 0;
            // SAFETY: a live pool; both attributes are written as a cuuint64_t.
            unsafe { sys::cuMemPoolGetAttribute(pool, attr, (&raw mut v).cast()) }.result()?;
            Ok(v as usize)
        };
        use sys::CUmemPool_attribute::{CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_HIGH};
        Ok(PoolUsage { used: get(CU_MEMPOOL_ATTR_USED_MEM_CURRENT)?, peak: get(CU_MEMPOOL_ATTR_USED_MEM_HIGH)? })
    }

    /// Starts [`PoolUsage::peak`] again from the bytes in use now.
    pub fn reset_pool_peak(&self) -> Result<(), Error> {
        let pool = self.pool()?;
        let mut zero: u64 = 0;
        // SAFETY: a live pool; the driver accepts only 0 for this attribute, as a cuuint64_t.
        unsafe { sys::cuMemPoolSetAttribute(pool, sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_USED_MEM_HIGH, (&raw mut zero).cast()) }
            .result()?;
        Ok(())
    }

    fn pool(&self) -> Result<sys::CUmemoryPool, Error> {
        let ctx = self.stream.context();
        ctx.bind_to_thread()?;
        let mut pool = std::ptr::null_mut();
        // SAFETY: the context's device is live and bound; `pool` is written once.
        unsafe { sys::cuDeviceGetMemPool(&mut pool, ctx.cu_device()) }.result()?;
        Ok(pool)
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

    /// At least `elems` zero bf16 values on this stream, kept and grown as
    /// needed; never written, so every launch may read them. The lock is held
    /// until the guard drops, after the launch that reads them is enqueued, so
    /// another thread cannot replace (free) them in between.
    pub(crate) fn zero_operand(&self, elems: usize) -> Result<ZeroOperand<'_>, Error> {
        let mut z = self.zeros.lock().unwrap_or_else(|p| p.into_inner());
        if z.as_ref().is_none_or(|b| b.len() < elems) {
            *z = Some(self.stream.alloc_zeros(elems.next_power_of_two())?);
        }
        // The read guard may drop at once: nothing ever writes these zeros, and
        // the lock, not an event, keeps them alive until the launch is enqueued.
        let address = cudarc::driver::DevicePtr::device_ptr(z.as_ref().expect("allocated above"), &self.stream).0;
        Ok(ZeroOperand { _lock: z, address })
    }
}

/// The zero operand of a map program's empty GEMM, locked while in use.
pub(crate) struct ZeroOperand<'s> {
    _lock: MutexGuard<'s, Option<CudaSlice<half::bf16>>>,
    pub address: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An ordinal the driver's `int` cannot hold is refused, not wrapped to
    /// device 0 (no GPU needed: checked first).
    #[test]
    fn ordinals_past_i32_are_refused() {
        for ordinal in [1usize << 32, i32::MAX as usize + 1, usize::MAX] {
            match Stream::new(ordinal) {
                Err(Error::Arg { name, rule }) => assert!(name == "ordinal" && rule.contains("≤ 2^31 − 1"), "{rule}"),
                other => panic!("ordinal {ordinal}: expected an argument error, got {:?}", other.map(|s| s.ordinal())),
            }
        }
    }

    /// Counts subtracted in the wrong order give zero, not a wrapped count.
    #[test]
    fn launch_counts_subtract_without_wrapping() {
        let (a, b) = (Launches { fused: 5, aux: 2, blas: 0 }, Launches { fused: 3, aux: 4, blas: 1 });
        assert_eq!(a - b, Launches { fused: 2, aux: 0, blas: 0 });
        assert_eq!(b - a, Launches { fused: 0, aux: 2, blas: 1 });
    }
}
