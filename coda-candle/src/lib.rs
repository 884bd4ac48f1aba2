//! The Llama block and the LM-head tail of `coda_llama` on candle tensors:
//! on candle's CUDA device and stream, on candle's memory, without copies.
//!
//! Inputs are borrowed where candle keeps them (contiguous, row-major, at
//! any 16-byte-aligned offset into their storage); outputs and the ops' intermediates are
//! allocated on the same device and handed back as candle tensors. Every
//! launch goes on the device's own stream, in order with candle's work, and
//! candle frees memory on that stream too (cudarc's `CudaSlice` drop: a
//! `cuMemFreeAsync` there, or a synchronise and a free), so a tensor dropped
//! after a call is reused only once the launches reading it have run.
//!
//! The device needs a stream of its own, `Device::new_cuda_with_stream`:
//! `Device::new_cuda` runs on CUDA's per-thread default stream, which a coda
//! `Stream` cannot share (its workspace is ordered on one stream). Every
//! refusal is a candle error with coda's message, ``argument `NAME`: …``,
//! naming the argument or weight at fault, before anything is launched.

use std::sync::{Arc, Mutex};

use candle_core::backend::BackendStorage;
use candle_core::cuda_backend::cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, SyncOnDrop};
use candle_core::cuda_backend::{CudaDType, CudaDevice};
use candle_core::op::BackpropOp;
use candle_core::{CpuStorage, CudaStorage, CustomOp3, DType, Device, Layout, Result, Shape, Storage, StorageRef, Tensor, WithDType};
use coda_llama::blas::Cublas;
use coda_llama::WeightGrad::F32;
use coda_llama::{BackwardState, Borrowed, HeadBackwardState, HeadState, Owned};
use coda_runtime::{Element, RawTensor, Stream, bf16};

pub use coda_llama::{BlockConfig, QkNorm};
/// The tail's loss variant (`HeadWeights::loss`): soft-capping, z-loss and
/// label smoothing, each off by default (plain cross-entropy).
pub use coda_llama::HeadLoss as LossVariant;

/// An element type of both: coda's tensors and candle's CUDA storage.
trait Elem: Element + WithDType + CudaDType {}
impl<T: Element + WithDType + CudaDType> Elem for T {}

/// coda's error as candle's, with coda's message.
fn coda(e: coda_runtime::Error) -> candle_core::Error {
    candle_core::Error::msg(e)
}

/// A refusal of argument `name`, worded as coda's own.
fn refuse(name: &str, rule: impl Into<String>) -> candle_core::Error {
    coda(coda_runtime::Error::arg(name, rule))
}

/// A coda stream on a candle device's stream, and the cuBLAS handle that
/// the backward passes on it share.
struct Runtime {
    stream: Stream,
    blas: Mutex<Option<Arc<Cublas>>>,
}

/// One runtime per candle stream, kept for the life of the process (as
/// `coda_rs` keeps one per PyTorch stream): its GEMM workspace and cuBLAS
/// handle are reused, and the stream it holds is never destroyed, so its
/// handle cannot come back as another stream's.
static RUNTIMES: Mutex<Vec<Arc<Runtime>>> = Mutex::new(Vec::new());

impl Runtime {
    /// The runtime of `device`'s stream; `name` is the argument the device was taken from.
    fn of(name: &str, device: &CudaDevice) -> Result<Arc<Runtime>> {
        let cs = device.cuda_stream();
        let mut all = RUNTIMES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rt) = all.iter().find(|rt| Arc::ptr_eq(rt.stream.cuda(), &cs)) {
            return Ok(rt.clone());
        }
        let stream = Stream::from_cuda(cs).map_err(|e| match e {
            coda_runtime::Error::Arg { name: n, .. } if n == "stream" => refuse(
                name,
                "is on a candle device of CUDA's per-thread default stream (Device::new_cuda), which coda cannot share; \
                 make the device with Device::new_cuda_with_stream",
            ),
            e => coda(e),
        })?;
        let rt = Arc::new(Runtime { stream, blas: Mutex::new(None) });
        all.push(rt.clone());
        Ok(rt)
    }

    fn blas(&self) -> Result<Arc<Cublas>> {
        let mut blas = self.blas.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = &*blas {
            return Ok(b.clone());
        }
        let b = Arc::new(Cublas::new(&self.stream).map_err(coda)?);
        *blas = Some(b.clone());
        Ok(b)
    }
}

/// The runtime of the CUDA device that `t` (argument `name`) is on, and the device.
fn runtime(name: &str, t: &Tensor) -> Result<(Arc<Runtime>, CudaDevice)> {
    match t.device() {
        Device::Cuda(d) => Ok((Runtime::of(name, d)?, d.clone())),
        other => Err(refuse(name, format!("is on {:?}; coda runs on a CUDA device", other.location()))),
    }
}

