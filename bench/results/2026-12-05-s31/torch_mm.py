# cuBLAS (torch.nn.functional.linear, bf16, D = A·Bᵀ) at the given shapes:
# ≥ 1 s warm-up, 15 samples of back-to-back launches between CUDA events,
# input sets rotated past the L2; median ms per launch.
import sys, time, torch
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
for s in sys.argv[1:]:
    m, n, k = map(int, s.split(","))
    per = (m * k + n * k) * 2
    sets = max(1, -(-200_000_000 // per))
    ops = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(n, k, device="cuda", dtype=torch.bfloat16)) for _ in range(sets)]
    f = lambda i: torch.nn.functional.linear(*ops[i % sets])
    reps = max(1, int(2e-3 / (2 * m * n * k / 6e14)))
    t0 = time.time(); i = 0
    while time.time() - t0 < 1.0:
        f(i); i += 1
    torch.cuda.synchronize()
    ms = []
    for _ in range(15):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            f(i); i += 1
        b.record(); b.synchronize()
        ms.append(a.elapsed_time(b) / reps)
    ms.sort()
    print(f"cublas M={m} N={n} K={k}: {ms[len(ms)//2]:.4f} ms (reps {reps}, sets {sets})", flush=True)
    del ops
