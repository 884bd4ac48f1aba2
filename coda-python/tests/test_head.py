"""The LM-head tail op (``coda_rs.head``) on an H100/H200 with PyTorch: the
mean loss and the gradients of ``x``, ``gamma`` and ``w`` against the same
tail in plain PyTorch (``F.cross_entropy`` with ignored targets)
differentiated by autograd in f64, with the project's criterion (the
yardstick: that tail op by op in bf16); several row chunks; bitwise
repeatable; ``torch.compile(fullgraph=True)`` bit for bit as eager;
refusals name their argument."""

import unittest

try:
    import torch

    GPU = torch.cuda.is_available()
except ImportError:  # CI installs no torch: this file is for the GPU machine
    GPU = False

if GPU:
    import torch.nn.functional as F

    from coda_rs import ArgumentError, _coda
    from coda_rs.head import head_loss
    from test_gpu import criterion, cuda_graph_rerecords

NAMES = ["loss", "dx", "dgamma", "dw"]
EPS = 1e-5


def reference(x, targets, gamma, w, softcap=None, z_loss=0.0, label_smoothing=0.0):
    """The tail in plain PyTorch: soft-capped logits, ``F.cross_entropy``
    with label smoothing, plus ``z_loss`` times the mean ``lse²`` of the
    rows ``F.cross_entropy`` averages over."""
    h = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + EPS) * gamma
    logits = h @ w.T
    if softcap is not None:
        logits = softcap * torch.tanh(logits / softcap)
    loss = F.cross_entropy(logits, targets, ignore_index=-100, label_smoothing=label_smoothing)
    if z_loss:
        lse = torch.logsumexp(logits[targets != -100], dim=-1)
        loss = loss + z_loss * (lse * lse).mean()
    return loss

# Each loss variant alone and all together; a cap of 2 bends logits of ~±1.
VARIANTS = [
    {"softcap": 2.0},
    {"z_loss": 0.05},
    {"label_smoothing": 0.1},
    {"softcap": 2.0, "z_loss": 0.05, "label_smoothing": 0.1},
]


