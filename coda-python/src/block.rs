//! The Llama block's forward and backward (`coda_llama::block_forward`,
//! `block_backward`) on PyTorch tensors: every tensor, the saved
//! intermediates and gradients included, is allocated by PyTorch
//! (`python/coda_rs/llama.py`) and borrowed here through DLPack.

use coda_llama::{BackwardState, BlockConfig, BlockGrads, BlockState, BlockWeights, Borrowed};
use coda_runtime::{Stream, bf16};
use dlpark::python::ImportedDlpack;
use pyo3::prelude::*;

use crate::{Current, argument_error, cublas, current_stream, import, raw, to_py};

/// A block's shapes as Python passes them:
/// `(hidden, ffn, heads, kv_heads, head_dim, eps, rope_theta)`.
type Config = (usize, usize, usize, usize, usize, f32, f32);

fn config(py: Python<'_>, c: Config) -> PyResult<BlockConfig> {
    let (hidden, ffn, heads, kv_heads, head_dim, eps, rope_theta) = c;
    let c = BlockConfig { hidden, ffn, heads, kv_heads, head_dim, eps, rope_theta };
    c.check().map_err(|e| to_py(py, e))?;
    Ok(c)
}

/// Refuses a config the kernels cannot run, naming the field.
#[pyfunction]
pub fn block_check(py: Python<'_>, c: Config) -> PyResult<()> {
    config(py, c).map(|_| ())
}

/// The per-column RoPE frequencies `[qkv_width]` a block's `rope_freq` holds.
#[pyfunction]
pub fn block_rope_freq(py: Python<'_>, c: Config) -> PyResult<Vec<f32>> {
    config(py, c)?.rope_freq().map_err(|e| to_py(py, e))
}

/// Imports `tensors` (named `names`, in order) for a launch on `device`'s
/// current stream, refusing a count other than `names`'.
pub(crate) fn import_all(
    py: Python<'_>,
    what: &str,
    names: &[&str],
    tensors: &[Bound<'_, PyAny>],
    device: usize,
    on: &Current<'_>,
) -> PyResult<Vec<ImportedDlpack>> {
    if tensors.len() != names.len() {
        return Err(argument_error(py, what, &format!("{} tensors given, want {} ({})", tensors.len(), names.len(), names.join(", "))));
    }
    names.iter().zip(tensors).map(|(name, t)| import(py, name, t, device, on)).collect()
}

const WEIGHTS: [&str; 7] = ["wo", "gamma1", "w_gate_up", "w_down", "gamma2", "w_qkv", "rope_freq"];
const STATE: [&str; 9] = ["x1", "u1", "r1", "z1", "y1", "x2", "u2", "r2", "qkv"];
/// What the backward reads of the forward's state (it reads neither `u1` nor `u2`).
const SAVED: [&str; 7] = ["x1", "r1", "z1", "y1", "x2", "r2", "qkv"];
const WORK: [&str; 7] = ["dz2", "s2", "dh2", "xg2", "dz1", "s1", "xg1"];
const GRADS: [&str; 8] = ["dattn", "dx0", "dwo", "dgamma1", "dw_gate_up", "dw_down", "dgamma2", "dw_qkv"];

fn weights<'a>(py: Python<'_>, s: &Stream, c: BlockConfig, w: &'a [ImportedDlpack]) -> PyResult<BlockWeights<Borrowed<'a>>> {
    let b = |i: usize| raw::<bf16>(s, WEIGHTS[i], &w[i]);
    let built = || BlockWeights::from_parts(c, b(0)?, b(1)?, b(2)?, b(3)?, b(4)?, b(5)?, raw::<f32>(s, WEIGHTS[6], &w[6])?);
    built().map_err(|e| to_py(py, e))
}

/// The block forward on PyTorch's current stream of `device`: `weights` in
/// [`WEIGHTS`]' order, `state` (written) in [`STATE`]'s.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn block_forward(
    py: Python<'_>,
    device: usize,
    config: Config,
    weights: Vec<Bound<'_, PyAny>>,
    attn: Bound<'_, PyAny>,
    x0: Bound<'_, PyAny>,
    pos: Bound<'_, PyAny>,
    state: Vec<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let c = self::config(py, config)?;
    let on = current_stream(py, device)?;
    let s = on.stream.clone();
    let w = import_all(py, "weights", &WEIGHTS, &weights, device, &on)?;
    let st = import_all(py, "state", &STATE, &state, device, &on)?;
    let inputs = import_all(py, "inputs", &["attn", "x0", "pos"], &[attn, x0, pos], device, &on)?;
    let bw = self::weights(py, &s, c, &w)?;
    let b = |i: usize| raw::<bf16>(&s, STATE[i], &st[i]);
    let f = |i: usize| raw::<f32>(&s, STATE[i], &st[i]);
    let run = || {
        let mut bs = BlockState::<Borrowed>::from_parts(&c, b(0)?, b(1)?, f(2)?, b(3)?, b(4)?, b(5)?, b(6)?, f(7)?, b(8)?)?;
        let attn = raw::<bf16>(&s, "attn", &inputs[0])?;
        let x0 = raw::<bf16>(&s, "x0", &inputs[1])?;
        let pos = raw::<f32>(&s, "pos", &inputs[2])?;
        coda_llama::block_forward(&s, &bw, &attn, &x0, &pos, &mut bs)
    };
    run().map_err(|e| to_py(py, e))
}

