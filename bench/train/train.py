"""Train a small Llama in plain PyTorch or through CODA, one variant per
process, and write its loss curve, step times and peak memory as JSON.

    python bench/train/train.py --model coda --compile none --steps 300 --out coda.json

Both models start from the same weights (``PlainLlama`` made from ``--seed``;
the CODA model converted from its state dict) and see the same data: a
deterministic synthetic corpus (``corpus``) whose loss can fall far below
ln V. Weights are bf16, updated from f32 master weights by AdamW (fused)
with clipping, the same step for every variant; ``--compile`` wraps the
model's forward (and so its backward) in ``torch.compile``. Step times are
CUDA events around whole steps (forward, backward, optimizer), the median
of the steps after ``--warmup``; peak memory is PyTorch's allocator peak
plus the peak of the CUDA memory pool CODA allocates from. The models
``plain-coda-tail`` and ``coda-plain-tail`` are one model with the other's
LM-head tail (``tail``), to tell which part of a difference is whose.

Under ``torchrun`` (``WORLD_SIZE`` set) the same model trains with
PyTorch's FSDP2 (``fully_shard`` per layer or block, then the root) over
NCCL: f32 parameters sharded across the ranks, gathered in bf16 for the
forward and backward, gradients reduced in f32 (``MixedPrecisionPolicy``,
the same rounding as the master weights above), each rank taking its share
of every batch; the loss is the mean over ranks, rank 0 writes the JSON.

    torchrun --nproc-per-node 2 bench/train/train.py --model coda --out coda-fsdp2.json
"""

import argparse
import json
import math
import os
import re
import statistics
import time

import torch

import coda_rs
from coda_rs.head import head_loss
from coda_rs.model import CodaLlama, LlamaConfig, PlainLlama, plain_tail


def corpus(steps, batch, seq, vocab, seed, device, active=4096):
    """``[steps, batch, seq + 1]`` token ids: each sequence's first half walks
    a fixed random bigram chain over ``active`` of the ``vocab`` ids (four
    successors per token with probabilities 0.5, 0.25, 0.15, 0.1: 1.21 nats
    of entropy per token), the second half repeats the first (predictable
    by attention). The same for every model and seed of the weights."""
    g = torch.Generator(device=device).manual_seed(seed)
    ids = torch.randperm(vocab, generator=g, device=device)[:active]
    successors = ids[torch.randint(0, active, (vocab, 4), generator=g, device=device)]
    probs = torch.tensor([0.5, 0.25, 0.15, 0.1], device=device)
    n, half = steps * batch, (seq + 2) // 2
    walk = torch.empty(n, half, dtype=torch.long, device=device)
    walk[:, 0] = ids[torch.randint(0, active, (n,), generator=g, device=device)]
    choice = torch.multinomial(probs, n * half, replacement=True, generator=g).view(n, half)
    for t in range(1, half):
        walk[:, t] = successors[walk[:, t - 1], choice[:, t]]
    return torch.cat((walk, walk), dim=1)[:, : seq + 1].reshape(steps, batch, seq + 1)


