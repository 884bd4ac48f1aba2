//! `coda_rs._coda`, the native half of the `coda_rs` Python package: the
//! compiled programs of this wheel (coda-llama's) launched on DLPack tensors
//! (PyTorch's, without copies) on a raw CUDA stream (PyTorch's current one).
//! `python/coda_rs/__init__.py` is the public API; it allocates outputs with
//! PyTorch and passes everything here in parameter order. Every rule is
//! checked by the runtime as for a Rust caller; an [`Error::Arg`] becomes
//! `ArgumentError` (a `ValueError` whose `argument` names the argument),
//! any other error `CodaError` (a `RuntimeError`).

mod block;
mod head;

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, OnceLock};

use coda_runtime::cudarc::driver::sys::{CUstreamCaptureStatus, cuStreamIsCapturing};
use dlpark::ffi::{DLDevice, DLDeviceType};
use dlpark::python::consumer::stream::{self as dlpack_stream, DlpackStream, StreamArg};
use dlpark::{DlpackElement, Managed, ManagedTensorBase};
use dlpark::python::{ImportRequest, ImportedDlpack};
use coda_runtime::dsl::ir::{BLayout, DType};
use coda_llama::blas::Cublas;
use coda_llama::layout::{FfnDims, HeadRows, QkvDims};
use coda_runtime::{AnyTensor, Choice, Element, Error, Kernel, Raster, RawTensor, Span, Stream, TensorArg, bf16, check_disjoint, tune};
use pyo3::create_exception;
use pyo3::exceptions::{PyBufferError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

create_exception!(_coda, ArgumentError, PyValueError, "An argument broke a rule; nothing was launched. `argument` names it.");
create_exception!(_coda, CodaError, PyRuntimeError, "CODA could not launch: no usable GPU, a driver or kernel error.");

/// `ArgumentError` naming `name`.
fn argument_error(py: Python<'_>, name: &str, rule: &str) -> PyErr {
    let err = ArgumentError::new_err(format!("argument `{name}`: {rule}"));
    // Setting an attribute on a fresh exception instance cannot fail.
    let _ = err.value(py).setattr("argument", name);
    err
}

/// An exception raised by a tensor's own protocol methods (`__dlpack__`,
/// `record_stream`) as a refusal of argument `name` where it says the object
/// cannot be used that way (`TypeError`, `ValueError`, `BufferError`; kept as
/// the refusal's cause); any other (`KeyboardInterrupt`, `MemoryError`, a CUDA
/// `RuntimeError`) propagates as raised.
fn refusal(py: Python<'_>, name: &str, e: PyErr, rule: impl FnOnce(&PyErr) -> String) -> PyErr {
    if !(e.is_instance_of::<PyTypeError>(py) || e.is_instance_of::<PyValueError>(py) || e.is_instance_of::<PyBufferError>(py)) {
        return e;
    }
    let err = argument_error(py, name, &rule(&e));
    err.set_cause(py, Some(e));
    err
}

fn to_py(py: Python<'_>, e: Error) -> PyErr {
    match e {
        Error::Arg { name, rule } => argument_error(py, &name, &rule),
        other => CodaError::new_err(other.to_string()),
    }
}

/// The programs compiled into this wheel.
fn kernels() -> &'static [&'static Kernel] {
    static KERNELS: OnceLock<Vec<&'static Kernel>> = OnceLock::new();
    KERNELS.get_or_init(|| coda_llama::programs::kernels().to_vec())
}

/// A program by its full name (`coda-llama::swiglu`) or its own (`swiglu`).
fn kernel(py: Python<'_>, name: &str) -> PyResult<&'static Kernel> {
    kernels().iter().copied().find(|k| k.name() == name || k.name().rsplit("::").next() == Some(name)).ok_or_else(|| {
        let names: Vec<&str> = kernels().iter().map(|k| k.name()).collect();
        argument_error(py, "program", &format!("no program `{name}` in this build; it has {}", names.join(", ")))
    })
}

/// PyTorch's current stream of a device: CODA's `Stream` over it, its raw
/// handle and the `torch.cuda.Stream` object.
pub(crate) struct Current<'py> {
    pub(crate) stream: Arc<Stream>,
    raw: usize,
    torch: Bound<'py, PyAny>,
}

