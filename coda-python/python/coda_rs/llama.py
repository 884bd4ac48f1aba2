"""Checkpoint weights to the Llama kernels' layouts and back, on torch
tensors or numpy arrays (bf16, f16 or f32; any device: the rows are
reordered on the CPU by ``coda_llama::layout`` and the result returned on
the input's device and dtype).

The kernels want the gate/up rows interleaved (``[g0, u0, g1, u1, …]``) and
each head's RoPE pairs adjacent (checkpoints pair ``(i, i + head_dim/2)``,
the rotate_half convention); q and k rows are permuted the same way inside
each head, so attention scores are unchanged, and v is left as it is.

``coda_state_dict`` and ``hf_state_dict`` map a whole model: a CODA block
spans two layers (layer i's o_proj and MLP, then layer i + 1's input norm
and q/k/v), so an L-layer model is layer 0's norm and q/k/v (``qkv0``),
L − 1 blocks, layer L − 1's o_proj and MLP (``last``) and the tail
(``head``); ``coda_rs.model.CodaLlama`` holds weights under these names.
"""

import operator

from . import _coda
from ._errors import argument_error

__all__ = [
    "coda_state_dict",
    "gate_up_from_checkpoint",
    "gate_up_to_checkpoint",
    "head_vector_from_checkpoint",
    "head_vector_to_checkpoint",
    "hf_state_dict",
    "qkv_from_checkpoint",
    "qkv_to_checkpoint",
]


def _raw(t, name):
    """(bytes, itemsize, rows, cols, rebuild, dtype) of a rank-2 tensor or
    array; another rank or an element that is not bf16, f16 or f32 (for
    numpy: 2 or 4 bytes, whose bits are taken as they are) is an
    ``ArgumentError`` naming ``name``."""
    if hasattr(t, "detach"):  # torch
        import torch

        if t.dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise argument_error(name, f"has dtype {t.dtype}; the converters take bf16, f16 or f32")
        if t.dim() != 2:
            raise argument_error(name, f"shape {tuple(t.shape)} must be rank 2")
        c = t.detach().contiguous().cpu()
        bits = {2: torch.int16, 4: torch.int32}[c.element_size()]
        data = c.view(bits).numpy().tobytes()

        def rebuild(b, rows, cols):
            import numpy as np

            arr = np.frombuffer(b, dtype={2: np.int16, 4: np.int32}[c.element_size()]).reshape(rows, cols)
            return torch.from_numpy(arr.copy()).view(t.dtype).to(t.device)

        return data, c.element_size(), c.shape[0], c.shape[1], rebuild, t.dtype
    import numpy as np

    a = np.ascontiguousarray(t)
    if a.dtype.itemsize not in (2, 4):
        raise argument_error(name, f"has dtype {a.dtype}; the converters take 2- or 4-byte elements (bf16, f16, f32)")
    if a.ndim != 2:
        raise argument_error(name, f"shape {a.shape} must be rank 2")

    def rebuild(b, rows, cols):
        return np.frombuffer(b, dtype=a.dtype).reshape(rows, cols).copy()

    return a.tobytes(), a.dtype.itemsize, a.shape[0], a.shape[1], rebuild, a.dtype


def _like(name, raw, first, first_name, shape):
    """Refuses ``raw`` (of argument ``name``) unless it has ``first``'s dtype and ``shape``."""
    if raw[5] != first[5]:
        raise argument_error(name, f"has dtype {raw[5]}, `{first_name}` {first[5]}: one dtype for all")
    if (raw[2], raw[3]) != shape:
        raise argument_error(name, f"shape {(raw[2], raw[3])} must be {shape}")


def _heads(heads, kv_heads):
    """``(heads, kv_heads)`` as ints, refusing counts the layouts cannot split by."""
    counts = []
    for name, n in (("heads", heads), ("kv_heads", kv_heads)):
        try:
            n = operator.index(n)
        except TypeError:
            raise argument_error(name, f"{n!r} must be a whole number ≥ 1") from None
        if n < 1:
            raise argument_error(name, f"{n} must be a whole number ≥ 1")
        counts.append(n)
    if counts[0] % counts[1]:
        raise argument_error("kv_heads", f"{counts[1]} must divide heads = {counts[0]}")
    return counts


