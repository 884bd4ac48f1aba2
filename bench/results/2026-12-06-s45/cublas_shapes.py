#!/usr/bin/env python3
"""cuBLAS's bare bf16 GEMM `a · bᵀ` (a [M, K], b [N, K], torch.matmul) at
the shapes given as M,N,K: CUDA events, ~1 s of warm-up, inputs rotated
over sets larger than twice the L2, the median over 30 samples of 5
launches. Prints `M N K ms`."""
import statistics
import sys
import time

import torch

for arg in sys.argv[1:]:
    m, n, k = map(int, arg.split(","))
    per = (m * k + n * k) * 2
    sets = max(2, -(-200 * 2**20 // per))
    a = [torch.randn(m, k, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    b = [torch.randn(n, k, device="cuda", dtype=torch.bfloat16) for _ in range(sets)]
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    i, t0 = 0, time.time()
    while time.time() - t0 < 1.0:
        torch.matmul(a[i % sets], b[i % sets].t(), out=out)
        i += 1
    torch.cuda.synchronize()
    samples = []
    for _ in range(30):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(5):
            torch.matmul(a[i % sets], b[i % sets].t(), out=out)
            i += 1
        e.record()
        e.synchronize()
        samples.append(s.elapsed_time(e) / 5)
    print(f"{m} {n} {k} {statistics.median(samples):.4f}", flush=True)