/// The current stream of `device` (asked of PyTorch here, so no stream
/// handle crosses from Python code). Its `Stream` is made once per (device,
/// stream) so that its workspace and zero operands are reused across
/// launches, as PyTorch reuses its streams: they come from pools it never
/// destroys (an `ExternalStream`'s owner must keep it alive as long as it
/// launches CODA programs on it). A stream being captured into a CUDA graph
/// is refused: the workspace a launch may allocate on it would belong to the graph.
fn current_stream<'py>(py: Python<'py>, device: usize) -> PyResult<Current<'py>> {
    static STREAMS: OnceLock<Mutex<HashMap<(usize, usize), Arc<Stream>>>> = OnceLock::new();
    let unusable = |e: PyErr| CodaError::new_err(format!("launches need PyTorch with CUDA: {e}"));
    let torch = py.import("torch").map_err(unusable)?;
    let current = torch.getattr("cuda")?.call_method1("current_stream", (device,)).map_err(unusable)?;
    let raw: usize = current.getattr("cuda_stream")?.extract()?;
    let mut streams = STREAMS.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    let s = match streams.get(&(device, raw)) {
        Some(s) => s.clone(),
        None => {
            // SAFETY: `raw` is PyTorch's live stream of `device`, kept alive by
            // PyTorch for the life of the process (see above).
            let s = unsafe { Stream::from_raw(device, raw as *mut c_void as _) };
            let s = Arc::new(s.map_err(|e| CodaError::new_err(format!("PyTorch's current stream of device {device}: {e}")))?);
            streams.insert((device, raw), s.clone());
            s
        }
    };
    let mut status = CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
    s.cuda().context().bind_to_thread().map_err(|e| to_py(py, e.into()))?;
    // SAFETY: a live stream of the context just bound; `status` is written once.
    unsafe { cuStreamIsCapturing(s.cuda().cu_stream(), &mut status) }.result().map_err(|e| to_py(py, e.into()))?;
    if status != CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE {
        return Err(CodaError::new_err("the current stream is capturing a CUDA graph; CODA launches cannot be captured yet"));
    }
    Ok(Current { stream: s, raw, torch: current })
}

/// The consumer stream a DLPack producer is asked to make its data ready on.
struct ConsumerStream(usize);

// SAFETY: a live stream of the tensors' device (PyTorch's current one,
// `current_stream`), where every launch of this call is enqueued.
unsafe impl DlpackStream for ConsumerStream {
    fn as_python_arg(&self, _py: Python<'_>, _device: DLDevice) -> PyResult<StreamArg> {
        Ok(dlpack_stream::cuda(self.0 as *mut c_void))
    }
}

/// Refuses anything but a CUDA tensor of `device` (any device when `None`),
/// before a stream or a GPU is needed; returns the CUDA device.
fn check_cuda(py: Python<'_>, name: &str, obj: &Bound<'_, PyAny>, device: Option<usize>) -> PyResult<usize> {
    if !obj.hasattr("__dlpack__")? {
        let kind = obj.get_type().name()?;
        return Err(argument_error(py, name, &format!("is not a DLPack tensor (a {kind}); pass a torch CUDA tensor")));
    }
    let request = ImportRequest::new(obj.as_borrowed())
        .map_err(|e| refusal(py, name, e, |e| format!("is not a DLPack tensor ({e}); pass a torch CUDA tensor")))?;
    let d = request.device().map_err(|e| argument_error(py, name, &format!("does not state its DLPack device ({e})")))?;
    let cuda = (d.device_type == DLDeviceType::CUDA).then(|| usize::try_from(d.device_id).ok()).flatten();
    match (cuda, device) {
        (None, _) => {
            let place = match d.device_type {
                DLDeviceType::CPU => "the CPU".to_string(),
                DLDeviceType::CUDAHOST => "pinned host memory".to_string(),
                DLDeviceType::CUDAMANAGED => "CUDA managed memory".to_string(),
                DLDeviceType::ROCM => format!("ROCm device {}", d.device_id),
                other => format!("DLPack device type {}", other.0),
            };
            Err(argument_error(py, name, &format!("is on {place}; CODA needs CUDA tensors (device memory of an H100/H200)")))
        }
        (Some(c), Some(want)) if c != want => Err(argument_error(py, name, &format!("is on CUDA device {c}; the launch is on device {want}"))),
        (Some(c), _) => Ok(c),
    }
}