/// `M` of a `[M, width]` argument: the rows of the op's GEMMs, 1 to 2^31 − 1.
fn rows(name: &str, dims: &[usize]) -> Result<usize> {
    match *dims {
        [m, _] if (1..=i32::MAX as usize).contains(&m) => Ok(m),
        _ => Err(refuse(name, format!("shape {dims:?} must be [M, width] with M in 1..=2^31 − 1"))),
    }
}

/// Row-major strides of `dims`, in elements.
fn dense(dims: &[usize]) -> Vec<isize> {
    let mut strides = vec![1isize; dims.len()];
    for i in (1..dims.len()).rev() {
        strides[i - 1] = strides[i] * dims[i] as isize;
    }
    strides
}

/// A tensor's storage, read-locked for a call, named as its argument.
struct Locked<'t> {
    name: &'static str,
    storage: StorageRef<'t>,
    layout: &'t Layout,
}

fn lock<'t>(name: &'static str, t: &'t Tensor) -> Locked<'t> {
    let (storage, layout) = t.storage_and_layout();
    Locked { name, storage, layout }
}

impl Locked<'_> {
    fn arg(&self) -> Result<Arg<'_>> {
        match &*self.storage {
            Storage::Cuda(storage) => Ok(Arg { name: self.name, storage, layout: self.layout }),
            other => Err(refuse(self.name, format!("is on {:?}; coda runs on a CUDA device", other.device().location()))),
        }
    }
}

/// A candle tensor's CUDA storage and layout, named as its argument.
#[derive(Clone, Copy)]
struct Arg<'a> {
    name: &'static str,
    storage: &'a CudaStorage,
    layout: &'a Layout,
}

/// A fresh output on the call's stream (zeroed: a gather leaves the rows of
/// ignored targets unwritten), handed out as a candle tensor once the
/// launches that write it are enqueued.
struct Out<T> {
    slice: CudaSlice<T>,
    dims: Vec<usize>,
}

impl<T: Elem> Out<T> {
    /// `dims` hold a token count checked by [`rows`] and widths of a checked
    /// config or of candle tensors: their product does not overflow.
    fn zeros(rt: &Runtime, dims: &[usize]) -> Result<Self> {
        let slice = rt.stream.cuda().alloc_zeros(dims.iter().product()).map_err(|e| coda(e.into()))?;
        Ok(Out { slice, dims: dims.to_vec() })
    }

    fn storage(self, device: &CudaDevice) -> CudaStorage {
        CudaStorage::wrap_cuda_slice(self.slice, device.clone())
    }

    fn tensor(self, device: &CudaDevice) -> Tensor {
        let dims = self.dims.clone();
        Tensor::from_storage(Storage::Cuda(self.storage(device)), dims, BackpropOp::none(), false)
    }
}

/// One call's tensors borrowed as coda's on `rt`'s stream. It holds the
/// cudarc guards of their slices until it drops, after the launches are
/// enqueued: dropping one records the read or write, so that work on another
/// stream (a copy to another device, say) waits for the launches.
struct Call<'a> {
    rt: &'a Runtime,
    sync: Vec<SyncOnDrop<'a>>,
}

impl<'a> Call<'a> {
    fn new(rt: &'a Runtime) -> Self {
        Call { rt, sync: Vec::new() }
    }