/// The block backward on PyTorch's current stream of `device`: `saved`, the
/// forward's state in [`SAVED`]'s order; `work` (scratch) in [`WORK`]'s and
/// `grads` (written) in [`GRADS`]'.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn block_backward(
    py: Python<'_>,
    device: usize,
    config: Config,
    weights: Vec<Bound<'_, PyAny>>,
    saved: Vec<Bound<'_, PyAny>>,
    attn: Bound<'_, PyAny>,
    pos: Bound<'_, PyAny>,
    dx2: Bound<'_, PyAny>,
    dqkv: Bound<'_, PyAny>,
    work: Vec<Bound<'_, PyAny>>,
    grads: Vec<Bound<'_, PyAny>>,
) -> PyResult<()> {
    let c = self::config(py, config)?;
    let on = current_stream(py, device)?;
    let s = on.stream.clone();
    let w = import_all(py, "weights", &WEIGHTS, &weights, device, &on)?;
    let sv = import_all(py, "saved", &SAVED, &saved, device, &on)?;
    let wk = import_all(py, "work", &WORK, &work, device, &on)?;
    let gr = import_all(py, "grads", &GRADS, &grads, device, &on)?;
    let inputs = import_all(py, "inputs", &["attn", "pos", "dx2", "dqkv"], &[attn, pos, dx2, dqkv], device, &on)?;
    let bw = self::weights(py, &s, c, &w)?;
    let run = || {
        let b = |i: usize| raw::<bf16>(&s, SAVED[i], &sv[i]);
        let f = |i: usize| raw::<f32>(&s, SAVED[i], &sv[i]);
        // `u1` and `u2` stand in as `x1` and `x2` again: the backward reads neither.
        let fwd = BlockState::<Borrowed>::from_parts(&c, b(0)?, b(0)?, f(1)?, b(2)?, b(3)?, b(4)?, b(4)?, f(5)?, b(6)?)?;
        let b = |i: usize| raw::<bf16>(&s, WORK[i], &wk[i]);
        let f = |i: usize| raw::<f32>(&s, WORK[i], &wk[i]);
        let mut bs = BackwardState::<Borrowed>::from_parts(&s, &c, cublas(&s)?, b(0)?, f(1)?, b(2)?, b(3)?, b(4)?, f(5)?, b(6)?)?;
        let b = |i: usize| raw::<bf16>(&s, GRADS[i], &gr[i]);
        let f = |i: usize| raw::<f32>(&s, GRADS[i], &gr[i]);
        let mut g = BlockGrads::<Borrowed>::from_parts(&c, b(0)?, b(1)?, f(2)?, f(3)?, f(4)?, f(5)?, f(6)?, f(7)?)?;
        let attn = raw::<bf16>(&s, "attn", &inputs[0])?;
        let pos = raw::<f32>(&s, "pos", &inputs[1])?;
        let dx2 = raw::<bf16>(&s, "dx2", &inputs[2])?;
        let dqkv = raw::<bf16>(&s, "dqkv", &inputs[3])?;
        coda_llama::block_backward(&s, &bw, &fwd, &attn, &pos, &dx2, &dqkv, &mut bs, &mut g)
    };
    run().map_err(|e| to_py(py, e))
}