/// How a launch's tensors are kept alive until it has run.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Use {
    /// `Tensor.record_stream` on the launch's stream: `launch`, whose
    /// callers may pass tensors made on any stream.
    Recorded,
    /// Stream order alone, as for PyTorch's own ops: the ops registered
    /// with `torch.library` (block, LM-head tail). A recorded use would
    /// leave an event on memory of a CUDA-graph pool, which Inductor's CUDA
    /// graph trees (`reduce-overhead`, `max-autotune`) refuse to checkpoint.
    StreamOrdered,
}

/// `obj`, a `torch.Tensor` on CUDA device `device`, imported through
/// DLPack with its data ready on the current stream `on`, without a copy.
/// With `Use::Recorded` (`launch`) the tensor's memory is also marked as
/// used on `on` (`Tensor.record_stream`, as PyTorch asks of code that uses a
/// tensor on another stream than its own): freed while a launch enqueued
/// here has not run, PyTorch's allocator hands it to other work only after
/// that launch (on the tensor's own stream the stream order alone ensures
/// it). Memory that PyTorch's allocator does not own (`torch.from_dlpack` of
/// another framework's, another process's) is its owner's to keep until the
/// launch has run, as for PyTorch's own ops.
fn import(py: Python<'_>, name: &str, obj: &Bound<'_, PyAny>, device: usize, on: &Current<'_>, used: Use) -> PyResult<ImportedDlpack> {
    check_cuda(py, name, obj, Some(device))?;
    // Only PyTorch tensors: the lifetime rules above are its allocator's.
    if !obj.is_instance(&py.import("torch")?.getattr("Tensor")?)? {
        let kind = obj.get_type().name()?;
        return Err(argument_error(py, name, &format!("is a {kind}; pass a torch.Tensor")));
    }
    if used == Use::Recorded {
        obj.call_method1("record_stream", (&on.torch,))
            .map_err(|e| refusal(py, name, e, |e| format!("cannot be marked as used on the current stream (Tensor.record_stream: {e})")))?;
    }
    let request = ImportRequest::new(obj.as_borrowed())?;
    request.import(Some(&ConsumerStream(on.raw)), Some(false)).map_err(|e| refusal(py, name, e, |e| format!("DLPack import failed: {e}")))
}

/// An imported tensor as a launch argument of its parameter's dtype.
enum Raw<'a> {
    Bf16(RawTensor<'a, bf16>),
    F32(RawTensor<'a, f32>),
    I32(RawTensor<'a, i32>),
}

/// An imported tensor as a launch argument of element type `T` named `name`.
fn raw<'a, T: Element + DlpackElement>(stream: &Stream, name: &str, t: &'a ImportedDlpack) -> Result<RawTensor<'a, T>, Error> {
    // SAFETY: the producer made the data ready on `stream` (`import`), the
    // launch is enqueued on `stream`, and PyTorch's allocator reuses the
    // memory only after the work enqueued on `stream` before its free
    // (`import` recorded the stream on the tensor); memory it does not own
    // is kept by its owner, the package's documented contract (`import`).
    let raw = unsafe {
        match t {
            ImportedDlpack::Legacy(m) => RawTensor::from_dlpack(stream, m),
            ImportedDlpack::Versioned(m) => RawTensor::from_dlpack(stream, m),
        }
    };
    // The runtime names the DLPack tensor generically; say which argument it is.
    raw.map_err(|e| match e {
        Error::Arg { name: what, rule } if what == "tensor" => Error::arg(name, rule),
        Error::Arg { name: what, rule } => Error::arg(name, format!("{what}: {rule}")),
        other => other,
    })
}

