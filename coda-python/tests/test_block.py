"""The Llama block op (``coda_rs.block``) on an H100/H200 with PyTorch:
forward outputs and every gradient against the same block written in plain
PyTorch and differentiated by autograd in f64, with the project's criterion
(the yardstick: that PyTorch block run op by op in bf16); bitwise repeatable;
under ``torch.compile(fullgraph=True)`` the same bits as eager; refusals
name their argument."""

import unittest

try:
    import torch

    GPU = torch.cuda.is_available()
except ImportError:  # CI installs no torch: this file is for the GPU machine
    GPU = False

if GPU:
    from coda_rs import ArgumentError
    from coda_rs.block import Block, BlockConfig, block, rope_freq
    from test_gpu import criterion, cuda_graph_rerecords

NAMES = ["x2", "qkv", "dattn", "dx0", "dwo", "dgamma1", "dw_gate_up", "dw_down", "dgamma2", "dw_qkv", "dq_norm", "dk_norm"]


def reference(attn, x0, pos, weights, freq, c):
    """The block in plain PyTorch, in the kernels' layout, in the inputs' dtype."""
    wo, g1, w_gate_up, w_down, g2, w_qkv, *qk_norm = weights
    rms = lambda x: torch.rsqrt((x * x).mean(-1, keepdim=True) + c.eps)  # noqa: E731
    x1 = x0 + attn @ wo.T
    z1 = (x1 * rms(x1) * g1) @ w_gate_up.T
    y1 = torch.nn.functional.silu(z1[:, 0::2]) * z1[:, 1::2]
    x2 = x1 + y1 @ w_down.T
    q = (x2 * rms(x2) * g2) @ w_qkv.T
    if qk_norm:
        # Each q and k head RMS-normalised by its weight (Qwen3's q_norm / k_norm); v as it is.
        m, hd, n_q, n_k = q.shape[0], c.head_dim, c.heads, c.kv_heads
        heads = q[:, : (n_q + n_k) * hd].reshape(m, n_q + n_k, hd)
        gamma = torch.cat([qk_norm[0].expand(n_q, hd), qk_norm[1].expand(n_k, hd)])
        q = torch.cat([(heads * rms(heads) * gamma).reshape(m, -1), q[:, (n_q + n_k) * hd:]], dim=1)
    # Angles exact, their cos and sin rounded once (as the Rust tests' yardstick).
    angle = pos.double()[:, None] * freq.double()[None, 0::2]
    cos, sin = angle.cos().to(q.dtype), angle.sin().to(q.dtype)
    a, b = q[:, 0::2], q[:, 1::2]
    return x2, torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(1)


