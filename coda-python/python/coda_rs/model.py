"""A Llama decoder trained through CODA, and the same model in plain PyTorch.

``PlainLlama`` is the reference: a standard Llama (RMSNorm, GQA attention
with rotate-half RoPE, SwiGLU MLP, untied LM head, mean cross-entropy) with
Hugging Face parameter names, every op a PyTorch one. ``CodaLlama`` computes
the same function with the non-attention work through CODA: layer 0's input
norm and q/k/v in PyTorch, then for each layer boundary a CODA block
(``coda_rs.block``: layer i's o_proj, residual, norm, MLP, residual, then
layer i + 1's norm, q/k/v and RoPE), layer L − 1's o_proj and MLP in
PyTorch, and the tail through ``coda_rs.head.head_loss`` (no ``M × V``
logits). Each model's tail is its attribute ``tail`` (``plain_tail`` or
``head_loss``), so either takes the other's for comparisons. Attention is
``F.scaled_dot_product_attention`` in both.
``CodaLlama.from_state_dict`` takes a ``PlainLlama`` (or Hugging Face)
state dict; ``hf_state_dict`` gives it back.

Both run in bf16 (weights, activations); norms, softmax statistics and
RoPE angles in f32.

Needs PyTorch.
"""

import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ._errors import argument_error
from .block import Block, BlockConfig, _keep_f32_freq, rope_freq
from .head import head_loss
from .llama import coda_state_dict, hf_state_dict

__all__ = ["CodaLlama", "LlamaConfig", "PlainLlama", "plain_tail"]

_BF16 = torch.bfloat16


@dataclass(frozen=True)
class LlamaConfig:
    """A decoder's shapes: ``layers`` layers of a block with ``hidden``,
    ``ffn``, ``heads`` and ``kv_heads`` of ``head_dim``; ``vocab`` tokens
    (a multiple of 8, as the LM-head tail needs)."""

    vocab: int
    hidden: int
    ffn: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float = 1e-5
    rope_theta: float = 10000.0

    def __post_init__(self):
        self.block()  # checks the block's rules, naming the field
        for name, rule, ok in (("layers", "must be at least 1", self.layers >= 1), ("vocab", "must be a positive multiple of 8", self.vocab > 0 and self.vocab % 8 == 0)):
            if not ok:
                raise argument_error(name, f"{getattr(self, name)} {rule}")

    def block(self):
        return BlockConfig(self.hidden, self.ffn, self.heads, self.kv_heads, self.head_dim, self.eps, self.rope_theta)


def rms_norm(x, gamma, eps):
    """``x · rsqrt(mean(x²) + eps) · γ``, the statistic in f32, as Llama's."""
    xf = x.to(torch.promote_types(x.dtype, torch.float32))
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * gamma


def split_qkv(qkv, c):
    """q, k and v of ``qkv`` ``[M, (heads + 2·kv_heads)·head_dim]`` (views)."""
    hd = c.head_dim
    return qkv.split([c.heads * hd, c.kv_heads * hd, c.kv_heads * hd], dim=1)


def attention(q, k, v, batch, c, rope=None):
    """Causal GQA attention of ``q`` ``[M, heads·head_dim]``, ``k`` and ``v``
    ``[M, kv_heads·head_dim]`` (M = batch · sequence) → ``[M, heads·head_dim]``;
    ``rope(t)`` rotates q and k ``[batch, seq, heads, head_dim]`` first if given."""
    m, hd = q.shape[0], c.head_dim
    q, k, v = (t.reshape(batch, m // batch, -1, hd) for t in (q, k, v))
    if rope is not None:
        q, k = rope(q), rope(k)
    group = c.heads // c.kv_heads
    # The kv heads repeated for their q heads: every SDPA backend takes that.
    k, v = (t.repeat_interleave(group, dim=2) for t in (k, v))
    o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
    return o.transpose(1, 2).reshape(m, c.heads * hd)


def plain_tail(x, targets, gamma, w, eps):
    """The LM-head tail in PyTorch ops (``PlainLlama``'s ``tail``): final
    RMSNorm, LM head, the logits in f32 (or wider), mean cross-entropy over
    ``targets`` (-100 ignored). ``CodaLlama``'s is ``coda_rs.head.head_loss``; either
    model takes the other's (``model.tail = …``) for comparisons."""
    logits = F.linear(rms_norm(x, gamma, eps), w)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    return F.cross_entropy(logits, targets, ignore_index=-100)


def positions(batch, seq, device):
    """Each token's position in its sequence, ``[batch·seq]`` f32."""
    return torch.arange(seq, device=device, dtype=torch.float32).repeat(batch)


class _Norm(torch.nn.Module):
    def __init__(self, d, device):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d, dtype=_BF16, device=device))