    fn input<T: Elem>(&mut self, t: &'a Locked<'_>) -> Result<RawTensor<'a, T>> {
        self.arg(t.arg()?)
    }

    /// An input: `T`s, contiguous and row-major, 16-byte aligned, on this call's stream.
    fn arg<T: Elem>(&mut self, a: Arg<'a>) -> Result<RawTensor<'a, T>> {
        let (name, l) = (a.name, a.layout);
        let want = <T as WithDType>::DTYPE;
        if a.storage.dtype() != want {
            return Err(refuse(name, format!("has dtype {:?}; coda needs {want:?}", a.storage.dtype())));
        }
        if !l.is_contiguous() {
            return Err(refuse(
                name,
                format!("has strides {:?} for shape {:?}; coda needs it contiguous, row-major (.contiguous())", l.stride(), l.dims()),
            ));
        }
        let slice = a.storage.as_cuda_slice::<T>()?;
        if !Arc::ptr_eq(slice.stream(), self.rt.stream.cuda()) {
            return Err(refuse(name, "is on another CUDA device or stream than the call's first tensor"));
        }
        let (start, len) = (l.start_offset(), l.shape().elem_count());
        if start.checked_add(len).is_none_or(|end| end > slice.len()) {
            return Err(refuse(name, format!("its layout ({len} elements from {start}) runs past its storage ({})", slice.len())));
        }
        let (base, guard) = slice.device_ptr(self.rt.stream.cuda());
        self.sync.push(guard);
        let address = base + (start * size_of::<T>()) as u64;
        // coda's launches check this too, but under their programs' names, and launch by launch.
        if !address.is_multiple_of(16) {
            return Err(refuse(name, format!("starts {start} elements into its storage, not 16-byte aligned as coda's loads need (.copy() it)")));
        }
        // SAFETY: the span lies inside `slice` (checked above), a candle
        // allocation of `T`s (its dtype, checked), which the locked tensor
        // keeps alive through the call. Candle orders its work on the slice's
        // stream, the launches' (checked), and frees the slice there too
        // (see the crate's doc), so the memory outlives the launches that
        // read it; other streams wait for them through the guard's event.
        let raw = unsafe { RawTensor::new(&self.rt.stream, address, l.dims(), &dense(l.dims())) };
        raw.map_err(|e| match e {
            // The driver's view of the memory: where it lies, what it spans.
            coda_runtime::Error::Arg { name: what, rule } => refuse(name, format!("{what}: {rule}")),
            e => coda(e),
        })
    }

    fn output<T: Elem>(&mut self, out: &'a mut Out<T>) -> Result<RawTensor<'a, T>> {
        let (address, guard) = out.slice.device_ptr_mut(self.rt.stream.cuda());
        self.sync.push(guard);
        // SAFETY: a fresh allocation of exactly `dims` `T`s on the launches'
        // stream, which nothing else holds until `Out::tensor` hands it out
        // after they are enqueued; freed on that stream, in order after them.
        unsafe { RawTensor::new(&self.rt.stream, address, &out.dims, &dense(&out.dims)) }.map_err(coda)
    }
}

/// A block's weights as candle tensors in the kernels' layout
/// (`coda_llama::layout` converts checkpoints): bf16, contiguous, on one
/// CUDA device.
#[derive(Clone)]
pub struct BlockWeights {
    pub config: BlockConfig,
    /// o_proj `[d, heads · head_dim]`.
    pub wo: Tensor,
    /// `[d]`.
    pub gamma1: Tensor,
    /// gate_up `[2f, d]`, rows interleaved `[g0, u0, g1, u1, …]`.
    pub w_gate_up: Tensor,
    /// down `[d, f]`.
    pub w_down: Tensor,
    /// `[d]`.
    pub gamma2: Tensor,
    /// qkv `[(heads + 2·kv_heads) · head_dim, d]`, each head's RoPE pairs adjacent.
    pub w_qkv: Tensor,
    /// f32 `[qkv_width]`, [`BlockConfig::rope_freq`]'s values, made by [`BlockWeights::new`].
    pub rope_freq: Tensor,
    /// QK-norm's weights (`q_norm`, `k_norm`), bf16 `[head_dim]` each in the
    /// kernels' layout (each pair adjacent: a checkpoint's through
    /// `coda_llama::layout::rope_pairs_adjacent(w, HeadRows { heads: 1, head_dim, cols: 1 })`),
    /// exactly when the config's `qk_norm`.
    pub qk_norm: Option<QkNorm<Tensor>>,
}

impl BlockWeights {
    /// The weights, each checked now (device, dtype, layout, shape against
    /// `config`, itself checked; `qk_norm` given exactly when the config's),
    /// or an error naming the first refused.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: BlockConfig,
        wo: Tensor,
        gamma1: Tensor,
        w_gate_up: Tensor,
        w_down: Tensor,
        gamma2: Tensor,
        w_qkv: Tensor,
        qk_norm: Option<QkNorm<Tensor>>,
    ) -> Result<BlockWeights> {
        let rope_freq = Tensor::from_vec(config.rope_freq().map_err(coda)?, config.qkv_width(), wo.device())?;
        let w = BlockWeights { config, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, rope_freq, qk_norm };
        let (rt, _) = runtime("wo", &w.wo)?;
        block_weights(&w.config, &w.lock(), &mut Call::new(&rt))?;
        Ok(w)
    }

    fn lock(&self) -> LockedWeights<'_> {
        LockedWeights {
            block: [
                lock("wo", &self.wo),
                lock("gamma1", &self.gamma1),
                lock("w_gate_up", &self.w_gate_up),
                lock("w_down", &self.w_down),
                lock("gamma2", &self.gamma2),
                lock("w_qkv", &self.w_qkv),
                lock("rope_freq", &self.rope_freq),
            ],
            qk_norm: self.qk_norm.as_ref().map(|n| QkNorm { q: lock("qk_norm.q", &n.q), k: lock("qk_norm.k", &n.k) }),
        }
    }
}

struct LockedWeights<'t> {
    block: [Locked<'t>; 7],
    qk_norm: Option<QkNorm<Locked<'t>>>,
}

/// Locked block weights as coda's (which checks `qk_norm` against the config).
fn block_weights<'a>(c: &BlockConfig, w: &'a LockedWeights<'_>, b: &mut Call<'a>) -> Result<coda_llama::BlockWeights<Borrowed<'a>>> {
    let l = &w.block;
    let (wo, gamma1, w_gate_up, w_down) = (b.input(&l[0])?, b.input(&l[1])?, b.input(&l[2])?, b.input(&l[3])?);
    let (gamma2, w_qkv, rope_freq) = (b.input(&l[4])?, b.input(&l[5])?, b.input(&l[6])?);
    let qk_norm = match &w.qk_norm {
        Some(n) => Some(QkNorm { q: b.input(&n.q)?, k: b.input(&n.k)? }),
        None => None,
    };
    coda_llama::BlockWeights::from_parts(*c, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, rope_freq, qk_norm).map_err(coda)
}