/// The device bytes an imported tensor reaches, from its strides (a
/// broadcast `expand` reaches fewer than its elements; `raw` refuses what is
/// not dense, by name, after this); `None` for one that is not a valid
/// DLPack tensor, which `raw` refuses too.
fn span_of(t: &ImportedDlpack) -> Option<(u64, usize)> {
    fn of<M: ManagedTensorBase>(m: &Managed<M>) -> Option<(u64, usize)> {
        let t = m.validate().ok()?;
        let element = (t.dtype().bits as usize * t.dtype().lanes as usize).div_ceil(8);
        let start = (t.data_ptr() as u64).checked_add(t.byte_offset())?;
        let strides = t.strides_or_compact().ok()?;
        let mut last = 0usize; // the farthest element's index
        for (&d, &s) in t.shape().iter().zip(strides.iter()) {
            match usize::try_from(d).ok()? {
                0 => return Some((start, 0)),
                d => last = last.checked_add((d - 1).checked_mul(usize::try_from(s.unsigned_abs()).ok()?)?)?,
            }
        }
        Some((start, last.checked_add(1)?.checked_mul(element)?))
    }
    match t {
        ImportedDlpack::Legacy(m) => of(m),
        ImportedDlpack::Versioned(m) => of(m),
    }
}

/// The contract of [`RawTensor::new`] for the tensors of one call taken
/// together: a tensor the call writes (in a group passed `true`) may overlap
/// no other tensor of the call, since the op's launches write and read them
/// in turn. Groups are `(names, tensors, written)`.
pub(crate) fn disjoint(py: Python<'_>, groups: &[(&[&str], &[ImportedDlpack], bool)]) -> PyResult<()> {
    let spans: Vec<Span> = groups
        .iter()
        .flat_map(|&(names, tensors, written)| names.iter().zip(tensors).map(move |(name, t)| (*name, t, written)))
        .filter_map(|(name, t, written)| span_of(t).map(|(address, bytes)| Span { name, address, bytes, written }))
        .collect();
    check_disjoint(&spans).map_err(|e| to_py(py, e))
}

/// The contracts of the tensors of an op that launches fused GEMMs (the
/// block, the LM-head tail), checked together under the caller's names
/// before the first launch: [`disjoint`], and a start 16-byte aligned for
/// the GEMMs' TMA copies. Each launch checks alignment too, but under its
/// program's parameter names and after the op's earlier launches; one rule
/// for all of the op's tensors (QK-norm's weights, which only a small kernel
/// reads, included): PyTorch's allocator aligns every tensor, so only a view
/// at an offset into other memory breaks it.
pub(crate) fn gemm_op(py: Python<'_>, groups: &[(&[&str], &[ImportedDlpack], bool)]) -> PyResult<()> {
    for &(names, tensors, _) in groups {
        for (name, t) in names.iter().zip(tensors) {
            if let Some((address, bytes)) = span_of(t)
                && bytes > 0
                && address % 16 != 0
            {
                let rule = format!("starts at {address:#x}, not 16-byte aligned as the fused GEMMs' TMA copies need (a view at an offset into other memory: pass a .clone())");
                return Err(argument_error(py, name, &rule));
            }
        }
    }
    disjoint(py, groups)
}

impl<'a> Raw<'a> {
    fn new(stream: &Stream, name: &str, dtype: DType, t: &'a ImportedDlpack) -> Result<Raw<'a>, Error> {
        Ok(match dtype {
            DType::Bf16 => Raw::Bf16(raw(stream, name, t)?),
            DType::F32 => Raw::F32(raw(stream, name, t)?),
            DType::I32 => Raw::I32(raw(stream, name, t)?),
            DType::E4m3 | DType::E5m2 => {
                return Err(Error::arg(name, format!("{} tensors are not taken from Python yet", dtype.rust_name())));
            }
        })
    }
    fn any(&self) -> &dyn AnyTensor {
        match self {
            Raw::Bf16(t) => t,
            Raw::F32(t) => t,
            Raw::I32(t) => t,
        }
    }
    fn arg(&mut self, output: bool) -> TensorArg<'_> {
        match (self, output) {
            (Raw::Bf16(t), false) => TensorArg::input(&*t),
            (Raw::Bf16(t), true) => TensorArg::output(t),
            (Raw::F32(t), false) => TensorArg::input(&*t),
            (Raw::F32(t), true) => TensorArg::output(t),
            (Raw::I32(t), false) => TensorArg::input(&*t),
            (Raw::I32(t), true) => TensorArg::output(t),
        }
    }
}

