"""The LM-head tail as a differentiable PyTorch op: final RMSNorm → LM head
→ mean cross-entropy, without the ``M × V`` logits.

``head_loss(x, targets, gamma, w, eps)`` returns the mean loss over rows
whose target is in ``[0, V)`` (others, such as -100, are ignored, as in
``F.cross_entropy``; if every row is ignored the mean is NaN, as there).
Where nothing is differentiated (``torch.no_grad``, or no input requiring
grad) it runs ``coda_llama::head_forward`` alone (``coda_rs::head_loss_forward``:
one fused GEMM, no chunks, no gradients).
The forward runs ``coda_llama::head_forward_backward``: row chunks of
``chunk_rows`` (a multiple of 256) each run the head GEMM once, its
epilogue keeping online log-sum-exp partials and the chunk's bf16 logits,
from which the gradients follow; so the gradients of ``x``, ``gamma`` and
``w`` are computed in the forward, kept, and scaled by the loss's gradient
in the backward (one pass instead of two, as fused-loss kernels do), by a
second op. They are the ``torch.library`` custom ops ``coda_rs::head_loss``
and ``coda_rs::head_loss_grad`` with fake implementations, opaque under
``torch.compile``; first-order gradients only (the kept gradients are not
differentiable themselves).

``x`` ``[M, d]`` bf16, ``targets`` ``[M]`` (any integer dtype, converted
to int32), ``gamma`` ``[d]`` and ``w`` ``[V, d]`` bf16 (a ``Linear``
weight), V and d multiples of 8; contiguous CUDA tensors of one device. The
chunk buffers (two ``chunk_rows × V`` bf16 tensors and a ``chunk_rows × d``
one) come from PyTorch's allocator for each call, so its memory statistics
count them and it reuses their memory after the op; small per-chunk buffers
(partials, row statistics) are allocated on the current stream outside it.

Needs PyTorch.
"""

import math

import torch

from . import _coda
from ._errors import argument_error, f32_number
from .block import OP_TAGS, _rows, autocast_bf16

__all__ = ["head_loss"]


