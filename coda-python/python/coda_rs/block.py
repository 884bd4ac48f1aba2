"""The Llama block's non-attention part as a differentiable PyTorch op.

``block(attn, x0, pos, weights, config)`` runs ``coda_llama``'s fused
forward (o_proj → +residual → RMSNorm → gate_up → SwiGLU → down → +residual
→ RMSNorm → qkv → RoPE: four fused GEMMs, two tiny reductions) on the current
stream and returns ``(x2, qkv)``: the residual stream after the block and
the rotated q, k, v of the next attention. Its backward is
``coda_llama``'s (five fused GEMMs, four reductions, four cuBLAS weight
gradients). Both are ``torch.library`` custom ops (``coda_rs::block_forward``,
``coda_rs::block_backward``) with fake implementations, so a model using
them runs under ``torch.compile`` with the ops left opaque.

Layouts are the kernels' (``coda_rs.llama`` converts checkpoints): ``wo``
``[d, heads·head_dim]``, ``gamma1``/``gamma2`` ``[d]``, ``w_gate_up``
``[2f, d]`` with gate and up rows interleaved, ``w_down`` ``[d, f]``,
``w_qkv`` ``[(heads + 2·kv_heads)·head_dim, d]`` with each head's RoPE pairs
adjacent; ``attn`` ``[M, heads·head_dim]``, ``x0`` ``[M, d]`` bf16, ``pos``
``[M]`` f32 (token positions). Every tensor is a contiguous CUDA tensor of
one device; a broken rule raises ``ArgumentError`` naming the argument.
The saved intermediates (``x1``, ``r1``, ``z1``, ``y1``, ``x2``, ``r2``,
``qkv``, and with QK-norm ``z2`` and its weights over the columns) are PyTorch tensors; weight gradients are summed in f32 by the
kernels and written in the weights' dtype (bf16) by the GEMMs themselves, the norm weights' in f32 (PyTorch converts those).

With ``BlockConfig(qk_norm=True)`` (Qwen3 / OLMo 2 QK-norm; ``head_dim``
128) each q and k head is RMS-normalised over its columns and scaled by
``q_norm`` / ``k_norm`` (``[head_dim]`` each, in the kernels' pair order:
``coda_rs.llama.head_vector_from_checkpoint``) before RoPE, inside the same
epilogue; the weights then take those two as their seventh and eighth.

Needs PyTorch (``import coda_rs.block`` imports it).
"""

import functools
import operator
from dataclasses import dataclass
from typing import Optional

import torch

from . import _coda
from ._errors import argument_error

__all__ = ["Block", "BlockConfig", "block", "rope_freq"]

_BF16, _F32 = torch.bfloat16, torch.float32
# CODA refuses a launch on a stream that is capturing a CUDA graph (its ops
# allocate chunk and partial buffers outside PyTorch's allocator), so its
# ops say so: under torch.compile's CUDA graphs ("max-autotune", "reduce-
# overhead") Inductor then runs a graph holding them without capturing it.
# PyTorch before 2.8 has no such tag.
OP_TAGS = (torch.Tag.cudagraph_unsafe,) if hasattr(torch.Tag, "cudagraph_unsafe") else ()


@dataclass(frozen=True)
class BlockConfig:
    """A block's shapes: hidden size ``d``, FFN width ``f``, attention heads
    and kv heads of ``head_dim``, the RMSNorm ``eps`` and RoPE base, and
    whether q and k are normalised per head (``qk_norm``)."""

    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float = 1e-5
    rope_theta: float = 10000.0
    qk_norm: bool = False

    def __post_init__(self):
        # What the native check cannot take as its types, refused by field here.
        for field in ("hidden", "ffn", "heads", "kv_heads", "head_dim"):
            n = getattr(self, field)
            try:
                whole = not isinstance(n, bool) and operator.index(n) >= 1
            except TypeError:
                whole = False
            if not whole:
                raise argument_error(field, f"{n!r} must be a whole number ≥ 1")
        for field in ("eps", "rope_theta"):
            if not isinstance(getattr(self, field), (int, float)) or isinstance(getattr(self, field), bool):
                raise argument_error(field, f"{getattr(self, field)!r} must be a number")
        if not isinstance(self.qk_norm, bool):
            raise argument_error("qk_norm", f"{self.qk_norm!r} must be True or False")
        _coda.block_check(self._native())

    def _native(self):
        return (self.hidden, self.ffn, self.heads, self.kv_heads, self.head_dim, self.eps, self.rope_theta, self.qk_norm)


