//! The Llama block's forward and backward (`coda_llama::block_forward`,
//! `block_backward`) on PyTorch tensors: every tensor, the saved
//! intermediates and gradients included, is allocated by PyTorch
//! (`python/coda_rs/llama.py`) and borrowed here through DLPack.

use coda_llama::{BackwardState, BlockConfig, BlockGrads, BlockState, BlockWeights, Borrowed, QkNorm, QkNormState, WeightGrad};
use coda_runtime::{Error, Stream, bf16};
use dlpark::python::ImportedDlpack;
use pyo3::prelude::*;

use crate::{Current, Use, argument_error, cublas, current_stream, gemm_op, import, raw, to_py};

/// A block's shapes as Python passes them:
/// `(hidden, ffn, heads, kv_heads, head_dim, eps, rope_theta, qk_norm)`.
type Config = (usize, usize, usize, usize, usize, f32, f32, bool);

fn config(py: Python<'_>, c: Config) -> PyResult<BlockConfig> {
    let (hidden, ffn, heads, kv_heads, head_dim, eps, rope_theta, qk_norm) = c;
    let c = BlockConfig { hidden, ffn, heads, kv_heads, head_dim, eps, rope_theta, qk_norm };
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
/// current stream, refusing a count other than `names`'; kept alive by
/// stream order, as PyTorch's ops' tensors are (`Use::StreamOrdered`).
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
    names.iter().zip(tensors).map(|(name, t)| import(py, name, t, device, on, Use::StreamOrdered)).collect()
}

// The tensors' names in the order Python passes them; with QK-norm the
// lists go on with the `_QK` names.
const WEIGHTS: [&str; 7] = ["wo", "gamma1", "w_gate_up", "w_down", "gamma2", "w_qkv", "rope_freq"];
const WEIGHTS_QK: [&str; 2] = ["q_norm", "k_norm"];
const STATE: [&str; 9] = ["x1", "u1", "r1", "z1", "y1", "x2", "u2", "r2", "qkv"];
/// What the backward reads of the forward's state (it reads neither `u1` nor `u2`).
const SAVED: [&str; 7] = ["x1", "r1", "z1", "y1", "x2", "r2", "qkv"];
const STATE_QK: [&str; 2] = ["z2", "qk_gamma"];
const WORK: [&str; 7] = ["dz2", "s2", "dh2", "xg2", "dz1", "s1", "xg1"];
const GRADS: [&str; 8] = ["dattn", "dx0", "dwo", "dgamma1", "dw_gate_up", "dw_down", "dgamma2", "dw_qkv"];
const GRADS_QK: [&str; 2] = ["dq_norm", "dk_norm"];

/// `names`, then `qk` where the config has QK-norm.
fn names(c: &BlockConfig, names: &[&'static str], qk: &[&'static str]) -> Vec<&'static str> {
    names.iter().chain(if c.qk_norm { qk } else { &[] }).copied().collect()
}

fn weights<'a>(py: Python<'_>, s: &Stream, c: BlockConfig, w: &'a [ImportedDlpack]) -> PyResult<BlockWeights<Borrowed<'a>>> {
    let weight_names = names(&c, &WEIGHTS, &WEIGHTS_QK);
    let b = |i: usize| raw::<bf16>(s, weight_names[i], &w[i]);
    let built = || {
        let qk = if c.qk_norm { Some(QkNorm { q: b(7)?, k: b(8)? }) } else { None };
        BlockWeights::from_parts(c, b(0)?, b(1)?, b(2)?, b(3)?, b(4)?, b(5)?, raw::<f32>(s, WEIGHTS[6], &w[6])?, qk)
    };
    // coda-llama names QK-norm's weights by their fields; Python passes them as `q_norm`, `k_norm`.
    built().map_err(|e| match e {
        Error::Arg { name, rule } if name == "qk_norm.q" => argument_error(py, WEIGHTS_QK[0], &rule),
        Error::Arg { name, rule } if name == "qk_norm.k" => argument_error(py, WEIGHTS_QK[1], &rule),
        other => to_py(py, other),
    })
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
    let w = import_all(py, "weights", &names(&c, &WEIGHTS, &WEIGHTS_QK), &weights, device, &on)?;
    let state_names = names(&c, &STATE, &STATE_QK);
    let st = import_all(py, "state", &state_names, &state, device, &on)?;
    let inputs = import_all(py, "inputs", &["attn", "x0", "pos"], &[attn, x0, pos], device, &on)?;
    gemm_op(py, &[(&names(&c, &WEIGHTS, &WEIGHTS_QK), &w, false), (&state_names, &st, true), (&["attn", "x0", "pos"], &inputs, false)])?;
    let bw = self::weights(py, &s, c, &w)?;
    let b = |i: usize| raw::<bf16>(&s, state_names[i], &st[i]);
    let f = |i: usize| raw::<f32>(&s, state_names[i], &st[i]);
    let run = || {
        let qk = if c.qk_norm { Some(QkNormState { z2: b(9)?, gamma: b(10)? }) } else { None };
        let mut bs = BlockState::<Borrowed>::from_parts(&c, b(0)?, b(1)?, f(2)?, b(3)?, b(4)?, b(5)?, b(6)?, f(7)?, b(8)?, qk)?;
        let attn = raw::<bf16>(&s, "attn", &inputs[0])?;
        let x0 = raw::<bf16>(&s, "x0", &inputs[1])?;
        let pos = raw::<f32>(&s, "pos", &inputs[2])?;
        coda_llama::block_forward(&s, &bw, coda_llama::ForwardInputs { attn: &attn, x0: &x0, pos: &pos }, &mut bs)
    };
    run().map_err(|e| to_py(py, e))
}