@unittest.skipUnless(GPU, "needs a CUDA GPU and PyTorch")
class HeadOp(unittest.TestCase):
    def setUp(self):
        # 700 rows: chunks of 256, 256 and 188; one row in ten ignored.
        m, d, v = 700, 256, 1000
        g = torch.Generator(device="cuda").manual_seed(21)
        u = lambda *s, lo=-1.0, hi=1.0: (torch.rand(*s, generator=g, device="cuda") * (hi - lo) + lo).bfloat16()  # noqa: E731
        self.x, self.gamma, self.w = u(m, d), u(d, lo=0.5, hi=1.5), u(v, d, lo=-0.2, hi=0.2)
        self.targets = torch.randint(0, v, (m,), generator=g, device="cuda")
        self.targets[torch.rand(m, generator=g, device="cuda") < 0.1] = -100

    def run_tail(self, dtype, fn):
        leaves = [t.detach().to(dtype).requires_grad_() for t in (self.x, self.gamma, self.w)]
        x, gamma, w = leaves
        torch.compiler.cudagraph_mark_step_begin()  # a new step for CUDA graph trees
        loss = fn(x, self.targets, gamma, w)
        loss.backward()
        # Copies: a CUDA graph's replay overwrites the outputs of the last.
        return [loss.detach().clone()] + [t.grad.clone() for t in leaves]

    def test_loss_and_gradients_against_f64(self):
        coda = lambda x, t, gamma, w: head_loss(x, t, gamma, w, EPS, chunk_rows=256)  # noqa: E731
        ours, again = self.run_tail(torch.bfloat16, coda), self.run_tail(torch.bfloat16, coda)
        exact, bf16 = self.run_tail(torch.float64, reference), self.run_tail(torch.bfloat16, reference)
        for name, o, a, e, y in zip(NAMES, ours, again, exact, bf16):
            self.assertEqual(o.shape, e.shape, name)
            self.assertTrue(torch.equal(o, a), f"{name} differs between two runs")
            criterion(self, name, o, e, y)

    def test_loss_variants_against_f64(self):
        """Soft-capping, z-loss and label smoothing (the programs of each
        variant), loss and gradients against the PyTorch formula."""
        for variant in VARIANTS:
            with self.subTest(**variant):
                coda = lambda x, t, gamma, w: head_loss(x, t, gamma, w, EPS, chunk_rows=256, **variant)  # noqa: E731
                torch_ = lambda x, t, gamma, w: reference(x, t, gamma, w, **variant)  # noqa: E731
                ours, again = self.run_tail(torch.bfloat16, coda), self.run_tail(torch.bfloat16, coda)
                exact, bf16 = self.run_tail(torch.float64, torch_), self.run_tail(torch.bfloat16, torch_)
                plain = self.run_tail(torch.float64, reference)
                for name, o, a, e, y, p in zip(NAMES, ours, again, exact, bf16, plain):
                    self.assertTrue(torch.equal(o, a), f"{name} differs between two runs")
                    self.assertGreater((e - p).abs().max().item(), 0.0, f"{name}: the variant changes nothing")
                    criterion(self, f"{name} {variant}", o, e, y)

    def test_autocast_runs_f32_weights_in_bf16(self):
        """Under ``torch.autocast("cuda", dtype=torch.bfloat16)``, f32 ``x``,
        ``gamma`` and ``w`` holding bf16 values give the bf16 run's loss bit
        for bit and its gradients in f32; an f32 `w` under autocast to f16 is
        refused by its name."""
        coda = lambda x, t, gamma, w: head_loss(x, t, gamma, w, EPS, chunk_rows=256)  # noqa: E731
        want = self.run_tail(torch.bfloat16, coda)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            got = self.run_tail(torch.float32, coda)
        for name, g, w in zip(NAMES, got, want):
            self.assertEqual(g.dtype, torch.float32, name)
            self.assertTrue(torch.equal(g, w.to(torch.float32)), name)
        with torch.autocast("cuda", dtype=torch.float16), self.assertRaises(ArgumentError) as e:
            head_loss(self.x, self.targets, self.gamma, self.w.float(), EPS)
        self.assertEqual(e.exception.argument, "w", str(e.exception))

    def test_compiled_matches_eager(self):
        def loss(x, t, gamma, w):
            # PyTorch ops on both sides (exact scalings), captured in CUDA
            # graphs around the tail, whose tensors then come from the graphs' pool.
            return head_loss(x * 0.5, t, gamma, w, EPS, 256) * 2.0

        # "reduce-overhead": Inductor's CUDA graph trees on; the op's
        # cudagraph_unsafe tag keeps it out of the graphs, and the pool's
        # memory must stay checkpointable around it (no recorded stream uses)
        # through warm-up, recording and replay.
        # Each step, memory the size of the last step's saved gradients is
        # held, so the op's outputs land elsewhere, as in a training loop;
        # no captured graph may take them as static inputs (re-recorded on
        # every step then).
        held = []
        for mode in ("default", "reduce-overhead"):
            compiled = torch.compile(loss, fullgraph=True, mode=mode)
            runs = []
            with cuda_graph_rerecords() as rerecords:
                for fn in (loss, compiled, compiled, compiled, compiled):
                    held.append([torch.empty_like(self.x), torch.empty_like(self.gamma, dtype=torch.float32),
                                 torch.empty_like(self.w, dtype=torch.float32)])
                    runs.append(self.run_tail(torch.bfloat16, fn))
            self.assertEqual(rerecords, [], f"torch.compile({mode!r}) re-recorded")
            eager, *runs = runs
            for run in runs:
                for name, e, c in zip(NAMES, eager, run):
                    self.assertTrue(torch.equal(e, c), f"{name} differs between eager and torch.compile({mode!r})")

    def test_backward_fills_no_zero_gradients(self):
        """The op's saved-gradient outputs have no gradient of their own:
        autograd must not fill zero tensors ([V, d] for dw) for them."""
        leaves = [t.detach().clone().requires_grad_() for t in (self.x, self.gamma, self.w)]
        loss = head_loss(*leaves[:1], self.targets, *leaves[1:], EPS, 256)
        seed = torch.ones_like(loss)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            loss.backward(seed)
            torch.cuda.synchronize()
        fills = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and "Fill" in e.name]
        self.assertEqual(fills, [], "zero-filled gradients in the backward")
        self.assertTrue(all(t.grad is not None for t in leaves))

    def test_loss_gradient_scales_as_the_f32_product(self):
        """``head_loss_grad`` (the kept gradients times the loss's gradient,
        CODA's kernel) bit for bit as PyTorch's f32 product of the same
        tensors rounded once to bf16; a loss gradient of -0.3
        (``(loss * -0.3).backward()``) and one of 1. (PyTorch's ``mul`` of
        the bf16 ``dx`` by an f32 0-dim tensor would round the gradient to
        bf16 first.)"""
        kept = torch.ops.coda_rs.head_loss(self.x, self.targets, self.gamma, self.w, EPS, 256, 0.0, 0.0, 0.0)[1:]
        for g in (-0.3, 1.0):
            dmean = torch.full((1,), g, device="cuda")
            ours = torch.ops.coda_rs.head_loss_grad(dmean, *kept, torch.bfloat16, torch.bfloat16, torch.bfloat16)
            for name, k, o in zip(NAMES[1:], kept, ours):
                want = (k.float() * dmean.reshape(())).bfloat16()
                self.assertEqual(o.dtype, torch.bfloat16, name)
                self.assertTrue(torch.equal(o, want), f"{name} times {g} differs from the f32 product rounded once")
        with self.assertRaises(ArgumentError) as e:
            torch.ops.coda_rs.head_loss_grad(dmean, *kept, torch.bfloat16, torch.float32, torch.bfloat16)
        self.assertEqual(e.exception.argument, "dgamma_out", str(e.exception))
        # Refused before anything is written: a short dw_out leaves dx_out as it was.
        out = [torch.zeros(k.shape, dtype=torch.bfloat16, device="cuda") for k in kept[:2]]
        out.append(torch.zeros(5, dtype=torch.bfloat16, device="cuda"))
        with self.assertRaises(ArgumentError) as e:
            _coda.head_scale_grads(kept[0].device.index, dmean, list(kept), out)
        self.assertEqual(e.exception.argument, "dw_out", str(e.exception))
        self.assertEqual(torch.count_nonzero(out[0]).item(), 0, "dx_out written before the refusal")

    def test_overlapping_outputs_are_refused(self):
        """A written tensor overlapping another tensor of the call is refused
        by its name before anything runs (the kernels read and write through
        restrict pointers, and an op's launches read what its earlier ones
        wrote): ``dw_out`` over the first half of the f32 ``dw`` it is scaled
        from, ``dx_out`` holding ``dmean``, and in the fused tail the
        ``loss`` state inside ``dx``."""
        kept = list(torch.ops.coda_rs.head_loss(self.x, self.targets, self.gamma, self.w, EPS, 256, 0.0, 0.0, 0.0)[1:])
        dw_before = kept[2].clone()
        dev, (v, d), m = kept[0].device.index, kept[2].shape, self.x.shape[0]
        dmean = torch.ones(1, device="cuda")
        out = [torch.zeros(k.shape, dtype=torch.bfloat16, device="cuda") for k in kept]

        def refused(name, call):
            with self.assertRaises(ArgumentError) as e:
                call()
            self.assertEqual(e.exception.argument, name, str(e.exception))
            self.assertIn("overlaps", str(e.exception))
            print(f"  {name}: {e.exception}")

        over_dw = kept[2].view(-1).view(torch.bfloat16)[: v * d].view(v, d)
        refused("dw_out", lambda: _coda.head_scale_grads(dev, dmean, kept, [out[0], out[1], over_dw]))
        in_dx_out = out[0].view(-1).view(torch.float32)[:1]
        refused("dx_out", lambda: _coda.head_scale_grads(dev, in_dx_out, kept, out))
        self.assertTrue(torch.equal(kept[2], dw_before), "dw written before the refusal")
        self.assertEqual(torch.count_nonzero(out[0]).item(), 0, "dx_out written before the refusal")

        e = lambda *shape, dtype=torch.float32: torch.zeros(shape, dtype=dtype, device="cuda")  # noqa: E731
        rows = _coda.head_buffer_rows(m, 256)
        grads = [e(m, d, dtype=torch.bfloat16), e(d), e(v, d)]
        loss_in_dx = grads[0].view(-1).view(torch.float32)[:m]
        state = [e(m, d, dtype=torch.bfloat16), e(m), e(m), e(m), loss_in_dx, e(1)]
        chunk = [e(rows, v, dtype=torch.bfloat16), e(rows, v, dtype=torch.bfloat16), e(rows, d, dtype=torch.bfloat16)]
        args = (self.gamma, self.w, self.x, self.targets.to(torch.int32), state, grads, chunk)
        refused("loss", lambda: _coda.head_forward_backward(dev, EPS, 256, (0.0, 0.0, 0.0), *args))
        self.assertEqual(torch.count_nonzero(grads[0]).item(), 0, "dx written before the refusal")

    def test_every_target_ignored_gives_nan_as_pytorch(self):
        t = torch.full_like(self.targets, -100)
        ours = head_loss(self.x, t, self.gamma, self.w)
        self.assertTrue(torch.isnan(ours).item() and torch.isnan(reference(self.x.double(), t, self.gamma.double(), self.w.double())).item())

    def test_refusals_name_their_argument(self):
        def refused(name, x=None, targets=None, gamma=None, w=None, chunk_rows=256):
            with self.assertRaises(ArgumentError) as e:
                head_loss(self.x if x is None else x, self.targets if targets is None else targets,
                          self.gamma if gamma is None else gamma, self.w if w is None else w, EPS, chunk_rows)
            self.assertEqual(e.exception.argument, name, str(e.exception))
            print(f"  {name}: {e.exception}")

        refused("w", w=self.w[:, :-8].contiguous())
        refused("w", w=self.w[:-4].contiguous())
        refused("x", x=self.x[:, :-8].contiguous())
        refused("targets", targets=self.targets.float())
        refused("targets", targets=self.targets[:-1])
        refused("chunk_rows", chunk_rows=100)
        refused("x", x=self.x.cpu())
        refused("x", x=self.x[:0], targets=self.targets[:0])
        w = torch.empty(self.w.numel() + 1, dtype=self.w.dtype, device="cuda")[1:].view_as(self.w).copy_(self.w)
        refused("w", w=w)

        def refused_loss(name, **loss):
            with self.assertRaises(ArgumentError) as e:
                head_loss(self.x, self.targets, self.gamma, self.w, EPS, 256, **loss)
            self.assertEqual(e.exception.argument, name, str(e.exception))
            print(f"  {name}: {e.exception}")

        refused_loss("softcap", softcap=-1.0)
        refused_loss("softcap", softcap=float("inf"))
        refused_loss("z_loss", z_loss=-0.1)
        refused_loss("label_smoothing", label_smoothing=1.5)
        refused_loss("z_loss", z_loss=float("nan"))
        refused_loss("softcap", softcap=1e39)
        refused_loss("z_loss", z_loss=1e-50)
        with self.assertRaises(ArgumentError) as e:
            head_loss(self.x, self.targets, self.gamma, self.w, EPS, -1)
        self.assertEqual(e.exception.argument, "chunk_rows", str(e.exception))
        # The op itself (as torch.compile calls it) names the loss's terms together.
        with self.assertRaises(ArgumentError) as e:
            torch.ops.coda_rs.head_loss(self.x, self.targets, self.gamma, self.w, EPS, 256, 0.0, -0.1, 0.0)
        self.assertEqual(e.exception.argument, "loss", str(e.exception))

    def test_loss_without_gradients_runs_the_forward_alone(self):
        """Under ``torch.no_grad`` (or with no input requiring grad) the tail
        is ``coda_rs::head_loss_forward`` (no chunks, no gradients): its loss
        against the f64 formula for the plain loss and each variant, bitwise
        repeatable."""
        self.assertIn("head_loss_forward", str(torch.ops.coda_rs.head_loss_forward))
        x, t, g, w = self.x, self.targets, self.gamma, self.w
        with torch.no_grad():
            plain = head_loss(x, t, g, w, EPS, 256)
        # Inputs that do not require grad, grad mode on: the same path.
        self.assertTrue(torch.equal(head_loss(x, t, g, w, EPS, 256), plain))
        for variant in [{}] + VARIANTS:
            with self.subTest(**variant), torch.no_grad():
                ours = head_loss(x, t, g, w, EPS, 256, **variant)
                again = head_loss(x, t, g, w, EPS, 256, **variant)
                exact = reference(x.double(), t, g.double(), w.double(), **variant)
                bf16 = reference(x, t, g, w, **variant)
                self.assertTrue(torch.equal(ours, again))
                criterion(self, f"no_grad loss {variant}", ours, exact, bf16)

    def test_targets_past_int32_are_ignored_not_wrapped(self):
        """An int64 id of 2³² + 5 is outside [0, V): ignored, as -100 is,
        not cast to class 5."""
        t = self.targets.clone()
        t[3], t[4] = 2**32 + 5, -(2**32) + 7
        ignored = t.clone()
        ignored[3] = ignored[4] = -100
        a = head_loss(self.x, t, self.gamma, self.w, EPS, 256)
        b = head_loss(self.x, ignored, self.gamma, self.w, EPS, 256)
        self.assertTrue(torch.equal(a, b), f"{a.item()} vs {b.item()}")


if __name__ == "__main__":
    unittest.main()