def rope_freq(config, device):
    """The per-column RoPE frequencies ``[qkv_width]`` f32 on ``device``
    (0 on the v columns), as the kernels take them."""
    return torch.tensor(_coda.block_rope_freq(config._native()), dtype=_F32, device=device)


@functools.lru_cache(maxsize=64)
def _shared_freq(config, device):
    """``rope_freq`` made once per (config, device) for ``block`` calls that
    pass none; only ever read by the kernels."""
    return rope_freq(config, device)


def _keep_f32_freq(module, config):
    """Remakes ``module.freq`` in f32 on its device if a cast changed its dtype."""
    if module.freq.dtype != _F32:
        module.freq = rope_freq(config, module.freq.device)


def autocast_bf16(names, tensors):
    """``tensors`` (named ``names``, in order) as the kernels take them under
    ``torch.autocast`` on CUDA: each floating tensor of another dtype (f64
    too) cast to bf16 where autocast's dtype is bf16 (tracked by autograd,
    so f32 master weights get their gradients in f32, rounded through bf16
    as autocast's ``Linear`` gives them); where it is another dtype, the
    first such tensor is refused by its name (the kernels are bf16; bf16
    tensors run as they are). Outside autocast, every tensor as given."""
    if not torch.is_autocast_enabled("cuda"):
        return tensors
    cast = [isinstance(t, torch.Tensor) and t.is_floating_point() and t.dtype != _BF16 for t in tensors]
    if not any(cast):
        return tensors
    dt = torch.get_autocast_dtype("cuda")
    if dt != _BF16:
        name, t = next((n, t) for n, t, c in zip(names, tensors, cast) if c)
        raise argument_error(name, f"is {t.dtype} under torch.autocast to {dt}: the kernels are bf16 (autocast with dtype=torch.bfloat16)")
    return tuple(t.to(_BF16) if c else t for t, c in zip(tensors, cast))


def _rows(name, t):
    """The rows (tokens) of ``t`` and its CUDA device index; the rest of
    every tensor is checked natively, against the config."""
    if t.dim() != 2:
        raise argument_error(name, f"shape {tuple(t.shape)} must be [M, width]")
    if t.device.type != "cuda":
        raise argument_error(name, f"is on {t.device}; CODA needs CUDA tensors")
    if t.shape[0] == 0:
        raise argument_error(name, f"shape {tuple(t.shape)} has no rows; M must be ≥ 1")
    return t.shape[0], t.device.index