def _linear(n_in, n_out, device):
    return torch.nn.Linear(n_in, n_out, bias=False, device=device, dtype=_BF16)


class _PlainLayer(torch.nn.Module):
    def __init__(self, c, device):
        super().__init__()
        self.config = c
        d, aw, kw = c.hidden, c.heads * c.head_dim, c.kv_heads * c.head_dim
        self.input_layernorm, self.post_attention_layernorm = _Norm(d, device), _Norm(d, device)
        self.self_attn = torch.nn.Module()
        a = self.self_attn
        a.q_proj, a.k_proj, a.v_proj, a.o_proj = _linear(d, aw, device), _linear(d, kw, device), _linear(d, kw, device), _linear(aw, d, device)
        self.mlp = torch.nn.Module()
        self.mlp.gate_proj, self.mlp.up_proj, self.mlp.down_proj = _linear(d, c.ffn, device), _linear(d, c.ffn, device), _linear(c.ffn, d, device)

    def forward(self, x, batch, rope):
        """The layer on the residual stream ``x`` ``[M, d]`` of ``batch`` sequences."""
        c, a, m = self.config, self.self_attn, self.mlp
        n = rms_norm(x, self.input_layernorm.weight, c.eps)
        x = x + a.o_proj(attention(a.q_proj(n), a.k_proj(n), a.v_proj(n), batch, c, rope))
        n = rms_norm(x, self.post_attention_layernorm.weight, c.eps)
        return x + m.down_proj(F.silu(m.gate_proj(n)) * m.up_proj(n))


class PlainLlama(torch.nn.Module):
    """The reference decoder in plain PyTorch, Hugging Face parameter names,
    weights from N(0, 0.02²) (o_proj and down_proj scaled by 1/√(2L)), norms 1.
    ``forward(tokens, targets)`` → the mean cross-entropy (targets of -100
    ignored) through ``tail`` (``plain_tail``)."""

    def __init__(self, config, device=None):
        super().__init__()
        c = self.config = config
        self.model = torch.nn.Module()
        self.model.embed_tokens = torch.nn.Embedding(c.vocab, c.hidden, device=device, dtype=_BF16)
        self.model.layers = torch.nn.ModuleList(_PlainLayer(c, device) for _ in range(c.layers))
        self.model.norm = _Norm(c.hidden, device)
        self.lm_head = _linear(c.hidden, c.vocab, device)
        hd = c.head_dim
        inv = c.rope_theta ** (-torch.arange(0, hd, 2, dtype=torch.float64, device=device) / hd)
        self.register_buffer("inv_freq", inv.float(), persistent=False)  # as the blocks' rope_freq
        self.tail = plain_tail
        self.reset_parameters()

    def reset_parameters(self, std=0.02):
        with torch.no_grad():
            for name, p in self.named_parameters():
                if p.dim() == 1:
                    p.fill_(1.0)
                else:
                    scaled = name.endswith("o_proj.weight") or name.endswith("down_proj.weight")
                    p.normal_(0.0, std / math.sqrt(2 * self.config.layers) if scaled else std)

    def _rope(self, pos):
        angle = pos[:, None] * self.inv_freq[None, :]
        dtype = self.lm_head.weight.dtype  # bf16, or f64 for a reference
        cos, sin = (torch.cat((t, t), dim=-1).to(dtype) for t in (angle.cos(), angle.sin()))

        def rotate(t):  # [batch, seq, heads, hd], rotate-half pairs (i, i + hd/2)
            b, s = t.shape[:2]
            cs, sn = cos.view(b, s, 1, -1), sin.view(b, s, 1, -1)
            h1, h2 = t.chunk(2, dim=-1)
            return t * cs + torch.cat((-h2, h1), dim=-1) * sn

        return rotate

    def forward(self, tokens, targets):
        c, (b, s) = self.config, tokens.shape
        x = self.model.embed_tokens(tokens).view(b * s, c.hidden)
        rope = self._rope(positions(b, s, tokens.device))
        for layer in self.model.layers:
            x = layer(x, b, rope)
        return self.tail(x, targets.reshape(-1), self.model.norm.weight, self.lm_head.weight, c.eps)