def kernel_table(prof, steps):
    """GPU time per step by kernel, largest first; CODA's CUTLASS kernels by
    program and config (from the namespace in their mangled names)."""
    rows = {}
    for e in prof.key_averages():
        us = getattr(e, "device_time_total", 0) or getattr(e, "cuda_time_total", 0)
        if us <= 0:
            continue
        m = re.search(r"coda_gen(\d+)", e.key)
        name = e.key[m.end():m.end() + int(m.group(1))] if m else e.key[:100]
        calls, total = rows.get(name, (0, 0.0))
        rows[name] = (calls + e.count, total + us)
    lines = [f"{'ms/step':>8} {'calls/step':>10}  kernel"]
    for name, (calls, us) in sorted(rows.items(), key=lambda kv: -kv[1][1]):
        lines.append(f"{us / 1e3 / steps:8.3f} {calls / steps:10.1f}  {name}")
    lines.append(f"{sum(us for _, us in rows.values()) / 1e3 / steps:8.3f} {'':10}  total")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["plain", "coda", "plain-coda-tail", "coda-plain-tail"], required=True,
                   help="plain or coda, or one with the other's LM-head tail (which part of a difference is whose)")
    p.add_argument("--compile", choices=["none", "default", "max-autotune"], default="none")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--warmup", type=int, default=10, help="steps left out of the step time (compilation, autotuning)")
    p.add_argument("--seed", type=int, default=0, help="of the initial weights")
    p.add_argument("--data-seed", type=int, default=1234)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--ffn", type=int, default=8192)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--kv-heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--out", required=True)
    p.add_argument("--save", help="save the weights here (torch.save of the standard Llama state dict; bench/train/grad_check.py reads it)")
    p.add_argument("--save-step", type=int, help="with --save: the weights after this step (0-based) of the run, not after the last")
    p.add_argument("--profile", help="after the run, profile 3 more steps and write the kernels' table here")
    p.add_argument("--trace", help="after the run, trace 3 more steps (host and GPU) into this Chrome trace (.json.gz); bench/train/gaps.py reads it")
    a = p.parse_args()

    if a.save_step is not None and not (a.save and 0 <= a.save_step < a.steps):
        p.error(f"--save-step {a.save_step} needs --save and must be in 0..{a.steps - 1}")
    if a.steps <= a.warmup:
        p.error(f"--steps {a.steps} must exceed --warmup {a.warmup} (the timed steps come after it)")
    world = int(os.environ.get("WORLD_SIZE", "0"))
    if world:
        if a.compile != "none" or a.profile or a.trace or a.save or a.batch % world:
            p.error(f"under torchrun: --compile none, no --profile, --trace or --save, and a --batch divisible by the {world} ranks")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        torch.distributed.init_process_group("nccl")
    rank = torch.distributed.get_rank() if world else 0
    dev = torch.device("cuda", torch.cuda.current_device())
    c = LlamaConfig(vocab=a.vocab, hidden=a.hidden, ffn=a.ffn, layers=a.layers, heads=a.heads, kv_heads=a.kv_heads, head_dim=a.head_dim)
    data = corpus(a.steps, a.batch, a.seq, c.vocab, a.data_seed, dev)
    # Every rank draws the same weights (same seed, same GPU model): FSDP2 shards them as they are.
    torch.manual_seed(a.seed)
    model = PlainLlama(c, device=dev)
    if a.model.startswith("coda"):
        model = CodaLlama.from_state_dict(c, model.state_dict(), device=dev)
    if a.model.endswith("-tail"):
        model.tail = plain_tail if a.model == "coda-plain-tail" else head_loss
    if world:
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        model.float()
        # Inputs stay as they are: a block's token positions are f32.
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, cast_forward_inputs=False)
        for layers in (m for m in model.modules() if isinstance(m, torch.nn.ModuleList)):
            for layer in layers:
                fully_shard(layer, mp_policy=policy)
        fully_shard(model, mp_policy=policy)
        params = master = list(model.parameters())  # f32 shards; FSDP casts
        share = a.batch // world
        data = data[:, rank * share:(rank + 1) * share]
    else:
        params = list(model.parameters())
        master = [q.detach().float().requires_grad_() for q in params]
    decay = [m for m in master if m.dim() == 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.1}, {"params": [m for m in master if m.dim() < 2], "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), fused=True)
    warm = max(1, a.steps // 6)
    schedule = lambda s: min(1.0, (s + 1) / warm) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / a.steps)))  # noqa: E731
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    forward = model if a.compile == "none" else torch.compile(model, mode=a.compile)

    def step(batch):
        if a.compile == "max-autotune":
            # Its CUDA graphs reuse their output buffers from one step to the next.
            torch.compiler.cudagraph_mark_step_begin()
        loss = forward(batch[:, :-1], batch[:, 1:])
        loss.backward()
        if not world:
            for m, q in zip(master, params):
                m.grad = q.grad.float()
                q.grad = None
        torch.nn.utils.clip_grad_norm_(master, 1.0, foreach=True)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        # A copy: the losses are read after the last step, and a CUDA graph's
        # output is overwritten by its next replay.
        loss = loss.detach().clone()
        if world:
            torch.distributed.all_reduce(loss, op=torch.distributed.ReduceOp.AVG)
        else:
            with torch.no_grad():
                torch._foreach_copy_(params, master)
        return loss

    def save():
        """The weights as they are now (after the last step's update), under standard names."""
        torch.save(model.hf_state_dict() if isinstance(model, CodaLlama) else model.state_dict(), a.save)

    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    coda_rs.reset_pool_peak(dev.index or 0)
    losses, events = [], []
    t0 = time.perf_counter()
    for s in range(a.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        losses.append(step(data[s]))
        end.record()
        events.append((start, end))
        if s == 0:
            torch.cuda.synchronize()
            first = time.perf_counter() - t0
        if s == a.save_step:
            save()  # the weights step s + 1's batch meets (grad_check.py --step s + 1)
    torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    ms = [s.elapsed_time(e) for s, e in events]
    timed = ms[a.warmup:]
    median = statistics.median(timed)
    out = {
        "model": a.model, "compile": "fsdp2" if world else a.compile, "ranks": max(world, 1), "seed": a.seed, "data_seed": a.data_seed,
        "config": vars(a), "device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
        "losses": [x.item() for x in losses], "step_ms": ms, "median_ms": median,
        "tokens_per_s": a.batch * a.seq / (median / 1e3), "first_step_s": first, "wall_s": wall,
        "peak_torch_bytes": torch.cuda.max_memory_allocated(), "peak_pool_bytes": coda_rs.pool_memory(dev.index or 0)[1],
        "params": sum(q.numel() for q in params),  # a DTensor counts all its shards
    }
    if world:
        torch.distributed.destroy_process_group()
        if rank:
            return
    with open(a.out, "w") as f:
        json.dump(out, f)
    if a.save and a.save_step is None:
        save()
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for s in range(3):
                step(data[s])
            torch.cuda.synchronize()
        with open(a.profile, "w") as f:
            f.write(kernel_table(prof, steps=3))
    if a.trace:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for s in range(3):
                step(data[s])
            torch.cuda.synchronize()
        prof.export_chrome_trace(a.trace)
    gib = (out["peak_torch_bytes"] + out["peak_pool_bytes"]) / 2**30
    print(f"{a.model:15} {out['compile']:12} seed {a.seed}: loss {out['losses'][0]:.3f} → {out['losses'][-1]:.3f}, "
          f"{median:.1f} ms/step, {out['tokens_per_s']:.0f} tok/s, peak {gib:.2f} GiB, first step {first:.1f} s")


if __name__ == "__main__":
    main()