@torch.library.custom_op("coda_rs::block_forward", mutates_args=(), tags=OP_TAGS)
def _forward(
    attn: torch.Tensor,
    x0: torch.Tensor,
    pos: torch.Tensor,
    wo: torch.Tensor,
    gamma1: torch.Tensor,
    w_gate_up: torch.Tensor,
    w_down: torch.Tensor,
    gamma2: torch.Tensor,
    w_qkv: torch.Tensor,
    freq: torch.Tensor,
    q_norm: Optional[torch.Tensor],
    k_norm: Optional[torch.Tensor],
    hidden: int,
    ffn: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    eps: float,
    rope_theta: float,
    qk_norm: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    (m, device), d, f, qw = _rows("x0", x0), hidden, ffn, (heads + 2 * kv_heads) * head_dim
    e = lambda *shape, dtype=_BF16: torch.empty(shape, dtype=dtype, device=x0.device)  # noqa: E731
    x1, u1, r1, z1, y1 = e(m, d), e(m, d), e(m, dtype=_F32), e(m, 2 * f), e(m, f)
    x2, u2, r2, qkv = e(m, d), e(m, d), e(m, dtype=_F32), e(m, qw)
    # QK-norm's pre-norm qkv and its weights over the columns (empty without it).
    z2, qk_gamma = (e(m, qw), e(qw)) if qk_norm else (e(0), e(0))
    with torch.cuda.device(device):
        _coda.block_forward(
            device,
            (d, f, heads, kv_heads, head_dim, eps, rope_theta, qk_norm),
            [t.detach() for t in (wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, freq) + _qk(qk_norm, q_norm, k_norm)],
            attn.detach(),
            x0.detach(),
            pos.detach(),
            [x1, u1, r1, z1, y1, x2, u2, r2, qkv] + ([z2, qk_gamma] if qk_norm else []),
        )
    return x2, qkv, x1, r1, z1, y1, r2, z2, qk_gamma


def _qk(qk_norm, *tensors):
    """QK-norm's tensors where the config has it (the native side refuses a
    missing one by name), else none of them."""
    return tuple(t for t in tensors if t is not None) if qk_norm else ()


@_forward.register_fake
def _(attn, x0, pos, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, freq, q_norm, k_norm, hidden, ffn, heads, kv_heads, head_dim, eps, rope_theta, qk_norm):
    m, d, f, qw = x0.shape[0], hidden, ffn, (heads + 2 * kv_heads) * head_dim
    e = lambda *shape, dtype=_BF16: x0.new_empty(shape, dtype=dtype)  # noqa: E731
    z2, qk_gamma = (e(m, qw), e(qw)) if qk_norm else (e(0), e(0))
    return e(m, d), e(m, qw), e(m, d), e(m, dtype=_F32), e(m, 2 * f), e(m, f), e(m, dtype=_F32), z2, qk_gamma


@torch.library.custom_op("coda_rs::block_backward", mutates_args=(), tags=OP_TAGS)
def _backward(
    attn: torch.Tensor,
    pos: torch.Tensor,
    dx2: torch.Tensor,
    dqkv: torch.Tensor,
    wo: torch.Tensor,
    gamma1: torch.Tensor,
    w_gate_up: torch.Tensor,
    w_down: torch.Tensor,
    gamma2: torch.Tensor,
    w_qkv: torch.Tensor,
    freq: torch.Tensor,
    q_norm: Optional[torch.Tensor],
    k_norm: Optional[torch.Tensor],
    x1: torch.Tensor,
    r1: torch.Tensor,
    z1: torch.Tensor,
    y1: torch.Tensor,
    x2: torch.Tensor,
    r2: torch.Tensor,
    qkv: torch.Tensor,
    z2: torch.Tensor,
    qk_gamma: torch.Tensor,
    frozen: list[bool],
    hidden: int,
    ffn: int,
    heads: int,
    kv_heads: int,
    head_dim: int,
    eps: float,
    rope_theta: float,
    qk_norm: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    (m, device), d, f = _rows("x1", x1), hidden, ffn
    e = lambda *shape, dtype=_BF16: torch.empty(shape, dtype=dtype, device=x1.device)  # noqa: E731
    work = [e(m, (heads + 2 * kv_heads) * head_dim), e(m, dtype=_F32), e(m, d), e(m, d), e(m, 2 * f), e(m, dtype=_F32), e(m, d)]
    grads = _backward_grads(e, m, frozen, hidden, ffn, heads, kv_heads, head_dim)
    # QK-norm's weight gradients (empty without it).
    dqk = [e(head_dim, dtype=_F32), e(head_dim, dtype=_F32)] if qk_norm else [e(0, dtype=_F32), e(0, dtype=_F32)]
    with torch.cuda.device(device):
        _coda.block_backward(
            device,
            (d, f, heads, kv_heads, head_dim, eps, rope_theta, qk_norm),
            [t.detach() for t in (wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, freq) + _qk(qk_norm, q_norm, k_norm)],
            [t.detach() for t in (x1, r1, z1, y1, x2, r2, qkv) + _qk(qk_norm, z2, qk_gamma)],
            attn.detach(),
            pos.detach(),
            dx2.detach(),
            dqkv.detach(),
            work,
            grads + (dqk if qk_norm else []),
            frozen,
        )
    return tuple(grads + dqk)


@_backward.register_fake
def _(attn, pos, dx2, dqkv, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, freq, q_norm, k_norm, x1, r1, z1, y1, x2, r2, qkv, z2, qk_gamma,
      frozen, hidden, ffn, heads, kv_heads, head_dim, eps, rope_theta, qk_norm):
    e = lambda *shape, dtype=_BF16: x1.new_empty(shape, dtype=dtype)  # noqa: E731
    n = head_dim if qk_norm else 0
    return tuple(_backward_grads(e, x1.shape[0], frozen, hidden, ffn, heads, kv_heads, head_dim)) + (e(n, dtype=_F32), e(n, dtype=_F32))


def _backward_grads(e, m, frozen, hidden, ffn, heads, kv_heads, head_dim):
    """The backward's gradient tensors from ``e(*shape, dtype=…)``: the weight
    matrices' in bf16 (the GEMM rounds its f32 sum once; empty where
    ``frozen``, for ``wo``, ``w_gate_up``, ``w_down``, ``w_qkv``), the norm weights' in f32."""
    d, f, qw, aw = hidden, ffn, (heads + 2 * kv_heads) * head_dim, heads * head_dim
    fo, fgu, fd, fqkv = frozen
    w = lambda frozen, *shape: e(0) if frozen else e(*shape)  # noqa: E731
    return [e(m, aw), e(m, d), w(fo, d, aw), e(d, dtype=_F32), w(fgu, 2 * f, d), w(fd, d, f), e(d, dtype=_F32), w(fqkv, qw, d)]


def _setup_context(ctx, inputs, output):
    attn, x0, pos, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, freq, q_norm, k_norm, *config = inputs
    x2, qkv, x1, r1, z1, y1, r2, z2, qk_gamma = output
    ctx.save_for_backward(attn, pos, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, freq, q_norm, k_norm, x1, r1, z1, y1, x2, r2, qkv, z2, qk_gamma)
    ctx.config = config
    ctx.mark_non_differentiable(x1, r1, z1, y1, r2, z2, qk_gamma)
    # The intermediates have no gradient; without this autograd would fill
    # a zero tensor for each ([M, 2F] for z1) before every backward.
    ctx.set_materialize_grads(False)


def _grad(ctx, dx2, dqkv, *_intermediates):
    attn, pos, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, freq, q_norm, k_norm, x1, r1, z1, y1, x2, r2, qkv, z2, qk_gamma = ctx.saved_tensors
    # An output unused by the loss has no gradient; the kernels want dense ones.
    dx2 = torch.zeros_like(x2) if dx2 is None else dx2.contiguous()
    dqkv = torch.zeros_like(qkv) if dqkv is None else dqkv.contiguous()
    # A weight matrix nothing differentiates (frozen) gets no gradient GEMM.
    frozen = [not ctx.needs_input_grad[i] for i in (3, 5, 6, 8)]
    dattn, dx0, dwo, dg1, dwgu, dwd, dg2, dwqkv, dqn, dkn = torch.ops.coda_rs.block_backward(
        attn, pos, dx2, dqkv, wo, gamma1, w_gate_up, w_down, gamma2, w_qkv, freq, q_norm, k_norm, x1, r1, z1, y1, x2, r2, qkv, z2, qk_gamma,
        frozen, *ctx.config
    )
    dwo, dwgu, dwd, dwqkv = (None if skip else g for skip, g in zip(frozen, (dwo, dwgu, dwd, dwqkv)))
    like = lambda g, w: None if w is None or g is None else g.to(w.dtype)  # noqa: E731
    weights = (like(dwo, wo), like(dg1, gamma1), like(dwgu, w_gate_up), like(dwd, w_down), like(dg2, gamma2), like(dwqkv, w_qkv))
    return (dattn, dx0, None) + weights + (None, like(dqn, q_norm), like(dkn, k_norm)) + (None,) * 8


_forward.register_autograd(_grad, setup_context=_setup_context)


_WEIGHT_NAMES = "wo, gamma1, w_gate_up, w_down, gamma2, w_qkv"


def block(attn, x0, pos, weights, config, freq=None):
    """``(x2, qkv)`` of the block for ``attn``, ``x0``, ``pos``;
    ``weights`` = ``(wo, gamma1, w_gate_up, w_down, gamma2, w_qkv)`` in the
    kernels' layout, and ``q_norm, k_norm`` after them with QK-norm;
    ``config`` a ``BlockConfig``, ``freq`` its ``rope_freq`` (made once
    per config and device if not given). Differentiable in ``attn``, ``x0`` and the weights; a
    weight matrix that does not require grad gets no gradient GEMM. Under
    ``torch.autocast("cuda", dtype=torch.bfloat16)`` f32 inputs and weights
    are cast to bf16 first (see ``autocast_bf16``)."""
    want, names = (8, _WEIGHT_NAMES + ", q_norm, k_norm") if config.qk_norm else (6, _WEIGHT_NAMES)
    if len(weights) != want:
        raise argument_error("weights", f"{len(weights)} given, want {want}: ({names})")
    if freq is None:
        freq = _shared_freq(config, x0.device)
    # `pos` and `freq` stay f32, as the kernels take them.
    attn, x0, *weights = autocast_bf16(("attn", "x0", *_WEIGHT_NAMES.split(", "), "q_norm", "k_norm"), (attn, x0, *weights))
    q_norm, k_norm = weights[6:] if config.qk_norm else (None, None)
    x2, qkv, *_ = torch.ops.coda_rs.block_forward(attn, x0, pos, *weights[:6], freq, q_norm, k_norm, *config._native())
    return x2, qkv


class Block(torch.nn.Module):
    """The block's weights as parameters (bf16, the kernels' layout) and
    its RoPE frequencies as a buffer; ``forward(attn, x0, pos)`` →
    ``(x2, qkv)``. ``from_checkpoint`` takes a Llama checkpoint's layout."""

    def __init__(self, config, device=None):
        super().__init__()
        c = config
        self.config = c
        aw, qw = c.heads * c.head_dim, (c.heads + 2 * c.kv_heads) * c.head_dim
        p = lambda *shape: torch.nn.Parameter(torch.empty(shape, dtype=_BF16, device=device))  # noqa: E731
        self.wo, self.gamma1, self.w_gate_up = p(c.hidden, aw), p(c.hidden), p(2 * c.ffn, c.hidden)
        self.w_down, self.gamma2, self.w_qkv = p(c.hidden, c.ffn), p(c.hidden), p(qw, c.hidden)
        if c.qk_norm:
            self.q_norm, self.k_norm = p(c.head_dim), p(c.head_dim)
        self.register_buffer("freq", rope_freq(c, device or "cpu"), persistent=False)
        self.reset_parameters()

    def reset_parameters(self, std=0.02):
        """Matrices from N(0, std²), norm weights 1."""
        with torch.no_grad():
            for w in (self.wo, self.w_gate_up, self.w_down, self.w_qkv):
                w.normal_(0.0, std)
            for g in self.weights()[6:] + (self.gamma1, self.gamma2):
                g.fill_(1.0)

    @classmethod
    def from_checkpoint(cls, config, *, wo, gamma1, gate, up, down, gamma2, wq, wk, wv, q_norm=None, k_norm=None):
        """A block from standard Llama weights (``Linear`` layouts; q and k
        with the rotate-half RoPE convention), on their device. A block runs
        from one attention's output to the next attention's input, so it
        spans two layers: ``wo`` (o_proj), ``gamma1``
        (post_attention_layernorm) and ``gate``, ``up``, ``down`` (the MLP)
        are layer i's; ``gamma2`` (input_layernorm), ``wq``, ``wk``, ``wv``
        and QK-norm's ``q_norm``, ``k_norm`` (given exactly when
        ``config.qk_norm``) are layer i + 1's. A weight of another shape is an
        ``ArgumentError`` naming it."""
        from .llama import gate_up_from_checkpoint, head_vector_from_checkpoint, qkv_from_checkpoint

        for name, v in (("q_norm", q_norm), ("k_norm", k_norm)):
            if config.qk_norm != (v is not None):
                raise argument_error(name, "is given exactly when config.qk_norm is set")

        b = cls(config, device=wo.device)
        made = {
            "wo": wo,
            "gamma1": gamma1,
            "w_gate_up": gate_up_from_checkpoint(gate, up),
            "w_down": down,
            "gamma2": gamma2,
            "w_qkv": qkv_from_checkpoint(wq, wk, wv, config.heads, config.kv_heads),
        }
        if config.qk_norm:
            made.update(q_norm=head_vector_from_checkpoint(q_norm), k_norm=head_vector_from_checkpoint(k_norm))
        # The checkpoint's names for the two the converters made.
        given = {"w_gate_up": "gate", "w_down": "down", "w_qkv": "wq"}
        with torch.no_grad():
            for name, w in made.items():
                p = getattr(b, name)
                if tuple(w.shape) != tuple(p.shape):
                    raise argument_error(given.get(name, name), f"gives {name} of shape {tuple(w.shape)}, the config's is {tuple(p.shape)}")
                p.copy_(w)
        return b

    def _apply(self, fn, *args, **kwargs):
        # ``.bfloat16()``, ``.half()`` or ``.to(dtype)`` cast floating buffers;
        # the RoPE frequencies stay the f32 the kernels take (remade, not cast back).
        super()._apply(fn, *args, **kwargs)
        _keep_f32_freq(self, self.config)
        return self

    def weights(self):
        qk = (self.q_norm, self.k_norm) if self.config.qk_norm else ()
        return (self.wo, self.gamma1, self.w_gate_up, self.w_down, self.gamma2, self.w_qkv) + qk

    def forward(self, attn, x0, pos):
        return block(attn, x0, pos, self.weights(), self.config, self.freq)