/// The block backward on PyTorch's current stream of `device`: `saved`, the
/// forward's state in [`SAVED`]'s order; `work` (scratch) in [`WORK`]'s and
/// `grads` (written) in [`GRADS`]'; `frozen` says, for `dwo`, `dw_gate_up`,
/// `dw_down` and `dw_qkv` in that order, which are not computed (their
/// tensors in `grads` are then not read or written).
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
    frozen: [bool; 4],
) -> PyResult<()> {
    let c = self::config(py, config)?;
    let on = current_stream(py, device)?;
    let s = on.stream.clone();
    let w = import_all(py, "weights", &names(&c, &WEIGHTS, &WEIGHTS_QK), &weights, device, &on)?;
    let (saved_names, grad_names) = (names(&c, &SAVED, &STATE_QK), names(&c, &GRADS, &GRADS_QK));
    let sv = import_all(py, "saved", &saved_names, &saved, device, &on)?;
    let wk = import_all(py, "work", &WORK, &work, device, &on)?;
    let gr = import_all(py, "grads", &grad_names, &grads, device, &on)?;
    let inputs = import_all(py, "inputs", &["attn", "pos", "dx2", "dqkv"], &[attn, pos, dx2, dqkv], device, &on)?;
    gemm_op(
        py,
        &[
            (&names(&c, &WEIGHTS, &WEIGHTS_QK), &w, false),
            (&saved_names, &sv, false),
            (&WORK, &wk, true),
            (&grad_names, &gr, true),
            (&["attn", "pos", "dx2", "dqkv"], &inputs, false),
        ],
    )?;
    let bw = self::weights(py, &s, c, &w)?;
    let run = || {
        let b = |i: usize| raw::<bf16>(&s, saved_names[i], &sv[i]);
        let f = |i: usize| raw::<f32>(&s, saved_names[i], &sv[i]);
        let qk = if c.qk_norm { Some(QkNormState { z2: b(7)?, gamma: b(8)? }) } else { None };
        // `u1` and `u2` stand in as `x1` and `x2` again: the backward reads neither.
        let fwd = BlockState::<Borrowed>::from_parts(&c, b(0)?, b(0)?, f(1)?, b(2)?, b(3)?, b(4)?, b(4)?, f(5)?, b(6)?, qk)?;
        let b = |i: usize| raw::<bf16>(&s, WORK[i], &wk[i]);
        let f = |i: usize| raw::<f32>(&s, WORK[i], &wk[i]);
        let mut bs = BackwardState::<Borrowed>::from_parts(&s, &c, cublas(&s)?, b(0)?, f(1)?, b(2)?, b(3)?, b(4)?, f(5)?, b(6)?)?;
        let b = |i: usize| raw::<bf16>(&s, grad_names[i], &gr[i]);
        let f = |i: usize| raw::<f32>(&s, grad_names[i], &gr[i]);
        let qk = if c.qk_norm { Some(QkNorm { q: f(8)?, k: f(9)? }) } else { None };
        // The weight matrices' gradients in the weights' bf16, the norm weights' in f32.
        let w = |i: usize, frozen: bool| if frozen { Ok(WeightGrad::Frozen) } else { b(i).map(WeightGrad::Bf16) };
        let [fo, fgu, fd, fqkv] = frozen;
        let mut g = BlockGrads::<Borrowed>::from_parts(&c, b(0)?, b(1)?, w(2, fo)?, f(3)?, w(4, fgu)?, w(5, fd)?, f(6)?, w(7, fqkv)?, qk)?;
        let attn = raw::<bf16>(&s, "attn", &inputs[0])?;
        let pos = raw::<f32>(&s, "pos", &inputs[1])?;
        let dx2 = raw::<bf16>(&s, "dx2", &inputs[2])?;
        let dqkv = raw::<bf16>(&s, "dqkv", &inputs[3])?;
        coda_llama::block_backward(&s, &bw, &fwd, coda_llama::BackwardInputs { attn: &attn, pos: &pos, dx2: &dx2, dqkv: &dqkv }, &mut bs, &mut g)
    };
    run().map_err(|e| to_py(py, e))
}
