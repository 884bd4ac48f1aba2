//! The LM-head tail (`coda_llama::head_forward_backward`: final RMSNorm →
//! LM head → mean cross-entropy, and its gradients, in chunks of rows
//! without the `M × V` logits) on PyTorch tensors, borrowed through DLPack.

use coda_llama::{Borrowed, HeadBackwardState, HeadGrads, HeadLoss, HeadState, HeadWeights};
use coda_runtime::{aux, bf16, AnyTensor, Error, RawTensor};
use dlpark::python::ImportedDlpack;
use pyo3::prelude::*;

use crate::block::import_all;
use crate::{Current, cublas, current_stream, disjoint, gemm_op, raw, to_py};

const INPUTS: [&str; 4] = ["gamma", "w", "x", "targets"];
const STATE: [&str; 6] = ["u", "r", "lse", "target_logit", "loss", "mean"];
const GRADS: [&str; 3] = ["dx", "dgamma", "dw"];
const CHUNK: [&str; 3] = ["logits", "dlogits", "xg"];
const SCALED: [&str; 3] = ["dx_out", "dgamma_out", "dw_out"];

/// The rows of the chunk buffers `head_forward_backward` takes for `tokens`
/// rows in chunks of `chunk_rows`, or `ArgumentError` naming `chunk_rows`
/// (a positive multiple of 256) or `tokens`.
#[pyfunction]
pub fn head_buffer_rows(py: Python<'_>, tokens: usize, chunk_rows: usize) -> PyResult<usize> {
    HeadBackwardState::buffer_rows(tokens, chunk_rows).map_err(|e| to_py(py, e))
}

/// The tail's forward and backward on PyTorch's current stream of `device`:
/// `state` (written) in [`STATE`]'s order, `grads` (written) in [`GRADS`]';
/// `loss` is `(softcap, z_loss, label_smoothing)` with softcap 0 for none;
/// `chunk` (overwritten) in [`CHUNK`]'s order, `[rows, V]`, `[rows, V]` and
/// `[rows, d]` bf16 with `head_buffer_rows`' rows, so that PyTorch's
/// allocator holds the chunk-sized buffers and reuses them after the call.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn head_forward_backward(
    py: Python<'_>,
    device: usize,
    eps: f32,
    chunk_rows: usize,
    loss: (f32, f32, f32),
    gamma: Bound<'_, PyAny>,
    w: Bound<'_, PyAny>,
    x: Bound<'_, PyAny>,
    targets: Bound<'_, PyAny>,
    state: Vec<Bound<'_, PyAny>>,
    grads: Vec<Bound<'_, PyAny>>,
    chunk: Vec<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let fwd = Forward::import(py, device, [gamma, w, x, targets], &state)?;
    let s = fwd.on.stream.clone();
    let gr = import_all(py, "grads", &GRADS, &grads, device, &fwd.on)?;
    let ch = import_all(py, "chunk", &CHUNK, &chunk, device, &fwd.on)?;
    gemm_op(py, &[(&INPUTS, &fwd.inputs, false), (&STATE, &fwd.state, true), (&GRADS, &gr, true), (&CHUNK, &ch, true)])?;
    let run = || -> Result<(), Error> {
        let (h, x, targets, mut fs) = fwd.parts(eps, loss)?;
        let f = |i: usize| raw::<f32>(&s, GRADS[i], &gr[i]);
        let mut g = HeadGrads::<Borrowed>::from_parts(&h, raw::<bf16>(&s, "dx", &gr[0])?, f(1)?, f(2)?)?;
        let b = |i: usize| raw::<bf16>(&s, CHUNK[i], &ch[i]);
        let mut bs = HeadBackwardState::<Borrowed>::from_parts(&s, &h, fs.tokens, chunk_rows, cublas(&s)?, b(0)?, b(1)?, b(2)?)?;
        coda_llama::head_forward_backward(&s, &h, &x, &targets, &mut fs, &mut bs, &mut g)
    };
    run().map_err(|e| to_py(py, e))
}

/// What both tail calls take for the forward: the current stream, the
/// imported [`INPUTS`] and [`STATE`].
struct Forward<'py> {
    on: Current<'py>,
    inputs: Vec<ImportedDlpack>,
    state: Vec<ImportedDlpack>,
}

/// The head's weights, `x`, `targets` and the forward's state, borrowed.
type Parts<'a> = (HeadWeights<Borrowed<'a>>, RawTensor<'a, bf16>, RawTensor<'a, i32>, HeadState<Borrowed<'a>>);