def _rows_of(name, rows, parts, what):
    """``rows / parts``, refusing a remainder by ``name``."""
    if rows % parts:
        raise argument_error(name, f"{rows} rows must be a multiple of {parts} ({what})")
    return rows // parts


def gate_up_from_checkpoint(gate, up):
    """``w_gate_up`` ``[2f, d]`` (rows interleaved) from ``gate`` and ``up`` ``[f, d]``."""
    g, u = _raw(gate, "gate"), _raw(up, "up")
    _like("up", u, g, "gate", (g[2], g[3]))
    (gb, size, f, d, rebuild, _), ub = g, u[0]
    return rebuild(_coda.interleave_gate_up(gb, ub, f, d, size), 2 * f, d)


def gate_up_to_checkpoint(w_gate_up):
    """``(gate, up)`` from ``w_gate_up``."""
    w, size, rows, d, rebuild, _ = _raw(w_gate_up, "w_gate_up")
    f = _rows_of("w_gate_up", rows, 2, "gate and up rows, interleaved")
    g, u = _coda.split_gate_up(w, f, d, size)
    return rebuild(g, f, d), rebuild(u, f, d)


def qkv_from_checkpoint(wq, wk, wv, heads, kv_heads):
    """``w_qkv`` ``[(heads + 2·kv_heads)·head_dim, d]`` from ``wq``, ``wk``, ``wv``."""
    heads, kv_heads = _heads(heads, kv_heads)
    q, k, v = _raw(wq, "wq"), _raw(wk, "wk"), _raw(wv, "wv")
    (qb, size, rows, d, rebuild, _) = q
    head_dim = _rows_of("wq", rows, heads, "heads")
    for name, r in (("wk", k), ("wv", v)):
        _like(name, r, q, "wq", (kv_heads * head_dim, d))
    out = _coda.qkv_from_checkpoint(qb, k[0], v[0], heads, kv_heads, head_dim, d, size)
    return rebuild(out, (heads + 2 * kv_heads) * head_dim, d)


def qkv_to_checkpoint(w_qkv, heads, kv_heads):
    """``(wq, wk, wv)`` from ``w_qkv``."""
    heads, kv_heads = _heads(heads, kv_heads)
    w, size, rows, d, rebuild, _ = _raw(w_qkv, "w_qkv")
    head_dim = _rows_of("w_qkv", rows, heads + 2 * kv_heads, "heads + 2·kv_heads")
    q, k, v = _coda.qkv_to_checkpoint(w, heads, kv_heads, head_dim, d, size)
    return rebuild(q, heads * head_dim, d), rebuild(k, kv_heads * head_dim, d), rebuild(v, kv_heads * head_dim, d)


def head_vector_from_checkpoint(v):
    """A per-head vector ``[head_dim]`` (QK-norm's ``q_norm.weight``) in the
    kernels' RoPE pair order, from the rotate-half order."""
    return _head_vector(v, True)


def head_vector_to_checkpoint(v):
    """The inverse of ``head_vector_from_checkpoint``."""
    return _head_vector(v, False)


def _head_vector(v, to_adjacent):
    if len(v.shape) != 1:
        raise argument_error("v", f"shape {tuple(v.shape)} must be a vector [head_dim]")
    w, size, rows, _, rebuild, _ = _raw(v.reshape(-1, 1), "v")
    return rebuild(_coda.rope_pairs(w, 1, rows, 1, to_adjacent, size), rows, 1).reshape(-1)


def _layer(i):
    return f"model.layers.{i}."


def _take(sd, name, argument):
    """``sd[name]``, or an ``ArgumentError`` naming ``argument`` and the weight."""
    if name not in sd:
        raise argument_error(argument, f"has no `{name}`")
    return sd[name]


def _check_all_used(sd, used, argument):
    unused = sorted(set(sd) - used)
    if unused:
        raise argument_error(argument, f"weights the model does not have: {', '.join(unused[:4])}" + (" …" if len(unused) > 4 else ""))


