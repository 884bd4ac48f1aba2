"""Checkpoint weights to the Llama kernels' layouts and back, on torch
tensors or numpy arrays (bf16, f16 or f32; any device: the rows are
reordered on the CPU by ``coda_llama::layout`` and the result returned on
the input's device and dtype).

The kernels want the gate/up rows interleaved (``[g0, u0, g1, u1, …]``) and
each head's RoPE pairs adjacent (checkpoints pair ``(i, i + head_dim/2)``,
the rotate_half convention); q and k rows are permuted the same way inside
each head, so attention scores are unchanged, and v is left as it is.
"""

from . import _coda

__all__ = ["gate_up_from_checkpoint", "gate_up_to_checkpoint", "qkv_from_checkpoint", "qkv_to_checkpoint"]


def _raw(t):
    """(bytes, itemsize, rows, cols, rebuild) of a rank-2 tensor or array."""
    if hasattr(t, "detach"):  # torch
        import torch

        c = t.detach().contiguous().cpu()
        if c.dim() != 2:
            raise ValueError(f"expected a rank-2 weight, got shape {tuple(c.shape)}")
        bits = {2: torch.int16, 4: torch.int32}[c.element_size()]
        data = c.view(bits).numpy().tobytes()

        def rebuild(b, rows, cols):
            import numpy as np

            arr = np.frombuffer(b, dtype={2: np.int16, 4: np.int32}[c.element_size()]).reshape(rows, cols)
            return torch.from_numpy(arr.copy()).view(t.dtype).to(t.device)

        return data, c.element_size(), c.shape[0], c.shape[1], rebuild
    import numpy as np

    a = np.ascontiguousarray(t)
    if a.ndim != 2:
        raise ValueError(f"expected a rank-2 weight, got shape {a.shape}")

    def rebuild(b, rows, cols):
        return np.frombuffer(b, dtype=a.dtype).reshape(rows, cols).copy()

    return a.tobytes(), a.dtype.itemsize, a.shape[0], a.shape[1], rebuild


def gate_up_from_checkpoint(gate, up):
    """``w_gate_up`` ``[2f, d]`` (rows interleaved) from ``gate`` and ``up`` ``[f, d]``."""
    (g, size, f, d, rebuild), (u, *_) = _raw(gate), _raw(up)
    return rebuild(_coda.interleave_gate_up(g, u, f, d, size), 2 * f, d)


def gate_up_to_checkpoint(w_gate_up):
    """``(gate, up)`` from ``w_gate_up``."""
    w, size, rows, d, rebuild = _raw(w_gate_up)
    g, u = _coda.split_gate_up(w, rows // 2, d, size)
    return rebuild(g, rows // 2, d), rebuild(u, rows // 2, d)


def qkv_from_checkpoint(wq, wk, wv, heads, kv_heads):
    """``w_qkv`` ``[(heads + 2·kv_heads)·head_dim, d]`` from ``wq``, ``wk``, ``wv``."""
    (q, size, rows, d, rebuild), (k, *_), (v, *_) = _raw(wq), _raw(wk), _raw(wv)
    head_dim = rows // heads
    out = _coda.qkv_from_checkpoint(q, k, v, heads, kv_heads, head_dim, d, size)
    return rebuild(out, (heads + 2 * kv_heads) * head_dim, d)


def qkv_to_checkpoint(w_qkv, heads, kv_heads):
    """``(wq, wk, wv)`` from ``w_qkv``."""
    w, size, rows, d, rebuild = _raw(w_qkv)
    head_dim = rows // (heads + 2 * kv_heads)
    q, k, v = _coda.qkv_to_checkpoint(w, heads, kv_heads, head_dim, d, size)
    return rebuild(q, heads * head_dim, d), rebuild(k, kv_heads * head_dim, d), rebuild(v, kv_heads * head_dim, d)