fn raster_code(r: Raster) -> u8 {
    match r {
        Raster::Heuristic => 0,
        Raster::AlongM => 1,
        Raster::AlongN => 2,
    }
}

/// The names of the programs in this build.
#[pyfunction]
fn programs() -> Vec<&'static str> {
    kernels().iter().map(|k| k.name()).collect()
}

/// A program's interface: `name`, `map` (no GEMM), `b_layout` (`"nk"`: `b`
/// is `[N, K]`; `"kn"`: `[K, N]`), `params` (dicts of `name`, `dtype`
/// `bf16|f32|i32`, `shape` as the DSL names it, `output`), `scalars` (names,
/// in order) and `configs` (compiled, the program's own first).
#[pyfunction]
fn program_info<'py>(py: Python<'py>, program: &str) -> PyResult<Bound<'py, PyDict>> {
    let k = kernel(py, program)?;
    let info = PyDict::new(py);
    info.set_item("name", k.name())?;
    info.set_item("map", k.is_map())?;
    info.set_item("b_layout", if k.b_layout() == BLayout::Kn { "kn" } else { "nk" })?;
    let params = k
        .params()
        .iter()
        .map(|p| {
            let d = PyDict::new(py);
            d.set_item("name", p.name)?;
            d.set_item("dtype", p.dtype.rust_name())?;
            d.set_item("shape", format!("{:?}", p.shape))?;
            d.set_item("output", p.output)?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    info.set_item("params", params)?;
    info.set_item("scalars", k.scalars().to_vec())?;
    info.set_item("configs", k.variants().iter().map(|v| v.config().name()).collect::<Vec<_>>())?;
    Ok(info)
}

/// The CUDA device of a DLPack tensor; `ArgumentError` naming `name` for
/// anything else (no GPU needed).
#[pyfunction]
fn cuda_device(py: Python<'_>, name: &str, tensor: &Bound<'_, PyAny>) -> PyResult<usize> {
    check_cuda(py, name, tensor, None)
}

/// The launch plan for `program` on `operands` (`[a, b]`, or a map
/// program's first tile) on PyTorch's current stream of `device`:
/// `(choice, dims)`, the choice as `(variant, swizzle, raster)` (from the
/// tuner, as for Rust launches) and the dims every parameter must have, in
/// parameter order.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn plan(py: Python<'_>, program: &str, device: usize, operands: Vec<Bound<'_, PyAny>>) -> PyResult<((usize, u32, u8), Vec<Vec<usize>>)> {
    let k = kernel(py, program)?;
    let on = current_stream(py, device)?;
    let s = on.stream.clone();
    let problem = if k.is_map() {
        let Some(p) = k.params().iter().find(|p| !p.output && p.shape == coda_runtime::dsl::ir::Shape::Tile) else {
            return Err(argument_error(py, "program", "a map program without a Tile input"));
        };
        let [tile] = &operands[..] else { return Err(argument_error(py, p.name, "a map program takes its first tile as the operand")) };
        let imported = import(py, p.name, tile, device, &on, Use::Recorded)?;
        let raw = Raw::new(&s, p.name, p.dtype, &imported).map_err(|e| to_py(py, e))?;
        k.map_shape(raw.any()).map_err(|e| to_py(py, e))?
    } else {
        let [a, b] = &operands[..] else { return Err(argument_error(py, "a", "a GEMM program takes `a` and `b`")) };
        let (ia, ib) = (import(py, "a", a, device, &on, Use::Recorded)?, import(py, "b", b, device, &on, Use::Recorded)?);
        let ra = raw::<bf16>(&s, "a", &ia).map_err(|e| to_py(py, e))?;
        let rb = raw::<bf16>(&s, "b", &ib).map_err(|e| to_py(py, e))?;
        k.gemm_shape(&ra, &rb).map_err(|e| to_py(py, e))?
    };
    let c = tune::choose(k, &s, problem).map_err(|e| to_py(py, e))?;
    let dims = k.params().iter().map(|p| c.dims(p.shape, problem.m, problem.n)).collect::<Result<Vec<_>, _>>().map_err(|e| to_py(py, e))?;
    Ok(((c.variant, c.swizzle, raster_code(c.raster)), dims))
}

