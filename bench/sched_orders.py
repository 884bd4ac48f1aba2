#!/usr/bin/env python3
"""Steady-state times of `coda-llama::matmul` in each swizzle and raster
order beside cuBLAS (`F.linear`), at the given GEMM shapes (issue H: the
heuristic's scheduler rule at large, power-capped grids, where a search's
one-launch samples vary by ~10%; bench/NOTES.md, session 31).

Launches through the wheel's low-level `_coda.launch` in each config the
wheel has for `matmul` (ping-pong 128 x 128 1 x 2 and cooperative 128 x
256 1 x 1, the default set a user's program gets), so each choice is fixed
rather than the tuner's; the launch plan's own choice (`_coda.plan`: the
shipped search where it has the shape, else the heuristic) is printed
beside them. Method: >= 1.5 s warm-up, then
six rounds in which each variant runs back-to-back launches for ~150 ms
between CUDA events, the variants interleaved in a fresh random order each
round, inputs rotated past the L2; median ms per launch, and its ratio to
cuBLAS's. Needs the coda_rs wheel and a GPU.

usage: sched_orders.py M,N,K [M,N,K ...]
"""

import random
import statistics
import sys
import time

import torch
from coda_rs import _coda

PROGRAM = "coda-llama::matmul"
CONFIGS = _coda.program_info(PROGRAM)["configs"]
ORDERS = [("s1 auto", 1, 0), ("s1 M", 1, 1), ("s1 N", 1, 2), ("s8 M", 8, 1), ("s8 N", 8, 2), ("s4 M", 4, 1), ("s4 N", 4, 2)]
CHOICES = [(f"{cfg} {name}", (v, sw, r)) for v, cfg in enumerate(CONFIGS) for name, sw, r in ORDERS]
for s in sys.argv[1:]:
    m, n, k = map(int, s.split(","))
    per = (m * k + n * k) * 2
    sets = max(1, -(-200_000_000 // per))
    ops = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(n, k, device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]
    d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    (pv, psw, pr), _ = _coda.plan(PROGRAM, 0, list(ops[0]))
    print(f"M={m} N={n} K={k}: the launch plan's choice {CONFIGS[pv]} swizzle {psw} raster {['auto', 'M', 'N'][pr]}", flush=True)
    fns = [(name, (lambda c: lambda i: _coda.launch(PROGRAM, 0, c, *ops[i % sets], [d], []))(c)) for name, c in CHOICES]
    fns.append(("cublas", lambda i: torch.nn.functional.linear(*ops[i % sets])))
    reps = max(1, int(0.15 / (2 * m * n * k / 6.5e14)))
    t0 = time.time(); i = 0
    while time.time() - t0 < 1.5:
        for _, f in fns:
            f(i); i += 1
    torch.cuda.synchronize()
    ms = {name: [] for name, _ in fns}
    rng = random.Random(31)
    for r in range(6):
        order = rng.sample(fns, len(fns))  # a fresh order each round: no fixed predecessor
        for name, f in order:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(reps):
                f(i); i += 1
            b.record(); b.synchronize()
            ms[name].append(a.elapsed_time(b) / reps)
    cb = statistics.median(ms["cublas"])
    print(f"M={m} N={n} K={k} (reps {reps}): " + ", ".join(f"{name} {statistics.median(v):.4f} ({statistics.median(v) / cb:.3f})" for name, v in ms.items()), flush=True)
    del ops, d