/// What [`block_forward`] saved for [`block_backward`]; `x2` and `qkv` are
/// the block's outputs.
pub struct BlockForward {
    /// Residual stream after o_proj, bf16 `[M, d]`.
    pub x1: Tensor,
    /// Inverse RMS of `x1`, f32 `[M]`.
    pub r1: Tensor,
    /// gate_up pre-activation (interleaved), bf16 `[M, 2f]`.
    pub z1: Tensor,
    /// SwiGLU output, bf16 `[M, f]`.
    pub y1: Tensor,
    /// Residual stream after down, the block's residual output, bf16 `[M, d]`.
    pub x2: Tensor,
    /// Inverse RMS of `x2`, f32 `[M]`.
    pub r2: Tensor,
    /// Rotated q, k and v, bf16 `[M, qkv_width]`.
    pub qkv: Tensor,
    /// With QK-norm: what it saved for the backward.
    pub qk_norm: Option<QkNormSaved>,
}

/// What the forward with QK-norm saves beside the rest.
pub struct QkNormSaved {
    /// The qkv before QK-norm and RoPE, bf16 `[M, qkv_width]`.
    pub z2: Tensor,
    /// The norm weights laid over the qkv columns, bf16 `[qkv_width]`.
    pub gamma: Tensor,
}

/// The block forward's inputs, named as in `coda_llama::ForwardInputs`
/// (`attn` and `x0` have one dtype and, at Llama's shapes, one shape).
#[derive(Clone, Copy)]
pub struct ForwardInputs<'a> {
    /// The attention output, bf16 `[M, heads · head_dim]`.
    pub attn: &'a Tensor,
    /// The residual stream, bf16 `[M, d]`.
    pub x0: &'a Tensor,
    /// Token positions, f32 `[M]`.
    pub pos: &'a Tensor,
}

/// The block forward (`coda_llama::block_forward`: four fused GEMMs, two
/// reductions) on candle's stream.
pub fn block_forward(w: &BlockWeights, inputs: ForwardInputs<'_>) -> Result<BlockForward> {
    let ForwardInputs { attn, x0, pos } = inputs;
    let (rt, device) = runtime("attn", attn)?;
    // The fields are public: checked before any width below is computed from them.
    let c = w.config;
    c.check().map_err(coda)?;
    let (m, d, f) = (rows("attn", attn.dims())?, c.hidden, c.ffn);
    let weights = w.lock();
    let inputs = [lock("attn", attn), lock("x0", x0), lock("pos", pos)];
    let bf16s = |dims: &[usize]| Out::<bf16>::zeros(&rt, dims);
    let f32s = || Out::<f32>::zeros(&rt, &[m]);
    let (mut x1, mut u1, mut r1, mut z1, mut y1) = (bf16s(&[m, d])?, bf16s(&[m, d])?, f32s()?, bf16s(&[m, 2 * f])?, bf16s(&[m, f])?);
    let (mut x2, mut u2, mut r2, mut qkv) = (bf16s(&[m, d])?, bf16s(&[m, d])?, f32s()?, bf16s(&[m, c.qkv_width()])?);
    // Given a config without QK-norm, coda refuses the weights' QK-norm part (or its absence) by name.
    let mut qk = match (c.qk_norm, &w.qk_norm) {
        (true, Some(_)) => Some((bf16s(&[m, c.qkv_width()])?, bf16s(&[c.qkv_width()])?)),
        _ => None,
    };
    {
        let mut b = Call::new(&rt);
        let bw = block_weights(&c, &weights, &mut b)?;
        let (attn, x0, pos) = (b.input(&inputs[0])?, b.input(&inputs[1])?, b.input(&inputs[2])?);
        let (x1, u1, r1, z1, y1) = (b.output(&mut x1)?, b.output(&mut u1)?, b.output(&mut r1)?, b.output(&mut z1)?, b.output(&mut y1)?);
        let (x2, u2, r2, qkv) = (b.output(&mut x2)?, b.output(&mut u2)?, b.output(&mut r2)?, b.output(&mut qkv)?);
        let qk = match &mut qk {
            Some((z2, gamma)) => Some(coda_llama::QkNormState { z2: b.output(z2)?, gamma: b.output(gamma)? }),
            None => None,
        };
        let mut s = coda_llama::BlockState::<Borrowed>::from_parts(&c, x1, u1, r1, z1, y1, x2, u2, r2, qkv, qk).map_err(coda)?;
        coda_llama::block_forward(&rt.stream, &bw, coda_llama::ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, &mut s).map_err(coda)?;
    }
    Ok(BlockForward {
        x1: x1.tensor(&device),
        r1: r1.tensor(&device),
        z1: z1.tensor(&device),
        y1: y1.tensor(&device),
        x2: x2.tensor(&device),
        r2: r2.tensor(&device),
        qkv: qkv.tensor(&device),
        qk_norm: qk.map(|(z2, gamma)| QkNormSaved { z2: z2.tensor(&device), gamma: gamma.tensor(&device) }),
    })
}