/// Launches `program` on PyTorch's current stream of `device` in `choice`
/// (from [`plan`]): `a` and `b` for a GEMM program (None for a map program),
/// `tensors` for every parameter in order (outputs included), `scalars` in
/// order.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn launch(
    py: Python<'_>,
    program: &str,
    device: usize,
    choice: (usize, u32, u8),
    a: Option<Bound<'_, PyAny>>,
    b: Option<Bound<'_, PyAny>>,
    tensors: Vec<Bound<'_, PyAny>>,
    scalars: Vec<f32>,
) -> PyResult<()> {
    let k = kernel(py, program)?;
    let (variant, swizzle, raster) = choice;
    let Some(v) = k.variants().get(variant) else {
        return Err(argument_error(py, "choice", &format!("variant {variant} of {} compiled configs", k.variants().len())));
    };
    let raster = match raster {
        0 => Raster::Heuristic,
        1 => Raster::AlongM,
        2 => Raster::AlongN,
        r => return Err(argument_error(py, "choice", &format!("raster code {r} is not 0, 1 or 2"))),
    };
    let choice = Choice { variant, config: v.config(), swizzle, raster };
    if tensors.len() != k.params().len() {
        return Err(argument_error(py, "tensors", &format!("{} given, {} has {} parameters", tensors.len(), k.name(), k.params().len())));
    }
    let on = current_stream(py, device)?;
    let s = on.stream.clone();
    let operands = match (a, b) {
        (Some(a), Some(b)) => Some((import(py, "a", &a, device, &on, Use::Recorded)?, import(py, "b", &b, device, &on, Use::Recorded)?)),
        (None, None) => None,
        _ => return Err(argument_error(py, "b", "`a` and `b` come together (a GEMM program) or not at all (a map program)")),
    };
    let imported = k.params().iter().zip(&tensors).map(|(p, t)| import(py, p.name, t, device, &on, Use::Recorded)).collect::<PyResult<Vec<_>>>()?;
    let mut raws = k
        .params()
        .iter()
        .zip(&imported)
        .map(|(p, t)| Raw::new(&s, p.name, p.dtype, t))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| to_py(py, e))?;
    let mut args: Vec<TensorArg<'_>> = raws.iter_mut().zip(k.params()).map(|(r, p)| r.arg(p.output)).collect();
    let result = match &operands {
        Some((ia, ib)) => {
            let ra = raw::<bf16>(&s, "a", ia).map_err(|e| to_py(py, e))?;
            let rb = raw::<bf16>(&s, "b", ib).map_err(|e| to_py(py, e))?;
            k.launch(&s, &choice, &ra, &rb, &mut args, &scalars)
        }
        None => k.launch_map(&s, &choice, &mut args, &scalars),
    };
    result.map_err(|e| to_py(py, e))
}

/// One cuBLAS handle per stream, shared by every backward on it (a handle
/// holds a workspace; making one per call would cost more than the GEMMs of
/// a small block).
pub(crate) fn cublas(stream: &Arc<Stream>) -> Result<Arc<Cublas>, Error> {
    static HANDLES: OnceLock<Mutex<HashMap<usize, Arc<Cublas>>>> = OnceLock::new();
    let mut handles = HANDLES.get_or_init(Default::default).lock().unwrap_or_else(|p| p.into_inner());
    // `current_stream` keeps each `Stream` for the life of the process, so its address names it.
    let key = Arc::as_ptr(stream) as usize;
    if let Some(h) = handles.get(&key) {
        return Ok(h.clone());
    }
    let h = Arc::new(Cublas::new(stream)?);
    handles.insert(key, h.clone());
    Ok(h)
}

/// A checkpoint weight's raw row-major bytes as elements of `N` bytes (the
/// converters only move rows, so bf16 and f16 are the same to them, as are
/// f32 and i32); `name`'s length must be whole elements.
fn elems<const N: usize>(py: Python<'_>, name: &str, bytes: &[u8]) -> PyResult<Vec<[u8; N]>> {
    if bytes.len() % N != 0 {
        return Err(argument_error(py, name, &format!("{} bytes are not whole {N}-byte elements", bytes.len())));
    }
    Ok(bytes.chunks_exact(N).map(|c| std::array::from_fn(|i| c[i])).collect())
}