impl<'py> Forward<'py> {
    fn import(py: Python<'py>, device: usize, inputs: [Bound<'py, PyAny>; 4], state: &[Bound<'py, PyAny>]) -> PyResult<Forward<'py>> {
        let on = current_stream(py, device)?;
        let inputs = import_all(py, "inputs", &INPUTS, &inputs, device, &on)?;
        let state = import_all(py, "state", &STATE, state, device, &on)?;
        Ok(Forward { on, inputs, state })
    }

    fn parts(&self, eps: f32, loss: (f32, f32, f32)) -> Result<Parts<'_>, Error> {
        let (s, i) = (&*self.on.stream, &self.inputs);
        let mut h = HeadWeights::<Borrowed>::from_parts(raw::<bf16>(s, "gamma", &i[0])?, raw::<bf16>(s, "w", &i[1])?, eps)?;
        let (cap, z_loss, label_smoothing) = loss;
        h.loss = HeadLoss { softcap: (cap != 0.0).then_some(cap), z_loss, label_smoothing };
        let (x, targets) = (raw::<bf16>(s, "x", &i[2])?, raw::<i32>(s, "targets", &i[3])?);
        let f = |k: usize| raw::<f32>(s, STATE[k], &self.state[k]);
        let st = HeadState::<Borrowed>::from_parts(&h, raw::<bf16>(s, "u", &self.state[0])?, f(1)?, f(2)?, f(3)?, f(4)?, f(5)?)?;
        Ok((h, x, targets, st))
    }
}

/// The tail's forward alone (`coda_llama::head_forward`: one fused GEMM over
/// all rows, no chunk buffers, no gradients) on PyTorch's current stream of
/// `device`, for a loss nothing differentiates (evaluation, `torch.no_grad`):
/// `state` (written) in [`STATE`]'s order.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn head_forward(
    py: Python<'_>,
    device: usize,
    eps: f32,
    loss: (f32, f32, f32),
    gamma: Bound<'_, PyAny>,
    w: Bound<'_, PyAny>,
    x: Bound<'_, PyAny>,
    targets: Bound<'_, PyAny>,
    state: Vec<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let fwd = Forward::import(py, device, [gamma, w, x, targets], &state)?;
    gemm_op(py, &[(&INPUTS, &fwd.inputs, false), (&STATE, &fwd.state, true)])?;
    let run = || -> Result<(), Error> {
        let (h, x, targets, mut fs) = fwd.parts(eps, loss)?;
        coda_llama::head_forward(&fwd.on.stream, &h, &x, &targets, &mut fs)
    };
    run().map_err(|e| to_py(py, e))
}

/// The kept gradients `grads` (in [`GRADS`]' order: `dx` bf16, `dgamma` and
/// `dw` f32) times the loss's gradient `dmean` (`[1]` f32, read on the
/// device) into `out` (bf16, the parameters' dtype), each rounded once
/// (`aux::scale_into`): one pass each, where PyTorch's `mul(out=)` of an f32
/// `[V, d]` into bf16 took its slower mixed-dtype kernel (bench/NOTES.md,
/// session 36).
#[pyfunction]
pub fn head_scale_grads(
    py: Python<'_>,
    device: usize,
    dmean: Bound<'_, PyAny>,
    grads: Vec<Bound<'_, PyAny>>,
    out: Vec<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let on = current_stream(py, device)?;
    let s = on.stream.clone();
    let g = import_all(py, "dmean", &["dmean"], &[dmean], device, &on)?;
    let gr = import_all(py, "grads", &GRADS, &grads, device, &on)?;
    let out = import_all(py, "out", &SCALED, &out, device, &on)?;
    disjoint(py, &[(&["dmean"], &g, false), (&GRADS, &gr, false), (&SCALED, &out, true)])?;
    let run = || -> Result<(), Error> {
        // Every argument checked, by its name, before the first launch.
        let g = raw::<f32>(&s, "dmean", &g[0])?;
        if g.dims() != [1] {
            return Err(Error::arg("dmean", format!("must have one element, got shape {:?}", g.dims())));
        }
        let dx = raw::<bf16>(&s, GRADS[0], &gr[0])?;
        let (dgamma, dw) = (raw::<f32>(&s, GRADS[1], &gr[1])?, raw::<f32>(&s, GRADS[2], &gr[2])?);
        let mut dst = (0..3).map(|i| raw::<bf16>(&s, SCALED[i], &out[i])).collect::<Result<Vec<_>, _>>()?;
        for (i, src) in [dx.dims(), dgamma.dims(), dw.dims()].into_iter().enumerate() {
            if dst[i].dims() != src {
                return Err(Error::arg(SCALED[i], format!("shape {:?} must be {}'s {src:?}", dst[i].dims(), GRADS[i])));
            }
        }
        aux::scale_into(&s, &dx, &g, &mut dst[0])?;
        aux::scale_into(&s, &dgamma, &g, &mut dst[1])?;
        aux::scale_into(&s, &dw, &g, &mut dst[2])
    };
    run().map_err(|e| to_py(py, e))
}