/// A coda tensor on `rt`'s stream, for an op's scratch.
fn scratch<T: Element>(rt: &Runtime, dims: &[usize]) -> Result<coda_runtime::Tensor<T>> {
    coda_runtime::Tensor::zeros(&rt.stream, dims).map_err(coda)
}

/// The gradients of the block's inputs (bf16) and weights (f32, summed over
/// the tokens; `dw_gate_up` and `dw_qkv` in the weights' layouts).
pub struct BlockGrads {
    pub dattn: Tensor,
    pub dx0: Tensor,
    pub dwo: Tensor,
    pub dgamma1: Tensor,
    pub dw_gate_up: Tensor,
    pub dw_down: Tensor,
    pub dgamma2: Tensor,
    pub dw_qkv: Tensor,
    /// With QK-norm: the gradients of `q_norm` and `k_norm`, f32 `[head_dim]`.
    pub dqk_norm: Option<QkNorm<Tensor>>,
}

/// The block backward's inputs, named as in `coda_llama::BackwardInputs`.
#[derive(Clone, Copy)]
pub struct BackwardInputs<'a> {
    /// The forward's `attn`, bf16 `[M, heads · head_dim]`.
    pub attn: &'a Tensor,
    /// The forward's `pos`, f32 `[M]`.
    pub pos: &'a Tensor,
    /// The gradient of `x2`, bf16 `[M, d]`.
    pub dx2: &'a Tensor,
    /// The gradient of `qkv`, bf16 `[M, qkv_width]`.
    pub dqkv: &'a Tensor,
}