def _param(*shape, device):
    return torch.nn.Parameter(torch.empty(shape, dtype=_BF16, device=device))


class CodaLlama(torch.nn.Module):
    """The decoder with its non-attention work through CODA (see the module
    docs); build it with ``from_state_dict`` (made directly, only its blocks
    are initialised; the rest is ``torch.empty`` until loaded). ``forward(tokens, targets)`` →
    the mean cross-entropy through ``tail`` (``head_loss``, ``chunk_rows``
    rows of logits at a time)."""

    def __init__(self, config, device=None, chunk_rows=4096):
        super().__init__()
        c = self.config = config
        d, f, aw, qw = c.hidden, c.ffn, c.heads * c.head_dim, (c.heads + 2 * c.kv_heads) * c.head_dim
        self.tail = functools.partial(head_loss, chunk_rows=chunk_rows)
        self.embed = torch.nn.Embedding(c.vocab, d, device=device, dtype=_BF16)
        self.qkv0 = torch.nn.Module()
        self.qkv0.gamma, self.qkv0.w_qkv = _param(d, device=device), _param(qw, d, device=device)
        self.blocks = torch.nn.ModuleList(Block(c.block(), device=device) for _ in range(c.layers - 1))
        self.last = torch.nn.Module()
        self.last.wo, self.last.gamma1 = _param(d, aw, device=device), _param(d, device=device)
        self.last.w_gate_up, self.last.w_down = _param(2 * f, d, device=device), _param(d, f, device=device)
        self.head = torch.nn.Module()
        self.head.gamma, self.head.w = _param(d, device=device), _param(c.vocab, d, device=device)
        self.register_buffer("freq", rope_freq(c.block(), device or "cpu"), persistent=False)

    def _apply(self, fn, *args, **kwargs):
        # As `Block`'s: the RoPE frequencies stay f32 when the module is cast.
        super()._apply(fn, *args, **kwargs)
        _keep_f32_freq(self, self.config.block())
        return self

    @classmethod
    def from_state_dict(cls, config, state_dict, device=None, chunk_rows=4096):
        """The model with a standard Llama state dict's weights (see
        ``coda_rs.llama.coda_state_dict``), on ``device``."""
        c = config
        m = cls(c, device=device, chunk_rows=chunk_rows)
        m.load_state_dict(coda_state_dict(state_dict, c.layers, c.heads, c.kv_heads))
        return m

    def hf_state_dict(self, tensors=None):
        """The weights, or ``tensors`` (a dict under this model's parameter
        names, such as their gradients), under standard Llama (Hugging Face)
        names and layouts."""
        c = self.config
        return hf_state_dict(self.state_dict() if tensors is None else tensors, c.layers, c.heads, c.kv_heads)

    def _qkv0(self, x, pos):
        """Layer 0's input norm, q/k/v and RoPE on adjacent pairs (the blocks' layout)."""
        qkv = rms_norm(x, self.qkv0.gamma, self.config.eps) @ self.qkv0.w_qkv.T
        angle = pos[:, None] * self.freq[None, 0::2]
        cos, sin, qf = angle.cos(), angle.sin(), qkv.float()
        a, b = qf[:, 0::2], qf[:, 1::2]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(1).to(_BF16)

    def _last(self, attn, x):
        """Layer L − 1's o_proj and MLP (gate and up rows interleaved)."""
        c, w = self.config, self.last
        x = x + attn @ w.wo.T
        z = rms_norm(x, w.gamma1, c.eps) @ w.w_gate_up.T
        return x + (F.silu(z[:, 0::2]) * z[:, 1::2]) @ w.w_down.T

    def forward(self, tokens, targets):
        c, (b, s) = self.config, tokens.shape
        x = self.embed(tokens).view(b * s, c.hidden)
        pos = positions(b, s, tokens.device)
        qkv = self._qkv0(x, pos)
        for blk in self.blocks:
            x, qkv = blk(attention(*split_qkv(qkv, c), b, c), x, pos)
        x = self._last(attention(*split_qkv(qkv, c), b, c), x)
        return self.tail(x, targets.reshape(-1), self.head.gamma, self.head.w, c.eps)
