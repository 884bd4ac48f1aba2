#!/usr/bin/env python3
"""Where a block's forward + backward spends its GPU time beside its bare
GEMMs: the CODA block op (`coda_rs.block`, the wheel) and the twelve GEMMs
`coda bench` times it against (forward, input gradients, weight gradients,
each a cuBLAS `torch.matmul`); with `--vocab V` the LM-head tail instead
(`coda_rs.head.head_loss`, forward + backward, `--tokens` rows, hidden
size `--d`) and its three GEMMs (logits, dx, dW). Each is run `--steps` times under
`torch.profiler` after a warm-up: the kernels of one step in launch order
with their GPU times (the median over the steps), then per kernel name its
calls and time per step, and the totals. CODA's kernels are named by
program (the generated namespace's `<program>__<config>`), the rest by
their own names.

usage: block_profile.py [--d 8192] [--ffn 28672 | --vocab V] [--tokens 16384] [--steps 5]
Needs PyTorch on a CUDA GPU and the coda_rs wheel.
"""
import argparse
import collections
import re
import statistics

import torch
from torch.profiler import ProfilerActivity, profile

from coda_rs.block import BlockConfig, block, rope_freq

# The generated namespace, as the profiler shows it (mangled): coda_<package>_<version>_<program>__<config>.
PROGRAM = re.compile(r"coda_coda_[a-z_]+?_\d+_\d+_\d+_(\w+?)__((?:coop|pp)_\d+x\d+_c\dx\d)")


def kernel_name(name):
    m = PROGRAM.search(name)
    return f"{m.group(1)} [{m.group(2)}]" if m else name[:90]


def per_step(fn, steps):
    """The kernels of a step of fn in launch order, as (name, median ms over the steps)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    runs = []
    for _ in range(steps):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        runs.append(sorted((e.time_range.start, kernel_name(e.name), e.device_time_total / 1e3)
                           for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA))
    names = [[k for _, k, _ in r] for r in runs]
    if any(n != names[-1] for n in names):
        print(f"(the steps launched different kernels: the last step's times alone)")
        runs = runs[-1:]
    return [(k, statistics.median(r[i][2] for r in runs)) for i, (_, k, _) in enumerate(runs[-1])]


def show(title, step):
    total = sum(ms for _, ms in step)
    print(f"\n{title}: {total:.3f} ms of GPU time a step, in launch order")
    for i, (k, ms) in enumerate(step):
        print(f"  {i:3} {ms:9.3f} ms  {k}")
    by = collections.defaultdict(lambda: [0, 0.0])
    for k, ms in step:
        by[k][0] += 1
        by[k][1] += ms
    print("  by kernel:")
    for k, (c, ms) in sorted(by.items(), key=lambda x: -x[1][1]):
        print(f"  {ms:9.3f} ms  {ms / total * 100:5.1f}%  x{c:<3} {k}")


def uniform(g):
    """bf16 tensors uniform in [lo, lim] (lo = −lim by default) from generator g."""
    def u(*s, lim=1.0, lo=None):
        lo = -lim if lo is None else lo
        return (torch.rand(*s, generator=g, device="cuda") * (lim - lo) + lo).bfloat16()
    return u


def bound(fan_in):
    """The bound of a linear's uniform weights that keeps its output's variance."""
    return (3.0 / fan_in) ** 0.5


def bare_gemms(u, m, linears):
    """The bare GEMMs of linears y = x·Wᵀ ([M, K] · [N, K]ᵀ) given as (K, N): y, dx = dy·W and dW = dyᵀ·x each."""
    xs = [u(m, k) for k, _ in linears]
    ws = [u(n, k, lim=bound(k)) for k, n in linears]
    dys = [u(m, n) for _, n in linears]

    def gemms():
        for x, w, dy in zip(xs, ws, dys):
            x @ w.T
            dy @ w
            dy.T @ x
    return gemms


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, default=8192)
    ap.add_argument("--ffn", type=int, default=28672)
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--vocab", type=int, help="profile the LM-head tail with this vocabulary instead of the block")
    ap.add_argument("--steps", type=int, default=5)
    a = ap.parse_args()
    if a.vocab:
        return head(a)
    d, f, m = a.d, a.ffn, a.tokens
    heads = d // 128
    c = BlockConfig(hidden=d, ffn=f, heads=heads, kv_heads=max(heads // 4, 1), head_dim=128)
    aw, qw = c.heads * 128, (c.heads + 2 * c.kv_heads) * 128
    u = uniform(torch.Generator(device="cuda").manual_seed(3))
    weights = [u(d, aw, lim=bound(aw)), u(d, lim=1.5, lo=0.5), u(2 * f, d, lim=bound(d)), u(d, f, lim=bound(f)),
               u(d, lim=1.5, lo=0.5), u(qw, d, lim=bound(d))]
    attn, x0, dx2, dqkv = u(m, aw), u(m, d), u(m, d), u(m, qw)
    pos = torch.arange(m, device="cuda", dtype=torch.float32)
    freq = rope_freq(c, "cuda")
    leaves = [t.requires_grad_() for t in [attn, x0] + weights]

    def coda():
        x2, qkv = block(attn, x0, pos, weights, c, freq)
        torch.autograd.grad([x2, qkv], leaves, [dx2, dqkv])

    # (K, N) of o_proj, gate_up, down, qkv.
    gemms = bare_gemms(u, m, [(aw, d), (d, 2 * f), (f, d), (d, qw)])
    show(f"CODA block forward + backward, d = {d}, ffn = {f}, {m} tokens", per_step(coda, a.steps))
    show("its twelve bare GEMMs (cuBLAS through torch.matmul; per linear: y, dx, dW)", per_step(gemms, a.steps))


def head(a):
    """The LM-head tail's forward + backward (one op) against its three bare GEMMs."""
    from coda_rs.head import head_loss

    d, v, m = a.d, a.vocab, a.tokens
    g = torch.Generator(device="cuda").manual_seed(3)
    u = uniform(g)
    x, w = u(m, d).requires_grad_(), u(v, d, lim=bound(d)).requires_grad_()
    gamma = u(d, lim=1.5, lo=0.5).requires_grad_()
    targets = torch.randint(0, v, (m,), generator=g, device="cuda")

    def coda():
        torch.autograd.grad(head_loss(x, targets, gamma, w), [x, gamma, w])

    gemms = bare_gemms(u, m, [(d, v)])
    show(f"CODA LM-head tail forward + backward, d = {d}, V = {v}, {m} tokens", per_step(coda, a.steps))
    show("its three bare GEMMs (cuBLAS through torch.matmul: logits, dx, dW)", per_step(gemms, a.steps))


if __name__ == "__main__":
    main()