/// The block backward (`coda_llama::block_backward`: five fused GEMMs, four
/// reductions, four cuBLAS weight gradients) on candle's stream: `fwd` is
/// what [`block_forward`] saved for `inputs.attn` and `inputs.pos`.
pub fn block_backward(w: &BlockWeights, fwd: &BlockForward, inputs: BackwardInputs<'_>) -> Result<BlockGrads> {
    let BackwardInputs { attn, pos, dx2, dqkv } = inputs;
    let (rt, device) = runtime("x1", &fwd.x1)?;
    let c = w.config;
    c.check().map_err(coda)?;
    let (m, d, f, aw, qw) = (rows("x1", fwd.x1.dims())?, c.hidden, c.ffn, c.attn_width(), c.qkv_width());
    // coda's backward checks these only as each launch reads them, by its
    // programs' names: check them here, before anything is launched.
    for (name, t, want) in [("attn", attn, vec![m, aw]), ("pos", pos, vec![m]), ("dx2", dx2, vec![m, d]), ("dqkv", dqkv, vec![m, qw])] {
        if t.dims() != want.as_slice() {
            return Err(refuse(name, format!("shape {:?} must be {want:?} (the forward's {m} tokens)", t.dims())));
        }
    }
    let weights = w.lock();
    let saved = [
        lock("x1", &fwd.x1),
        lock("r1", &fwd.r1),
        lock("z1", &fwd.z1),
        lock("y1", &fwd.y1),
        lock("x2", &fwd.x2),
        lock("r2", &fwd.r2),
        lock("qkv", &fwd.qkv),
    ];
    if c.qk_norm != fwd.qk_norm.is_some() {
        let (has, hasnt) = if c.qk_norm { ("has", "lacks") } else { ("lacks", "has") };
        return Err(refuse("fwd", format!("the block {has} QK-norm and this forward's state {hasnt} it: a forward of another block")));
    }
    let saved_qk = fwd.qk_norm.as_ref().map(|n| [lock("qk_norm.z2", &n.z2), lock("qk_norm.gamma", &n.gamma)]);
    let inputs = [lock("attn", attn), lock("pos", pos), lock("dx2", dx2), lock("dqkv", dqkv)];
    let (mut dattn, mut dx0) = (Out::<bf16>::zeros(&rt, &[m, aw])?, Out::<bf16>::zeros(&rt, &[m, d])?);
    let f32s = |dims: &[usize]| Out::<f32>::zeros(&rt, dims);
    let (mut dwo, mut dgamma1, mut dw_gate_up) = (f32s(&[d, aw])?, f32s(&[d])?, f32s(&[2 * f, d])?);
    let (mut dw_down, mut dgamma2, mut dw_qkv) = (f32s(&[d, f])?, f32s(&[d])?, f32s(&[qw, d])?);
    let mut dqk = match saved_qk {
        Some(_) => Some((f32s(&[c.head_dim])?, f32s(&[c.head_dim])?)),
        None => None,
    };
    {
        let mut b = Call::new(&rt);
        let bw = block_weights(&c, &weights, &mut b)?;
        // `u1` and `u2` stand in as `x1` and `x2` again: the backward reads neither.
        let (x1, u1, r1, z1, y1) = (b.input(&saved[0])?, b.input(&saved[0])?, b.input(&saved[1])?, b.input(&saved[2])?, b.input(&saved[3])?);
        let (x2, u2, r2, qkv) = (b.input(&saved[4])?, b.input(&saved[4])?, b.input(&saved[5])?, b.input(&saved[6])?);
        let qk = match &saved_qk {
            Some([z2, gamma]) => Some(coda_llama::QkNormState { z2: b.input(z2)?, gamma: b.input(gamma)? }),
            None => None,
        };
        let fs = coda_llama::BlockState::<Borrowed>::from_parts(&c, x1, u1, r1, z1, y1, x2, u2, r2, qkv, qk).map_err(coda)?;
        let (attn, pos, dx2, dqkv) = (b.input(&inputs[0])?, b.input(&inputs[1])?, b.input(&inputs[2])?, b.input(&inputs[3])?);
        let (dattn, dx0, dwo, dgamma1) = (b.output(&mut dattn)?, b.output(&mut dx0)?, b.output(&mut dwo)?, b.output(&mut dgamma1)?);
        let (dw_gate_up, dw_down, dgamma2, dw_qkv) =
            (b.output(&mut dw_gate_up)?, b.output(&mut dw_down)?, b.output(&mut dgamma2)?, b.output(&mut dw_qkv)?);
        let dqk = match &mut dqk {
            Some((q, k)) => Some(QkNorm { q: b.output(q)?, k: b.output(k)? }),
            None => None,
        };
        let mut g =
            coda_llama::BlockGrads::<Borrowed>::from_parts(&c, dattn, dx0, F32(dwo), dgamma1, F32(dw_gate_up), F32(dw_down), dgamma2, F32(dw_qkv), dqk)
                .map_err(coda)?;
        // Scratch the caller never sees: coda's tensors on the same stream, freed there after the call.
        let (dz2, s2, dh2, xg2) = (scratch(&rt, &[m, qw])?, scratch(&rt, &[m])?, scratch(&rt, &[m, d])?, scratch(&rt, &[m, d])?);
        let (dz1, s1, xg1) = (scratch(&rt, &[m, 2 * f])?, scratch(&rt, &[m])?, scratch(&rt, &[m, d])?);
        let mut bs =
            BackwardState::<Owned>::from_parts(&rt.stream, &c, rt.blas()?, dz2, s2, dh2, xg2, dz1, s1, xg1).map_err(coda)?;
        coda_llama::block_backward(&rt.stream, &bw, &fs, coda_llama::BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, &mut bs, &mut g).map_err(coda)?;
    }
    Ok(BlockGrads {
        dattn: dattn.tensor(&device),
        dx0: dx0.tensor(&device),
        dwo: dwo.tensor(&device),
        dgamma1: dgamma1.tensor(&device),
        dw_gate_up: dw_gate_up.tensor(&device),
        dw_down: dw_down.tensor(&device),
        dgamma2: dgamma2.tensor(&device),
        dw_qkv: dw_qkv.tensor(&device),
        dqk_norm: dqk.map(|(q, k)| QkNorm { q: q.tensor(&device), k: k.tensor(&device) }),
    })
}

/// The tail's weights: the final norm's `gamma` bf16 `[d]` and the LM head
/// `w` bf16 `[V, d]` (a `Linear` weight; V and d multiples of 8), the
/// norm's `eps`, and the loss they are trained with (checked at each call).
#[derive(Clone)]
pub struct HeadWeights {
    pub gamma: Tensor,
    pub w: Tensor,
    pub eps: f32,
    pub loss: LossVariant,
}

/// The weights as coda's, borrowed through `b`.
fn head_weights<'a>(b: &mut Call<'a>, gamma: Arg<'a>, w: Arg<'a>, eps: f32, loss: LossVariant) -> Result<coda_llama::HeadWeights<Borrowed<'a>>> {
    let mut hw = coda_llama::HeadWeights::<Borrowed>::from_parts(b.arg(gamma)?, b.arg(w)?, eps).map_err(coda)?;
    hw.loss = loss;
    Ok(hw)
}

/// The tail's loss: per row (0 where the target is ignored), f32 `[M]`, and
/// its mean over the rows not ignored, an f32 scalar (NaN if all are).
pub struct HeadLoss {
    pub loss: Tensor,
    pub mean: Tensor,
}

/// The tail's loss and the gradients of its mean: `dx` bf16 `[M, d]`,
/// `dgamma` f32 `[d]`, `dw` f32 `[V, d]`.
pub struct HeadGrads {
    pub loss: HeadLoss,
    pub dx: Tensor,
    pub dgamma: Tensor,
    pub dw: Tensor,
}

