"""The gradient of every weight of the training run's model, CODA and
plain bf16, against the plain model in f64, at the run's full shape.

    python bench/train/grad_check.py [--weights W.pt] [--step 50]

The weights are the initial ones of ``--seed`` or a state dict that
``train.py --save`` wrote (``--save-step 47 --save W.pt``: the 300-step
run's weights that step 48's batch meets, where the runs' losses spike);
the batch is step ``--step`` of ``train.py``'s 300-step corpus. Attention
is PyTorch's default backend in bf16 (as in training) and its math one in
f64. Per weight: the relative error ‖g − g₆₄‖ / ‖g₆₄‖ of each model, and
the project's criterion max|CODA − f64| ≤ 2·max|bf16 − f64| + 1e-6.
"""

import argparse
import copy
import sys
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from coda_rs.model import CodaLlama, LlamaConfig, PlainLlama

sys.path.insert(0, str(Path(__file__).parent))
from train import corpus  # noqa: E402  (the training run's data)


def grads(model, tokens, targets):
    for q in model.parameters():
        q.grad = None
    loss = model(tokens, targets)
    loss.backward()
    named = {n: p.grad for n, p in model.named_parameters()}
    return loss.item(), (model.hf_state_dict(named) if isinstance(model, CodaLlama) else named)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--weights", help="a state dict from train.py --save (default: the initial weights of --seed)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--step", type=int, default=50, help="which step's batch of the 300-step corpus")
    p.add_argument("--data-seed", type=int, default=1234)
    a = p.parse_args()
    c = LlamaConfig(vocab=32000, hidden=2048, ffn=8192, layers=8, heads=16, kv_heads=4, head_dim=128)
    dev = torch.device("cuda")
    torch.manual_seed(a.seed)
    plain = PlainLlama(c, device=dev)
    if a.weights:
        plain.load_state_dict(torch.load(a.weights, map_location=dev))
    batch = corpus(300, 4, 2048, c.vocab, a.data_seed, dev)[a.step]
    tokens, targets = batch[:, :-1], batch[:, 1:]
    coda = CodaLlama.from_state_dict(c, plain.state_dict(), device=dev)
    coda_loss, coda_g = grads(coda, tokens, targets)
    del coda
    bf16_loss, bf16_g = grads(plain, tokens, targets)
    with sdpa_kernel(SDPBackend.MATH):
        exact_loss, exact_g = grads(copy.deepcopy(plain).double(), tokens, targets)
    print(f"loss: f64 {exact_loss:.6f}, plain bf16 {bf16_loss:.6f} ({bf16_loss - exact_loss:+.2e}), CODA {coda_loss:.6f} ({coda_loss - exact_loss:+.2e})")
    print(f"{'weight':46} {'rel plain':>10} {'rel CODA':>10} {'CODA/plain':>10} {'max|Δ| plain':>13} {'max|Δ| CODA':>12}  criterion")
    worst, failed = 0.0, 0
    for name in sorted(exact_g):
        e = exact_g[name]
        rel = lambda g: ((g.double() - e).norm() / e.norm()).item()  # noqa: E731
        mx = lambda g: (g.double() - e).abs().max().item()  # noqa: E731
        rp, rc, mp, mc = rel(bf16_g[name]), rel(coda_g[name]), mx(bf16_g[name]), mx(coda_g[name])
        worst = max(worst, rc / rp)
        ok = mc <= 2 * mp + 1e-6
        failed += not ok
        print(f"{name:46} {rp:10.3e} {rc:10.3e} {rc / rp:10.2f} {mp:13.3e} {mc:12.3e}  {'ok' if ok else 'FAIL'}")
    print(f"largest CODA/plain relative error: {worst:.2f}; {failed} of {len(exact_g)} outside the criterion")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