@torch.library.custom_op("coda_rs::head_loss", mutates_args=(), tags=OP_TAGS)
def _head(
    x: torch.Tensor,
    targets: torch.Tensor,
    gamma: torch.Tensor,
    w: torch.Tensor,
    eps: float,
    chunk_rows: int,
    softcap: float,
    z_loss: float,
    label_smoothing: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    (m, device), state, inputs = _forward_args(x, targets, gamma, w)
    v, d = w.shape
    e = lambda *shape, dtype=torch.float32: torch.empty(shape, dtype=dtype, device=x.device)  # noqa: E731
    rows = _coda.head_buffer_rows(m, chunk_rows)
    grads = [e(m, d, dtype=torch.bfloat16), e(d), e(v, d)]
    chunk = [e(rows, v, dtype=torch.bfloat16), e(rows, v, dtype=torch.bfloat16), e(rows, d, dtype=torch.bfloat16)]
    with torch.cuda.device(device):
        _coda.head_forward_backward(device, eps, chunk_rows, (softcap, z_loss, label_smoothing), *inputs, state, grads, chunk)
    return (state[5],) + tuple(grads)


def _forward_args(x, targets, gamma, w):
    """``((M, device), state, (gamma, w, x, targets))`` of a tail's launch:
    the forward's state allocated, the inputs as the native ops take them."""
    (m, device), _ = _rows("x", x), _rows("w", w)
    v, d = w.shape
    if gamma.dim() != 1:
        raise argument_error("gamma", f"shape {tuple(gamma.shape)} must be [d]")
    if targets.dtype.is_floating_point:
        raise argument_error("targets", f"has dtype {targets.dtype}; class ids are integers")
    e = lambda *shape, dtype=torch.float32: torch.empty(shape, dtype=dtype, device=x.device)  # noqa: E731
    state = [e(m, d, dtype=torch.bfloat16), e(m), e(m), e(m), e(m), e(1)]
    # Ids past int32 would wrap into valid classes: clamped first, to −1 or
    # V, which are ignored as every id outside [0, V) is.
    inputs = (gamma.detach(), w.detach(), x.detach(), targets.detach().clamp(-1, v).to(torch.int32))
    return (m, device), state, inputs


# The tail's loss alone, for a loss nothing differentiates: one fused GEMM
# over all rows and no gradients (the op above computes them in its forward).
@torch.library.custom_op("coda_rs::head_loss_forward", mutates_args=(), tags=OP_TAGS)
def _head_forward(
    x: torch.Tensor,
    targets: torch.Tensor,
    gamma: torch.Tensor,
    w: torch.Tensor,
    eps: float,
    softcap: float,
    z_loss: float,
    label_smoothing: float,
) -> torch.Tensor:
    (_, device), state, inputs = _forward_args(x, targets, gamma, w)
    with torch.cuda.device(device):
        _coda.head_forward(device, eps, (softcap, z_loss, label_smoothing), *inputs, state)
    return state[5]


@_head_forward.register_fake
def _(x, targets, gamma, w, *_):
    return x.new_empty(1, dtype=torch.float32)


@_head.register_fake
def _(x, targets, gamma, w, eps, chunk_rows, *_loss):
    (m, _), (v, d) = x.shape, w.shape
    return x.new_empty(1, dtype=torch.float32), x.new_empty(m, d), x.new_empty(d, dtype=torch.float32), x.new_empty(v, d, dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    x, targets, gamma, w, *_ = inputs
    _, dx, dgamma, dw = output
    ctx.save_for_backward(dx, dgamma, dw)
    ctx.dtypes = (x.dtype, gamma.dtype, w.dtype)
    ctx.mark_non_differentiable(dx, dgamma, dw)
    # The saved gradients are outputs without a gradient of their own; do
    # not let autograd fill zero tensors ([V, d] for dw) for them.
    ctx.set_materialize_grads(False)


# The saved gradients scaled by the loss's gradient, as an opaque op of its
# own: under CUDA graph trees a captured backward partition takes the
# forward's saved tensors as static inputs, and the forward allocates them
# anew each step, so scaling them in captured code re-recorded that
# partition on every step (990 times in 46 steps of the training run).
@torch.library.custom_op("coda_rs::head_loss_grad", mutates_args=(), tags=OP_TAGS)
def _scaled(
    dmean: torch.Tensor,
    dx: torch.Tensor,
    dgamma: torch.Tensor,
    dw: torch.Tensor,
    x_dtype: torch.dtype,
    gamma_dtype: torch.dtype,
    w_dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    # One pass each, computed in f32 and rounded once into the parameter's
    # dtype (bf16: the forward takes no other), no f32 temporary of dw's [V, d].
    out = [torch.empty(t.shape, dtype=dtype, device=t.device) for t, dtype in ((dx, x_dtype), (dgamma, gamma_dtype), (dw, w_dtype))]
    with torch.cuda.device(dw.device):
        _coda.head_scale_grads(dw.device.index, dmean.detach().reshape(1), [dx, dgamma, dw], out)
    return tuple(out)


@_scaled.register_fake
def _(dmean, dx, dgamma, dw, x_dtype, gamma_dtype, w_dtype):
    return dx.new_empty(dx.shape, dtype=x_dtype), dgamma.new_empty(dgamma.shape, dtype=gamma_dtype), dw.new_empty(dw.shape, dtype=w_dtype)


def _grad(ctx, dmean, *_):
    if dmean is None:
        return (None,) * 9
    dx, dgamma, dw = torch.ops.coda_rs.head_loss_grad(dmean, *ctx.saved_tensors, *ctx.dtypes)
    return dx, None, dgamma, dw, None, None, None, None, None


_head.register_autograd(_grad, setup_context=_setup_context)


def head_loss(x, targets, gamma, w, eps=1e-5, chunk_rows=4096, softcap=None, z_loss=0.0, label_smoothing=0.0):
    """The mean cross-entropy of ``RMSNorm(x)·γ`` through ``w`` against
    ``targets``, a 0-dim f32 tensor; differentiable in ``x``, ``gamma``, ``w``.
    With ``softcap`` the logits are ``softcap · tanh(logits / softcap)``
    first (Gemma); ``z_loss`` adds ``z_loss · lse²`` per row (PaLM);
    ``label_smoothing`` is ``F.cross_entropy``'s. The logits are never stored.
    Under ``torch.autocast("cuda", dtype=torch.bfloat16)`` f32 ``x``,
    ``gamma`` and ``w`` are cast to bf16 first."""
    if softcap is not None and not (softcap > 0 and math.isfinite(softcap)):
        raise argument_error("softcap", f"{softcap} must be positive and finite (or None for no cap)")
    if not (math.isfinite(z_loss) and z_loss >= 0):
        raise argument_error("z_loss", f"{z_loss} must be finite and ≥ 0")
    if not 0 <= label_smoothing <= 1:
        raise argument_error("label_smoothing", f"{label_smoothing} must be in [0, 1]")
    # Checked here too: the forward alone (no gradients) takes no chunks.
    if not (isinstance(chunk_rows, int) and chunk_rows > 0 and chunk_rows % 256 == 0):
        raise argument_error("chunk_rows", f"{chunk_rows!r} must be a positive multiple of 256")
    cap = 0.0 if softcap is None else f32_number("softcap", softcap)
    z_loss, label_smoothing, eps = f32_number("z_loss", z_loss), f32_number("label_smoothing", label_smoothing), f32_number("eps", eps)
    x, gamma, w = autocast_bf16(("x", "gamma", "w"), (x, gamma, w))
    if not (torch.is_grad_enabled() and any(t.requires_grad for t in (x, gamma, w))):
        # Evaluation: no gradients to keep, so no chunks, no backward GEMMs.
        return torch.ops.coda_rs.head_loss_forward(x, targets, gamma, w, eps, cap, z_loss, label_smoothing).reshape(())
    mean, *_ = torch.ops.coda_rs.head_loss(x, targets, gamma, w, eps, chunk_rows, cap, z_loss, label_smoothing)
    return mean.reshape(())