/// Converted elements back as Python bytes.
fn to_bytes<'py, const N: usize>(py: Python<'py>, v: &[[u8; N]]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, v.as_flattened())
}

/// Runs `$f::<N>` for the element size `$itemsize` (2 or 4 bytes).
macro_rules! by_itemsize {
    ($py:expr, $itemsize:expr, $f:ident($($arg:expr),*)) => {
        match $itemsize {
            2 => $f::<2>($py, $($arg),*),
            4 => $f::<4>($py, $($arg),*),
            n => Err(argument_error($py, "itemsize", &format!("{n}: the converters take 2- or 4-byte elements"))),
        }
    };
}

/// `w_gate_up` `[2f, d]`, rows interleaved, from checkpoint `gate` and `up`
/// `[f, d]` (`coda_llama::layout`, as every converter here).
#[pyfunction]
fn interleave_gate_up<'py>(py: Python<'py>, gate: &[u8], up: &[u8], f: usize, d: usize, itemsize: usize) -> PyResult<Bound<'py, PyBytes>> {
    fn run<'py, const N: usize>(py: Python<'py>, gate: &[u8], up: &[u8], f: usize, d: usize) -> PyResult<Bound<'py, PyBytes>> {
        let w = coda_llama::layout::interleave_gate_up(&elems::<N>(py, "gate", gate)?, &elems::<N>(py, "up", up)?, FfnDims { ffn: f, hidden: d });
        Ok(to_bytes(py, &w.map_err(|e| to_py(py, e))?))
    }
    by_itemsize!(py, itemsize, run(gate, up, f, d))
}

/// Checkpoint `(gate, up)` from `w_gate_up`.
#[pyfunction]
fn split_gate_up<'py>(py: Python<'py>, w: &[u8], f: usize, d: usize, itemsize: usize) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    #[allow(clippy::type_complexity)]
    fn run<'py, const N: usize>(py: Python<'py>, w: &[u8], f: usize, d: usize) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let (g, u) = coda_llama::layout::split_gate_up(&elems::<N>(py, "w", w)?, FfnDims { ffn: f, hidden: d }).map_err(|e| to_py(py, e))?;
        Ok((to_bytes(py, &g), to_bytes(py, &u)))
    }
    by_itemsize!(py, itemsize, run(w, f, d))
}

/// `w_qkv` from checkpoint `wq`, `wk`, `wv` (rotate_half pairing → adjacent pairs).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn qkv_from_checkpoint<'py>(
    py: Python<'py>,
    wq: &[u8],
    wk: &[u8],
    wv: &[u8],
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    d: usize,
    itemsize: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    #[allow(clippy::too_many_arguments)]
    fn run<'py, const N: usize>(
        py: Python<'py>,
        (wq, wk, wv): (&[u8], &[u8], &[u8]),
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        d: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let (q, k, v) = (elems::<N>(py, "wq", wq)?, elems::<N>(py, "wk", wk)?, elems::<N>(py, "wv", wv)?);
        let w = coda_llama::layout::qkv_from_checkpoint(&q, &k, &v, QkvDims { heads, kv_heads, head_dim, hidden: d }).map_err(|e| to_py(py, e))?;
        Ok(to_bytes(py, &w))
    }
    by_itemsize!(py, itemsize, run((wq, wk, wv), heads, kv_heads, head_dim, d))
}

/// Checkpoint `(wq, wk, wv)` from `w_qkv`.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn qkv_to_checkpoint<'py>(
    py: Python<'py>,
    w: &[u8],
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    d: usize,
    itemsize: usize,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    #[allow(clippy::type_complexity)]
    fn run<'py, const N: usize>(
        py: Python<'py>,
        w: &[u8],
        heads: usize,
        kv_heads: usize,
        head_dim: usize,
        d: usize,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let w = elems::<N>(py, "w_qkv", w)?;
        let (q, k, v) = coda_llama::layout::qkv_to_checkpoint(&w, QkvDims { heads, kv_heads, head_dim, hidden: d }).map_err(|e| to_py(py, e))?;
        Ok((to_bytes(py, &q), to_bytes(py, &k), to_bytes(py, &v)))
    }
    by_itemsize!(py, itemsize, run(w, heads, kv_heads, head_dim, d))
}