/// The forward's outputs and intermediates, for `m` rows of width `d`.
struct HeadOuts {
    u: Out<bf16>,
    r: Out<f32>,
    lse: Out<f32>,
    target_logit: Out<f32>,
    loss: Out<f32>,
    mean: Out<f32>,
}

impl HeadOuts {
    /// For `x` and the weights' `gamma` (`[d]`, else refused by name).
    fn new(rt: &Runtime, x: &Arg<'_>, gamma: &Arg<'_>) -> Result<Self> {
        let m = rows(x.name, x.layout.dims())?;
        let &[d] = gamma.layout.dims() else {
            return Err(refuse(gamma.name, format!("shape {:?} must be [d]", gamma.layout.dims())));
        };
        let f32s = |n: usize| Out::<f32>::zeros(rt, &[n]);
        Ok(HeadOuts { u: Out::zeros(rt, &[m, d])?, r: f32s(m)?, lse: f32s(m)?, target_logit: f32s(m)?, loss: f32s(m)?, mean: f32s(1)? })
    }

    fn state<'a>(&'a mut self, b: &mut Call<'a>, h: &coda_llama::HeadWeights<Borrowed<'_>>) -> Result<HeadState<Borrowed<'a>>> {
        let (u, r, lse, target_logit) = (b.output(&mut self.u)?, b.output(&mut self.r)?, b.output(&mut self.lse)?, b.output(&mut self.target_logit)?);
        HeadState::<Borrowed>::from_parts(h, u, r, lse, target_logit, b.output(&mut self.loss)?, b.output(&mut self.mean)?).map_err(coda)
    }

    fn loss(self, device: &CudaDevice) -> Result<HeadLoss> {
        Ok(HeadLoss { loss: self.loss.tensor(device), mean: self.mean.tensor(device).reshape(())? })
    }
}

/// The tail forward (`coda_llama::head_forward`: final RMSNorm → LM head →
/// cross-entropy, no `M × V` logits) on candle's stream: `x` bf16 `[M, d]`,
/// `targets` i32 `[M]` (class ids; any id outside `[0, V)`, such as −100,
/// ignores its row).
pub fn head_forward(h: &HeadWeights, x: &Tensor, targets: &Tensor) -> Result<HeadLoss> {
    let (rt, device) = runtime("x", x)?;
    let locked = [lock("gamma", &h.gamma), lock("w", &h.w), lock("x", x), lock("targets", targets)];
    let mut outs = HeadOuts::new(&rt, &locked[2].arg()?, &locked[0].arg()?)?;
    {
        let mut b = Call::new(&rt);
        let hw = head_weights(&mut b, locked[0].arg()?, locked[1].arg()?, h.eps, h.loss)?;
        let (x, targets) = (b.input(&locked[2])?, b.input(&locked[3])?);
        let mut fs = outs.state(&mut b, &hw)?;
        coda_llama::head_forward(&rt.stream, &hw, &x, &targets, &mut fs).map_err(coda)?;
    }
    outs.loss(&device)
}

/// The tail's forward and backward for the mean loss in one pass
/// (`coda_llama::head_forward_backward`: row chunks of `chunk_rows`, a
/// multiple of 256, each running the head GEMM once; only `chunk_rows × V`
/// logits exist at a time), on candle's stream; arguments as [`head_forward`].
pub fn head_forward_backward(h: &HeadWeights, x: &Tensor, targets: &Tensor, chunk_rows: usize) -> Result<HeadGrads> {
    let (_, device) = runtime("x", x)?;
    let locked = [lock("gamma", &h.gamma), lock("w", &h.w), lock("x", x), lock("targets", targets)];
    let args = [locked[0].arg()?, locked[1].arg()?, locked[2].arg()?, locked[3].arg()?];
    let g = head_grads(&device, args, h.eps, h.loss, chunk_rows)?;
    Ok(HeadGrads { loss: g.outs.loss(&device)?, dx: g.dx.tensor(&device), dgamma: g.dgamma.tensor(&device), dw: g.dw.tensor(&device) })
}

/// What [`head_grads`] wrote, before it is handed out.
struct HeadGradOuts {
    outs: HeadOuts,
    dx: Out<bf16>,
    dgamma: Out<f32>,
    dw: Out<f32>,
}

