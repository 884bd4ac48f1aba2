"""The training comparison's table (and, with --plot, its loss curves) from
train.py's JSON files.

    python bench/train/report.py RESULTS/*.json [--pairs] [--plot curves.svg]

The reference is plain PyTorch, eager, the lowest seed (else the first
run); the spread is what a second seed of the reference gives. Every other
run is compared with the reference step by step (max |Δloss| over the run,
and over its last half). A run under torchrun (``fsdp2``) is also compared
with the same model's one-GPU eager run: its max |Δloss|, and its scaling
efficiency, tokens/s / (ranks × one-GPU tokens/s). With --pairs, every
pair of runs' max |Δloss| (over the run, and its last half) and each run's
largest single-step spike, for several seeds of each model.
"""

import argparse
import json
import statistics


def delta(a, b, start=0):
    return max(abs(x - y) for x, y in zip(a[start:], b[start:]))


SPIKE_FROM, SPIKE_K = 40, 3


def spike(losses, start=SPIKE_FROM, k=SPIKE_K):
    """The largest loss above the median of its k neighbours on each side,
    from step ``start`` on (past the warm-up's steep drop): (height, step);
    (nan, None) for a run too short to have one."""
    steps = range(start, len(losses) - k)
    return max(((losses[i] - statistics.median(losses[i - k:i] + losses[i + 1:i + k + 1]), i) for i in steps), default=(float("nan"), None))


def pairs(runs):
    name = lambda r: f"{r['model']} {r['compile']} {r['seed']}"  # noqa: E731
    half = len(runs[0]["losses"]) // 2
    print(f"\nlargest single-step spike (above the median of its {SPIKE_K} neighbours each side, from step {SPIKE_FROM}):")
    for r in runs:
        h, i = spike(r["losses"])
        print(f"  {name(r):30} {h:6.2f} at step {i}")
    print("max |Δloss| between runs (whole run / last half):")
    for i, r in enumerate(runs):
        for o in runs[i + 1:]:
            print(f"  {name(r):30} {name(o):30} {delta(r['losses'], o['losses']):7.3f} {delta(r['losses'], o['losses'], half):7.3f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+")
    p.add_argument("--plot", help="write the loss curves here (needs matplotlib)")
    p.add_argument("--pairs", action="store_true", help="also every pair's max |Δloss| and each run's largest spike")
    a = p.parse_args()
    runs = []
    for path in a.results:
        with open(path) as f:
            runs.append(json.load(f))
    order = {"none": 0, "default": 1, "max-autotune": 2, "fsdp2": 3}
    runs.sort(key=lambda r: (order[r["compile"]], r["model"] != "plain", r["model"], r["seed"]))
    # Without a plain eager run, the first run is the reference.
    ref = next((r for r in runs if r["model"] == "plain" and r["compile"] == "none"), runs[0])
    half = len(ref["losses"]) // 2
    base = {c: next((r for r in runs if r["model"] == "plain" and r["compile"] == c and r["seed"] == ref["seed"]), None) for c in order}
    print(f"{runs[0]['device']}, torch {runs[0]['torch']}, {ref['params'] / 1e6:.0f}M parameters, "
          f"{len(ref['losses'])} steps of {ref['config']['batch']}×{ref['config']['seq']} tokens; "
          f"Δloss against {ref['model']} {ref['compile']} seed {ref['seed']}")
    print(f"{'model':15} {'compile':13} {'seed':>4} {'loss first → last':>18} {'max|Δloss|':>11} {'last half':>10} "
          f"{'ms/step':>8} {'tokens/s':>9} {'vs plain':>9} {'peak GiB':>9} {'1st step s':>10}")
    for r in runs:
        same = ref if r is ref else None
        d = "" if same else f"{delta(r['losses'], ref['losses']):11.4f}"
        h = "" if same else f"{delta(r['losses'], ref['losses'], half):10.4f}"
        b = base[r["compile"]]
        ratio = f"{r['median_ms'] / b['median_ms']:9.3f}" if b else ""
        gib = (r["peak_torch_bytes"] + r["peak_pool_bytes"]) / 2**30
        mode = r["compile"] + (f"×{r['ranks']}" if r.get("ranks", 1) > 1 or r["compile"] == "fsdp2" else "")
        print(f"{r['model']:15} {mode:13} {r['seed']:4} {r['losses'][0]:8.3f} → {r['losses'][-1]:7.3f} {d:>11} {h:>10} "
              f"{r['median_ms']:8.2f} {r['tokens_per_s']:9.0f} {ratio:>9} {gib:9.2f} {r['first_step_s']:10.1f}")
    for r in (r for r in runs if r["compile"] == "fsdp2"):
        one = next((o for o in runs if o["model"] == r["model"] and o["compile"] == "none" and o["seed"] == r["seed"]), None)
        if one:
            eff = r["tokens_per_s"] / (r["ranks"] * one["tokens_per_s"])
            print(f"{r['model']} fsdp2×{r['ranks']} against its one-GPU eager run: max|Δloss| {delta(r['losses'], one['losses']):.4f}, "
                  f"scaling efficiency {eff:.3f}")
    if a.pairs:
        pairs(runs)
    if a.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 4.5))
        for r in runs:
            ax.plot(r["losses"], label=f"{r['model']}, compile={r['compile']}, seed {r['seed']}", linewidth=1)
        ax.set_xlabel("step")
        ax.set_ylabel("training loss (nats)")
        ax.set_yscale("log")
        ax.legend()
        ax.grid(alpha=0.3)
        fig.tight_layout()
        fig.savefig(a.plot)


if __name__ == "__main__":
    main()