/// Each head's rows of `w` `[heads · head_dim, cols]` from the rotate_half
/// pairing to adjacent pairs, or back where `to_adjacent` is false (e.g. a
/// QK-norm weight: one head, `cols` = 1).
#[pyfunction]
fn rope_pairs<'py>(
    py: Python<'py>,
    w: &[u8],
    heads: usize,
    head_dim: usize,
    cols: usize,
    to_adjacent: bool,
    itemsize: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    fn run<'py, const N: usize>(py: Python<'py>, w: &[u8], rows: HeadRows, to_adjacent: bool) -> PyResult<Bound<'py, PyBytes>> {
        let w = elems::<N>(py, "w", w)?;
        let out = if to_adjacent { coda_llama::layout::rope_pairs_adjacent(&w, rows) } else { coda_llama::layout::rope_pairs_half(&w, rows) };
        Ok(to_bytes(py, &out.map_err(|e| to_py(py, e))?))
    }
    by_itemsize!(py, itemsize, run(w, HeadRows { heads, head_dim, cols }, to_adjacent))
}

/// `(used, peak)` bytes of `device`'s memory pool, where CODA allocates its
/// own buffers (the LM-head tail's chunks, GEMM workspaces) and PyTorch's
/// default allocator does not: add `peak` to `torch.cuda.max_memory_allocated`
/// for a bound on a step's device memory.
#[pyfunction]
fn pool_memory(py: Python<'_>, device: usize) -> PyResult<(usize, usize)> {
    let s = current_stream(py, device)?.stream;
    let u = s.pool_usage().map_err(|e| to_py(py, e))?;
    Ok((u.used, u.peak))
}

/// Starts `pool_memory`'s peak of `device` again from what is in use now.
#[pyfunction]
fn reset_pool_peak(py: Python<'_>, device: usize) -> PyResult<()> {
    let s = current_stream(py, device)?.stream;
    s.reset_pool_peak().map_err(|e| to_py(py, e))
}

#[pymodule]
fn _coda(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(interleave_gate_up, m)?)?;
    m.add_function(wrap_pyfunction!(split_gate_up, m)?)?;
    m.add_function(wrap_pyfunction!(qkv_from_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(qkv_to_checkpoint, m)?)?;
    m.add_function(wrap_pyfunction!(rope_pairs, m)?)?;
    m.add("ArgumentError", m.py().get_type::<ArgumentError>())?;
    m.add("CodaError", m.py().get_type::<CodaError>())?;
    // Whether the host code was built optimised (maturin's default profile
    // is cargo's dev one): debug assertions off, as in the release profile;
    // the wheel's tests require it.
    m.add("OPTIMIZED", !cfg!(debug_assertions))?;
    m.add_function(wrap_pyfunction!(programs, m)?)?;
    m.add_function(wrap_pyfunction!(program_info, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_device, m)?)?;
    m.add_function(wrap_pyfunction!(plan, m)?)?;
    m.add_function(wrap_pyfunction!(launch, m)?)?;
    m.add_function(wrap_pyfunction!(pool_memory, m)?)?;
    m.add_function(wrap_pyfunction!(reset_pool_peak, m)?)?;
    m.add_function(wrap_pyfunction!(block::block_check, m)?)?;
    m.add_function(wrap_pyfunction!(head::head_forward_backward, m)?)?;
    m.add_function(wrap_pyfunction!(head::head_forward, m)?)?;
    m.add_function(wrap_pyfunction!(head::head_buffer_rows, m)?)?;
    m.add_function(wrap_pyfunction!(head::head_scale_grads, m)?)?;
    m.add_function(wrap_pyfunction!(block::block_rope_freq, m)?)?;
    m.add_function(wrap_pyfunction!(block::block_forward, m)?)?;
    m.add_function(wrap_pyfunction!(block::block_backward, m)?)?;
    Ok(())
}