def coda_state_dict(state_dict, layers, heads, kv_heads):
    """A ``CodaLlama`` state dict from a standard (Hugging Face named) Llama
    state dict of ``layers`` layers: ``model.embed_tokens.weight``,
    ``model.layers.{i}.{input_layernorm,post_attention_layernorm}.weight``,
    ``model.layers.{i}.self_attn.{q,k,v,o}_proj.weight``,
    ``model.layers.{i}.mlp.{gate,up,down}_proj.weight``, ``model.norm.weight``,
    ``lm_head.weight`` (``rotary_emb.inv_freq`` buffers are ignored). A missing
    or extra weight raises ``ArgumentError`` naming ``state_dict``."""
    if layers < 1:
        raise argument_error("layers", f"{layers} must be at least 1")
    sd = {k: v for k, v in state_dict.items() if not k.endswith("rotary_emb.inv_freq")}
    used = set()

    def get(name):
        used.add(name)
        return _take(sd, name, "state_dict")

    def qkv(i):
        a = _layer(i) + "self_attn."
        return qkv_from_checkpoint(get(a + "q_proj.weight"), get(a + "k_proj.weight"), get(a + "v_proj.weight"), heads, kv_heads)

    def mlp(i, prefix):
        m = _layer(i) + "mlp."
        return {
            prefix + "wo": get(_layer(i) + "self_attn.o_proj.weight"),
            prefix + "gamma1": get(_layer(i) + "post_attention_layernorm.weight"),
            prefix + "w_gate_up": gate_up_from_checkpoint(get(m + "gate_proj.weight"), get(m + "up_proj.weight")),
            prefix + "w_down": get(m + "down_proj.weight"),
        }

    out = {"embed.weight": get("model.embed_tokens.weight"), "qkv0.gamma": get(_layer(0) + "input_layernorm.weight"), "qkv0.w_qkv": qkv(0)}
    for i in range(layers - 1):
        out.update(mlp(i, f"blocks.{i}."))
        out[f"blocks.{i}.gamma2"] = get(_layer(i + 1) + "input_layernorm.weight")
        out[f"blocks.{i}.w_qkv"] = qkv(i + 1)
    out.update(mlp(layers - 1, "last."))
    out["head.gamma"] = get("model.norm.weight")
    out["head.w"] = get("lm_head.weight")
    _check_all_used(sd, used, "state_dict")
    return out


def hf_state_dict(state_dict, layers, heads, kv_heads):
    """The standard Llama state dict (``coda_state_dict``'s input) from a
    ``CodaLlama`` one; ``hf_state_dict(coda_state_dict(sd, …), …)`` is ``sd``
    bit for bit."""
    if layers < 1:
        raise argument_error("layers", f"{layers} must be at least 1")
    sd = dict(state_dict)
    used = set()

    def get(name):
        used.add(name)
        return _take(sd, name, "state_dict")

    def qkv(i, w):
        a = _layer(i) + "self_attn."
        q, k, v = qkv_to_checkpoint(w, heads, kv_heads)
        return {a + "q_proj.weight": q, a + "k_proj.weight": k, a + "v_proj.weight": v}

    def mlp(i, prefix):
        m = _layer(i) + "mlp."
        gate, up = gate_up_to_checkpoint(get(prefix + "w_gate_up"))
        return {
            _layer(i) + "self_attn.o_proj.weight": get(prefix + "wo"),
            _layer(i) + "post_attention_layernorm.weight": get(prefix + "gamma1"),
            m + "gate_proj.weight": gate,
            m + "up_proj.weight": up,
            m + "down_proj.weight": get(prefix + "w_down"),
        }

    out = {"model.embed_tokens.weight": get("embed.weight"), _layer(0) + "input_layernorm.weight": get("qkv0.gamma")}
    out.update(qkv(0, get("qkv0.w_qkv")))
    for i in range(layers - 1):
        out.update(mlp(i, f"blocks.{i}."))
        out[_layer(i + 1) + "input_layernorm.weight"] = get(f"blocks.{i}.gamma2")
        out.update(qkv(i + 1, get(f"blocks.{i}.w_qkv")))
    out.update(mlp(layers - 1, "last."))
    out["model.norm.weight"] = get("head.gamma")
    out["lm_head.weight"] = get("head.w")
    _check_all_used(sd, used, "state_dict")
    return out