/// [`head_forward_backward`] over `gamma`, `w`, `x` and `targets`, borrowed.
fn head_grads(device: &CudaDevice, [gamma, w, x, targets]: [Arg<'_>; 4], eps: f32, loss: LossVariant, chunk_rows: usize) -> Result<HeadGradOuts> {
    let rt = Runtime::of(x.name, device)?;
    let mut outs = HeadOuts::new(&rt, &x, &gamma)?;
    let (m, d) = (outs.u.dims[0], outs.u.dims[1]);
    let &[v, _] = w.layout.dims() else {
        return Err(refuse(w.name, format!("shape {:?} must be [V, d]", w.layout.dims())));
    };
    let (mut dx, mut dgamma, mut dw) = (Out::<bf16>::zeros(&rt, &[m, d])?, Out::<f32>::zeros(&rt, &[d])?, Out::<f32>::zeros(&rt, &[v, d])?);
    {
        let mut b = Call::new(&rt);
        let hw = head_weights(&mut b, gamma, w, eps, loss)?;
        let (x, targets) = (b.arg(x)?, b.arg(targets)?);
        let mut fs = outs.state(&mut b, &hw)?;
        let (dx, dgamma, dw) = (b.output(&mut dx)?, b.output(&mut dgamma)?, b.output(&mut dw)?);
        let mut g = coda_llama::HeadGrads::<Borrowed>::from_parts(&hw, dx, dgamma, dw).map_err(coda)?;
        let mut bs = HeadBackwardState::with_blas(&rt.stream, &hw, m, chunk_rows, rt.blas()?).map_err(coda)?;
        coda_llama::head_forward_backward(&rt.stream, &hw, &x, &targets, &mut fs, &mut bs, &mut g).map_err(coda)?;
    }
    Ok(HeadGradOuts { outs, dx, dgamma, dw })
}

/// The tail's mean loss as a differentiable candle op of `x`, `gamma` and
/// `w` (a [`CustomOp3`]; `targets`, `eps`, the loss variant and the chunk size ride along):
/// its forward runs [`head_forward_backward`] and keeps the gradients (until
/// the loss tensor is dropped), which its backward scales by the loss's
/// gradient, as fused-loss kernels do. Where none of the three is tracked
/// (evaluation) it is [`head_forward`]'s mean: no chunks, no gradients.
pub fn head_loss(x: &Tensor, targets: &Tensor, h: &HeadWeights, chunk_rows: usize) -> Result<Tensor> {
    // Candle refuses mixed devices before the op sees its arguments: refuse them by name first.
    for (name, t) in [("gamma", &h.gamma), ("w", &h.w), ("targets", targets)] {
        if !t.device().same_device(x.device()) {
            return Err(refuse(name, format!("is on {:?}, `x` on {:?}", t.device().location(), x.device().location())));
        }
    }
    if ![x, &h.gamma, &h.w].iter().any(|t| t.track_op()) {
        // The chunk size is refused here as the differentiable path refuses it.
        HeadBackwardState::buffer_rows(rows("x", x.dims())?, chunk_rows).map_err(coda)?;
        return Ok(head_forward(h, x, targets)?.mean);
    }
    let op = HeadLossOp { targets: targets.clone(), eps: h.eps, loss: h.loss, chunk_rows, grads: Mutex::new(None) };
    x.apply_op3(&h.gamma, &h.w, op)
}

struct HeadLossOp {
    targets: Tensor,
    eps: f32,
    loss: LossVariant,
    chunk_rows: usize,
    /// `dx`, `dgamma`, `dw` of the mean loss, from the forward.
    grads: Mutex<Option<[Tensor; 3]>>,
}

impl CustomOp3 for HeadLossOp {
    fn name(&self) -> &'static str {
        "coda-head-loss"
    }

    fn cpu_fwd(&self, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout, _: &CpuStorage, _: &Layout) -> Result<(CpuStorage, Shape)> {
        Err(refuse("x", "is on the CPU; coda runs on a CUDA device"))
    }

    fn cuda_fwd(
        &self,
        x: &CudaStorage,
        x_layout: &Layout,
        gamma: &CudaStorage,
        gamma_layout: &Layout,
        w: &CudaStorage,
        w_layout: &Layout,
    ) -> Result<(CudaStorage, Shape)> {
        let targets = lock("targets", &self.targets);
        let args = [
            Arg { name: "gamma", storage: gamma, layout: gamma_layout },
            Arg { name: "w", storage: w, layout: w_layout },
            Arg { name: "x", storage: x, layout: x_layout },
            targets.arg()?,
        ];
        let device = x.device();
        let g = head_grads(device, args, self.eps, self.loss, self.chunk_rows)?;
        *self.grads.lock().unwrap_or_else(|p| p.into_inner()) = Some([g.dx.tensor(device), g.dgamma.tensor(device), g.dw.tensor(device)]);
        Ok((g.outs.mean.storage(device), Shape::from(())))
    }

    fn bwd(&self, x: &Tensor, gamma: &Tensor, w: &Tensor, _loss: &Tensor, dloss: &Tensor) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grads = self.grads.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let [dx, dgamma, dw] = grads.ok_or_else(|| candle_core::Error::msg("coda-head-loss: backward without a forward"))?;
        let dloss = dloss.to_dtype(DType::F32)?;
        // In f32, then in the argument's dtype: candle sums gradients of one tensor in its dtype.
        let scale = |g: &Tensor, like: &Tensor| g.to_dtype(DType::F32)?.broadcast_mul(&dloss)?.to_dtype(like.dtype());
        Ok((Some(scale(&dx, x)?), Some(scale(&dgamma, gamma)?), Some(scale(&dw, w)?)))
    }
}