@unittest.skipUnless(GPU, "needs a CUDA GPU and PyTorch")
class BlockOp(unittest.TestCase):
    QK_NORM = False

    def setUp(self):
        # Two heads of 128, one kv head; a ragged token count.
        self.c = c = BlockConfig(hidden=256, ffn=512, heads=2, kv_heads=1, head_dim=128, qk_norm=self.QK_NORM)
        self.m = m = 300
        g = torch.Generator(device="cuda").manual_seed(11)
        u = lambda *s, lim=1.0, lo=None: (  # noqa: E731
            torch.rand(*s, generator=g, device="cuda") * (2 * lim if lo is None else lim - lo) + (-lim if lo is None else lo)).bfloat16()
        d, f, aw, qw = c.hidden, c.ffn, c.heads * c.head_dim, (c.heads + 2 * c.kv_heads) * c.head_dim
        k = lambda n: (3.0 / n) ** 0.5  # noqa: E731
        self.weights = [u(d, aw, lim=k(aw)), u(d, lim=1.5, lo=0.5), u(2 * f, d, lim=k(d)), u(d, f, lim=k(f)), u(d, lim=1.5, lo=0.5), u(qw, d, lim=k(d))]
        if c.qk_norm:
            self.weights += [u(c.head_dim, lim=1.5, lo=0.5), u(c.head_dim, lim=1.5, lo=0.5)]
        self.attn, self.x0 = u(m, aw), u(m, d)
        self.pos = torch.arange(m, device="cuda", dtype=torch.float32) * 7
        self.dx2, self.dqkv = u(m, d), u(m, qw)
        self.freq = rope_freq(c, "cuda")

    def run_block(self, dtype, fn):
        leaves = [t.detach().to(dtype).requires_grad_() for t in [self.attn, self.x0] + self.weights]
        attn, x0, *weights = leaves
        x2, qkv = fn(attn, x0, self.pos, weights, self.freq, self.c)
        torch.autograd.backward([x2, qkv], [self.dx2.to(dtype), self.dqkv.to(dtype)])
        return [x2.detach(), qkv.detach()] + [t.grad for t in leaves]

    def test_forward_and_backward_against_f64(self):
        coda = lambda attn, x0, pos, weights, freq, c: block(attn, x0, pos, weights, c, freq)  # noqa: E731
        ours = self.run_block(torch.bfloat16, coda)
        again = self.run_block(torch.bfloat16, coda)
        exact = self.run_block(torch.float64, reference)
        bf16 = self.run_block(torch.bfloat16, reference)
        for name, o, a, e, y in zip(NAMES, ours, again, exact, bf16):
            self.assertEqual((o.dtype, o.shape), (torch.bfloat16, e.shape), name)
            self.assertTrue(torch.equal(o, a), f"{name} differs between two runs")
            criterion(self, name, o, e, y)

    def test_backward_fills_no_zero_gradients(self):
        """The intermediates the op returns (x1, r1, z1, y1, r2) have no
        gradient: autograd must not fill zero tensors for them, and a loss
        that uses only x2 still gets every gradient (dqkv taken as zero)."""
        coda = lambda attn, x0, pos, weights, freq, c: block(attn, x0, pos, weights, c, freq)  # noqa: E731
        leaves = [t.detach().clone().requires_grad_() for t in [self.attn, self.x0] + self.weights]
        x2, qkv = coda(leaves[0], leaves[1], self.pos, leaves[2:], self.freq, self.c)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.autograd.backward([x2, qkv], [self.dx2, self.dqkv])
            torch.cuda.synchronize()
        fills = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and "Fill" in e.name]
        self.assertEqual(fills, [], "zero-filled gradients in the backward")
        only_x2 = [t.detach().clone().requires_grad_() for t in [self.attn, self.x0] + self.weights]
        x2b, _ = coda(only_x2[0], only_x2[1], self.pos, only_x2[2:], self.freq, self.c)
        x2b.backward(self.dx2)
        zero_dqkv = [t.detach().clone().requires_grad_() for t in [self.attn, self.x0] + self.weights]
        x2c, qkvc = coda(zero_dqkv[0], zero_dqkv[1], self.pos, zero_dqkv[2:], self.freq, self.c)
        torch.autograd.backward([x2c, qkvc], [self.dx2, torch.zeros_like(self.dqkv)])
        for name, a, b in zip(NAMES[2:], only_x2, zero_dqkv):
            self.assertTrue(torch.equal(a.grad, b.grad), f"{name}: a loss of x2 alone differs from dqkv = 0")

    def test_compiled_module_matches_eager(self):
        torch.manual_seed(3)
        blk = Block(self.c, device="cuda")

        def outputs(attn, x0, pos):
            # PyTorch ops on both sides (exact scalings), captured in CUDA
            # graphs around the block, whose tensors then come from the graphs' pool.
            x2, qkv = blk(attn * 0.5, x0, pos)
            return x2 * 2.0, qkv

        # "reduce-overhead" turns on Inductor's CUDA graph trees, as
        # "max-autotune" does: the ops' cudagraph_unsafe tag keeps them out of
        # the graphs, and the pool's memory must stay checkpointable around
        # them (no recorded stream uses) through warm-up, recording and replay.
        for mode in ("default", "reduce-overhead"):
            compiled = torch.compile(outputs, fullgraph=True, mode=mode)
            results = []
            with cuda_graph_rerecords() as rerecords:
                for fn in (outputs, compiled, compiled, compiled, compiled):
                    blk.zero_grad(set_to_none=True)
                    attn = self.attn.clone().requires_grad_()
                    torch.compiler.cudagraph_mark_step_begin()  # a new step for CUDA graph trees
                    x2, qkv = fn(attn, self.x0, self.pos)
                    torch.autograd.backward([x2, qkv], [self.dx2, self.dqkv])
                    # Copies: a CUDA graph's replay overwrites the outputs of the last.
                    results.append([t.detach().clone() for t in [x2, qkv, attn.grad] + [p.grad for p in blk.weights()]])
            self.assertEqual(rerecords, [], f"torch.compile({mode!r}) re-recorded")
            for run in results[1:]:
                for i, (e, c) in enumerate(zip(results[0], run)):
                    self.assertTrue(torch.equal(e, c), f"output {i} differs between eager and torch.compile({mode!r})")

    def test_from_checkpoint_matches_the_converted_layout(self):
        c = self.c
        g = torch.Generator(device="cuda").manual_seed(5)
        r = lambda *s: torch.randn(*s, generator=g, device="cuda").bfloat16()  # noqa: E731
        d, f, hd = c.hidden, c.ffn, c.head_dim
        ck = dict(wo=r(d, c.heads * hd), gamma1=r(d), gate=r(f, d), up=r(f, d), down=r(d, f), gamma2=r(d),
                  wq=r(c.heads * hd, d), wk=r(c.kv_heads * hd, d), wv=r(c.kv_heads * hd, d))
        if c.qk_norm:
            ck.update(q_norm=r(hd), k_norm=r(hd))
        blk = Block.from_checkpoint(c, **ck)
        if c.qk_norm:
            # The norm weights take the pair order of the q and k rows: (2i, 2i + 1) ← (i, i + hd/2).
            half = torch.stack((ck["q_norm"][: hd // 2], ck["q_norm"][hd // 2:]), dim=-1).flatten()
            self.assertTrue(torch.equal(blk.q_norm, half))
        self.assertTrue(torch.equal(blk.w_gate_up[0::2], ck["gate"]) and torch.equal(blk.w_gate_up[1::2], ck["up"]))
        # v rows are copied as they are; q and k rows only permuted within each head.
        self.assertTrue(torch.equal(blk.w_qkv[-c.kv_heads * hd:], ck["wv"]))
        self.assertTrue(torch.equal(blk.w_qkv[:hd].sort(0).values, ck["wq"][:hd].sort(0).values))

    def test_frozen_weights_get_no_gradient_gemm(self):
        """Weight matrices that do not require grad (frozen, as in partial
        fine-tuning) get no gradient and no cuBLAS GEMM; every other
        gradient is the full backward's bit for bit."""
        def run(frozen):
            leaves = [t.detach().clone().requires_grad_(i - 2 not in frozen) for i, t in enumerate([self.attn, self.x0] + self.weights)]
            x2, qkv = block(leaves[0], leaves[1], self.pos, leaves[2:], self.c, self.freq)
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                torch.autograd.backward([x2, qkv], [self.dx2, self.dqkv])
                torch.cuda.synchronize()
            gemms = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA and ("gemm" in e.name.lower() or "sm90_xmma" in e.name)]
            return [t.grad for t in leaves], gemms

        full, full_gemms = run(())
        part, part_gemms = run((0, 3))  # wo and w_down
        names = ["attn", "x0", "wo", "gamma1", "w_gate_up", "w_down", "gamma2", "w_qkv", "q_norm", "k_norm"]
        for i, (name, a, b) in enumerate(zip(names, full, part)):
            if i - 2 in (0, 3):
                self.assertIsNone(b, f"{name} is frozen")
            else:
                self.assertTrue(torch.equal(a, b), f"{name} differs from the full backward's")
        print(f"  kernels named like cuBLAS GEMMs: {len(full_gemms)} full, {len(part_gemms)} with two weights frozen")

    def test_from_checkpoint_refuses_a_weight_of_another_shape(self):
        c = self.c
        d, f, hd = c.hidden, c.ffn, c.head_dim
        z = lambda *s: torch.zeros(*s, device="cuda", dtype=torch.bfloat16)  # noqa: E731
        ck = dict(wo=z(d, c.heads * hd), gamma1=z(d), gate=z(f, d), up=z(f, d), down=z(d, f), gamma2=z(d),
                  wq=z(c.heads * hd, d), wk=z(c.kv_heads * hd, d), wv=z(c.kv_heads * hd, d))
        if c.qk_norm:
            ck.update(q_norm=z(hd), k_norm=z(hd))
        for name, bad in (("down", z(d, f + 8)), ("gamma2", z(d + 8)), ("gate", z(f + 8, d))):
            changed = dict(ck, **{name: bad})
            if name == "gate":
                changed["up"] = z(f + 8, d)
            with self.assertRaises(ArgumentError) as e:
                Block.from_checkpoint(c, **changed)
            self.assertEqual(e.exception.argument, name, str(e.exception))

    def test_config_fields_of_another_type_are_refused_by_name(self):
        for field, value in (("hidden", -8), ("hidden", 4096.0), ("heads", True), ("eps", "1e-5"), ("qk_norm", 1)):
            args = dict(hidden=256, ffn=512, heads=2, kv_heads=1, head_dim=128)
            args[field] = value
            with self.subTest(field=field, value=value), self.assertRaises(ArgumentError) as e:
                BlockConfig(**args)
            self.assertEqual(e.exception.argument, field, str(e.exception))

    def test_a_cast_module_keeps_f32_frequencies(self):
        """``.bfloat16()`` (or FSDP's buffer dtype) casts floating buffers; the
        RoPE frequencies stay f32 and exact, so the cast block still runs."""
        blk = Block(self.c, device="cuda").bfloat16()
        self.assertEqual(blk.freq.dtype, torch.float32)
        self.assertTrue(torch.equal(blk.freq, self.freq))
        x2, qkv = blk(self.attn, self.x0, self.pos)
        self.assertEqual((x2.shape, qkv.shape), (self.x0.shape, self.dqkv.shape))

    def test_autocast_runs_f32_weights_in_bf16(self):
        """Under ``torch.autocast("cuda", dtype=torch.bfloat16)``, f32 inputs
        and weights holding bf16 values (AMP's master weights) give the bf16
        run's outputs bit for bit and its gradients in f32 (the cast's
        backward); under autocast to f16, bf16 tensors run and the first f32
        one is refused by its name."""
        coda = lambda attn, x0, pos, weights, freq, c: block(attn, x0, pos, weights, c, freq)  # noqa: E731
        want = self.run_block(torch.bfloat16, coda)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            got = self.run_block(torch.float32, coda)
        for name, g, w in zip(NAMES, got, want):
            self.assertEqual(g.dtype, torch.bfloat16 if name in ("x2", "qkv") else torch.float32, name)
            self.assertTrue(torch.equal(g, w.to(g.dtype)), name)
        with torch.autocast("cuda", dtype=torch.float16):
            # bf16 tensors run as they are; f32 ones cannot follow an f16 autocast.
            x2, qkv = block(self.attn, self.x0, self.pos, self.weights, self.c, self.freq)
            self.assertTrue(torch.equal(x2, want[0]) and torch.equal(qkv, want[1]))
            with self.assertRaises(ArgumentError) as e:
                block(self.attn, self.x0, self.pos, [w.float() for w in self.weights], self.c, self.freq)
        self.assertEqual(e.exception.argument, "wo", str(e.exception))

    def test_refusals_name_their_argument(self):
        w = list(self.weights)

        def refused(name, **change):
            args = dict(attn=self.attn, x0=self.x0, pos=self.pos, weights=w)
            args.update(change)
            with self.assertRaises(ArgumentError) as e:
                block(args["attn"], args["x0"], args["pos"], args["weights"], self.c, self.freq)
            self.assertEqual(e.exception.argument, name, str(e.exception))
            print(f"  {name}: {e.exception}")

        refused("wo", weights=[w[0].float()] + w[1:])
        refused("w_down", weights=w[:3] + [w[3][:, :-8].contiguous()] + w[4:])
        refused("attn", attn=self.attn[:-1])
        refused("pos", pos=self.pos.double())
        refused("x0", x0=self.x0.cpu())
        refused("attn", attn=self.attn.T.contiguous().T)
        refused("x0", x0=self.x0[:0], attn=self.attn[:0], pos=self.pos[:0])
        # Contiguous views at an offset of 2 and 4 bytes: refused before the first launch.
        x0 = torch.empty(self.x0.numel() + 1, dtype=self.x0.dtype, device="cuda")[1:].view_as(self.x0).copy_(self.x0)
        refused("x0", x0=x0)
        pos = torch.empty(self.pos.numel() + 1, dtype=self.pos.dtype, device="cuda")[1:].copy_(self.pos)
        refused("pos", pos=pos)
        if self.c.qk_norm:
            refused("q_norm", weights=w[:6] + [w[6][:-2].contiguous(), w[7]])
            refused("k_norm", weights=w[:7] + [w[7][:-2].contiguous()])
        refused("weights", weights=w[:-1])


class BlockOpQkNorm(BlockOp):
    """The same with QK-norm (``BlockConfig(qk_norm=True)``)."""

    QK_NORM = True


if __name__ == "__main__":
    unittest.main()
