#!/usr/bin/env python3
"""PyTorch baselines for `coda bench`: the same ops and blocks, in eager mode
and under torch.compile, timed by the same rules (CUDA events, >= 1 s warm-up,
eager and compiled samples interleaved, median of >= 50 samples, inputs
rotated across two sets larger than the L2 together). Standard layouts and
standard formulations (RMSNorm before the GEMM, rotate_half RoPE, chunked
gate/up); the names and shapes match `coda bench`'s rows.

usage: torch_baselines.py [--quick] [--json PATH]
"""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F

EPS = 1e-5
DEV = "cuda"
BF = torch.bfloat16


def rand(*shape, scale=1.0, dtype=BF):
    return ((torch.rand(*shape, device=DEV) * 2 - 1) * scale).to(dtype)


def time_interleaved(fns, samples, reps, warmup_s=1.0):
    """Median ms per call of each fn(i) (i rotates the input set)."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    idx = 0

    def sample(fn):
        nonlocal idx
        start.record()
        for _ in range(reps):
            fn(idx)
            idx += 1
        stop.record()
        stop.synchronize()
        return start.elapsed_time(stop) / reps

    for fn in fns:  # compile (torch.compile) and first-call costs stay out of the warm-up clock
        fn(0)
        fn(1)
    torch.cuda.synchronize()
    t0 = time.time()
    while time.time() - t0 < warmup_s:
        for fn in fns:
            sample(fn)
    times = [[] for _ in fns]
    for _ in range(samples):
        for fn, t in zip(fns, times):
            t.append(sample(fn))
    return [statistics.median(t) for t in times]


def reps_for(flops):
    return max(1, min(10, int(-(-2e12 // flops))))


def rope_tables(m, head_dim=128, theta=10000.0):
    pos = (torch.arange(m, device=DEV) % 4096).float()
    inv = theta ** (-torch.arange(0, head_dim, 2, device=DEV).float() / head_dim)
    ang = torch.outer(pos, inv)
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().to(BF)[:, None, :], emb.sin().to(BF)[:, None, :]


def rotate_half(x):
    a, b = x.chunk(2, dim=-1)
    return torch.cat([-b, a], dim=-1)


def apply_rope(x, cos, sin, heads, head_dim=128):
    x = x.view(x.shape[0], heads, head_dim)
    return (x * cos + rotate_half(x) * sin).view(x.shape[0], heads * head_dim)


# --- ops ----------------------------------------------------------------------

def gemm_swiglu(x, w):
    g, u = (x @ w.t()).chunk(2, dim=-1)
    return F.silu(g) * u


def gemm_residual_rms(x, w, res, gamma):
    h = x @ w.t() + res
    return h, F.rms_norm(h, (h.shape[-1],), gamma, EPS)


def norm_gemm_swiglu(h, gamma, w):
    g, u = (F.rms_norm(h, (h.shape[-1],), gamma, EPS) @ w.t()).chunk(2, dim=-1)
    return F.silu(g) * u


def norm_gemm_rope(h, gamma, w, cos, sin, heads):
    q, k, v = (F.rms_norm(h, (h.shape[-1],), gamma, EPS) @ w.t()).chunk(3, dim=-1)
    return torch.cat([apply_rope(q, cos, sin, heads), apply_rope(k, cos, sin, heads), v], dim=-1)


def lm_head_ce(x, gamma, w, target):
    logits = F.rms_norm(x, (x.shape[-1],), gamma, EPS) @ w.t()
    return F.cross_entropy(logits.float(), target, ignore_index=-100)


def block(attn, x0, wo, g1, wgu, wd, g2, wqkv, cos, sin, heads, kv_heads):
    x1 = attn @ wo.t() + x0
    g, u = (F.rms_norm(x1, (x1.shape[-1],), g1, EPS) @ wgu.t()).chunk(2, dim=-1)
    x2 = (F.silu(g) * u) @ wd.t() + x1
    qkv = F.rms_norm(x2, (x2.shape[-1],), g2, EPS) @ wqkv.t()
    q, k, v = qkv.split([heads * 128, kv_heads * 128, kv_heads * 128], dim=-1)
    return x2, torch.cat([apply_rope(q, cos, sin, heads), apply_rope(k, cos, sin, kv_heads), v], dim=-1)


def measure(name, shape, gemms, fn, make_inputs, flops, samples, backward=None):
    """Eager vs torch.compile of fn on two input sets; backward: grads wrt
    the tensors with requires_grad, given output gradients `backward(out)`."""
    sets = [make_inputs() for _ in range(2)]
    compiled = torch.compile(fn)

    def runner(f):
        def call(i):
            args = sets[i % 2]
            out = f(*args)
            if backward is not None:
                outs, grads = backward(out)
                torch.autograd.grad(outs, [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad], grads)
        return call

    t = time_interleaved([runner(fn), runner(compiled)], samples, reps_for(flops))
    row = {"name": name, "shape": shape, "gemms": gemms, "eager_ms": t[0], "compile_ms": t[1]}
    print(f"{name:<26} {shape:<22} eager {t[0]:9.4f}  compile {t[1]:9.4f}", file=sys.stderr, flush=True)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    sizes, blocks, samples = ([4096], [(2048, 8192)], 10) if a.quick else ([4096, 8192], [(2048, 8192), (4096, 11008), (8192, 28672)], 50)
    tokens, vocab = 16384, 32768
    torch.manual_seed(0)
    rows = []
    for n in sizes:
        s = (3.0 / n) ** 0.5
        shape2 = f"M={n} N={2 * n} K={n}"
        rows.append(measure("gemm_swiglu", shape2, "1", gemm_swiglu, lambda: (rand(n, n), rand(2 * n, n, scale=s)), 2 * n * 2 * n * n, samples))
        rows.append(measure("gemm_residual_rms_partial", f"M={n} N={n} K={n}", "1", gemm_residual_rms,
                            lambda: (rand(n, n), rand(n, n, scale=s), rand(n, n), rand(n) + 1), 2 * n ** 3, samples))
        rows.append(measure("gemm_rowscale_swiglu", shape2, "1", norm_gemm_swiglu, lambda: (rand(n, n), rand(n) + 1, rand(2 * n, n, scale=s)),
                            2 * n * 2 * n * n, samples))
        cos, sin = rope_tables(n)
        rows.append(measure("gemm_rowscale_rope", f"M={n} N={3 * n} K={n}", "1",
                            lambda h, g, w: norm_gemm_rope(h, g, w, cos, sin, n // 128),
                            lambda: (rand(n, n), rand(n) + 1, rand(3 * n, n, scale=s)), 2 * n * 3 * n * n, samples))
        tgt = torch.randint(0, vocab, (n,), device=DEV)
        head_inputs = lambda grad: (rand(n, n).requires_grad_(grad), (rand(n) + 1).requires_grad_(grad),
                                    rand(vocab, n, scale=s).requires_grad_(grad), tgt)
        shape = f"M={n} d={n} V={vocab}"
        rows.append(measure("lm_head_ce fwd", shape, "1 (logits)", lm_head_ce, lambda: head_inputs(False), 2 * n * vocab * n, samples))
        rows.append(measure("lm_head_ce fwd+bwd", shape, "3 (logits, dx, dW)", lm_head_ce, lambda: head_inputs(True),
                            6 * n * vocab * n, samples, backward=lambda loss: ([loss], [torch.ones_like(loss)])))
    for d, ffn in blocks:
        heads = d // 128
        kv = max(heads // 4, 1)
        q = (heads + 2 * kv) * 128
        s = (3.0 / d) ** 0.5
        cos, sin = rope_tables(tokens)
        flops = 2 * tokens * (d * d + 2 * ffn * d + d * ffn + q * d)

        def inputs(grad):
            return tuple(t.requires_grad_(grad) for t in (
                rand(tokens, d), rand(tokens, d), rand(d, d, scale=s), rand(d) + 1, rand(2 * ffn, d, scale=s),
                rand(d, ffn, scale=(3.0 / ffn) ** 0.5), rand(d) + 1, rand(q, d, scale=s)))

        fn = lambda *w: block(*w, cos, sin, heads, kv)
        shape = f"M={tokens} d={d} ffn={ffn}"
        rows.append(measure("block fwd", shape, "4", fn, lambda: inputs(False), flops, samples))
        dx2, dqkv = rand(tokens, d), rand(tokens, q)
        rows.append(measure("block fwd+bwd", shape, "12 (4 fwd, 4 dgrad, 4 wgrad)", fn, lambda: inputs(True), 3 * flops, samples,
                            backward=lambda out: (list(out), [dx2, dqkv])))
    doc = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "samples": samples, "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
    else:
        json.dump(doc, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
