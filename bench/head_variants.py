#!/usr/bin/env python3
"""The LM-head loss variants' cost (issue I): `coda_rs.head.head_loss` (the
tail's forward and backward in one pass over row chunks) with soft-capping,
z-loss, label smoothing and all three, against the plain cross-entropy tail,
timed interleaved in one process (CUDA events, warm-up, median of many
samples; the weights alone outgrow the L2). Needs the coda_rs wheel and a GPU.

usage: head_variants.py [--tokens 16384] [--hidden 2048] [--vocab 32768] [--samples 30] [--profile] [--host]

--profile: after the timing, each variant's GPU time per kernel (the
PyTorch profiler over 5 calls), to say where a variant's extra time goes.
--host: each variant's host time per call (enqueueing it, no sync) and
its GPU time with the host ahead (a sleep kernel first, so that every
launch is queued before the first runs). The latter is not the timed
call less the host's gaps: after the sleep the GPU starts cool, at
higher clocks (on an H100, 9.9 ms against 11.4 timed; session 42).
"""
import argparse
import collections
import re
import statistics
import time

import torch
from coda_rs.head import head_loss

VARIANTS = [
    ("plain cross-entropy", {}),
    ("soft-capped (30)", {"softcap": 30.0}),
    ("z-loss (1e-4)", {"z_loss": 1e-4}),
    ("label smoothing (0.1)", {"label_smoothing": 0.1}),
    ("all three", {"softcap": 30.0, "z_loss": 1e-4, "label_smoothing": 0.1}),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=16384)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--host", action="store_true")
    a = ap.parse_args()
    g = torch.Generator(device="cuda").manual_seed(5)
    u = lambda *s, lo=-1.0, hi=1.0: (torch.rand(*s, generator=g, device="cuda") * (hi - lo) + lo).bfloat16()  # noqa: E731
    s = (3.0 / a.hidden) ** 0.5
    x, gamma, w = u(a.tokens, a.hidden), u(a.hidden, lo=0.5, hi=1.5), u(a.vocab, a.hidden, lo=-s, hi=s)
    targets = torch.randint(0, a.vocab, (a.tokens,), generator=g, device="cuda")
    run = lambda kw: torch.ops.coda_rs.head_loss(  # noqa: E731
        x, targets, gamma, w, 1e-5, 4096, float(kw.get("softcap", 0.0)), float(kw.get("z_loss", 0.0)), float(kw.get("label_smoothing", 0.0))
    )
    for _, kw in VARIANTS:  # warm-up (and the tuner's choices)
        for _ in range(3):
            run(kw)
    torch.cuda.synchronize()
    times = {name: [] for name, _ in VARIANTS}
    for _ in range(a.samples):
        for name, kw in VARIANTS:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run(kw)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
    plain = statistics.median(times[VARIANTS[0][0]])
    print(f"{torch.cuda.get_device_name()}, M={a.tokens} d={a.hidden} V={a.vocab}, forward + backward, median of {a.samples}")
    print(f"{'loss':<24} {'ms':>8} {'vs plain':>9}")
    for name, _ in VARIANTS:
        ms = statistics.median(times[name])
        print(f"{name:<24} {ms:>8.3f} {ms / plain:>9.3f}")
    if a.profile:
        profile(run)
    if a.host:
        host_and_gpu(run, a.samples)


def host_and_gpu(run, samples):
    print(f"\nhost ms per call (enqueue) and GPU ms with the host ahead, median of {samples}")
    for name, kw in VARIANTS:
        host, gpu = [], []
        for _ in range(samples):
            torch.cuda.synchronize()
            torch.cuda._sleep(50_000_000)  # 25-35 ms of clocks: longer than any enqueue here
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            t = time.perf_counter()
            run(kw)
            host.append((time.perf_counter() - t) * 1e3)
            end.record()
            end.synchronize()
            gpu.append(start.elapsed_time(end))
        late = sum(h > 25.0 for h in host)  # the sleep's shortest: past it the GPU waited on the host after all
        note = f"  ({late} calls enqueued for longer than the sleep)" if late else ""
        print(f"{name:<24} host {statistics.median(host):8.3f}  GPU {statistics.median(gpu):8.3f}{note}")


def kernel_name(name):
    """Our generated kernels by package, program and config (their namespace,
    mangled or not), others by their name's first 60 characters. A program
    with no computed value (`weight_col_sums`: loads and partials only) has
    no type of its own in the kernel's name."""
    m = re.search(r"coda_gen(?:::|\d+)coda_([a-z0-9_]+?__(?:pp|coop)_\d+x\d+_c\dx\d)", name)
    if m:
        return m.group(1)
    return "a CUTLASS kernel without a program type in its name" if "7cutlass13device_kernel" in name else name[:60]


def profile(run, calls=5):
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    print(f"\nGPU time per call by kernel (ms, the profiler over {calls} calls)")
    for name, kw in VARIANTS:
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                run(kw)
            torch.cuda.synchronize()
        per = collections.Counter()
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                per[kernel_name(e.name)] += e.time_range.elapsed_us() / 1000 / calls
        print(f"{name}: total {sum(per.values()):.3f}")
        for k, ms in per.most_common(10):
            print(f"  {ms:8.3f}  {k}")


if __name__ == "__main__":
    main()
