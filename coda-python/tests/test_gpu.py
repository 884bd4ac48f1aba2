"""The wheel on an H100/H200 with PyTorch: compiled programs launched on
torch CUDA tensors on the current stream, each output against an f64
reference with the project's criterion (max |ours − f64| ≤ 2 · max |bf16 op
by op − f64| + 1e-6, the bf16 path summing the GEMM in f32 as cuBLAS does),
bitwise repeatable; refusals on the GPU name their argument."""

import contextlib
import logging
import unittest

import coda_rs

try:
    import torch

    GPU = torch.cuda.is_available()
except ImportError:  # CI installs no torch: this file is for the GPU machine
    GPU = False

M, N, K = 1000, 528, 264


def criterion(test, name, ours, exact, bf16):
    err = (ours.double() - exact).abs().max().item()
    yardstick = (bf16.double() - exact).abs().max().item()
    print(f"  {name}: max err {err:.3e}, bf16 op-by-op {yardstick:.3e}")
    test.assertLessEqual(err, 2 * yardstick + 1e-6, name)


@contextlib.contextmanager
def cuda_graph_rerecords():
    """The messages of CUDA graph trees' unexpected re-recordings ("Re-recording
    function=…, reason=…", what ``TORCH_LOGS=cudagraphs`` prints) inside the
    block: each one is a capture on the host where a replay was due."""
    messages = []

    class Collect(logging.Handler):
        def emit(self, record):
            if "Re-recording" in record.getMessage():
                messages.append(record.getMessage())

    handler = Collect(logging.DEBUG)
    logger = logging.getLogger("torch._inductor.cudagraph_trees")
    torch._logging.set_logs(cudagraphs=True)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)
        torch._logging.set_logs()


@unittest.skipUnless(GPU, "needs a CUDA GPU and PyTorch")
class CudaGraphRerecords(unittest.TestCase):
    def test_a_moved_parameter_is_counted(self):
        """The counter the compiled-op tests rely on sees a re-recording: a
        parameter (a static input of the captured graph) moved to new memory."""
        lin = torch.nn.Linear(64, 64, device="cuda")
        f = torch.compile(lin, mode="reduce-overhead")
        x = torch.randn(16, 64, device="cuda")
        with torch.no_grad(), cuda_graph_rerecords() as rerecords:
            for step in range(4):
                if step == 3:
                    lin.weight.data = lin.weight.data.clone()
                torch.compiler.cudagraph_mark_step_begin()
                f(x)
        self.assertGreater(len(rerecords), 0, "no re-recording seen after the parameter moved")


@unittest.skipUnless(GPU, "needs a CUDA GPU and PyTorch")
class Programs(unittest.TestCase):
    def setUp(self):
        g = torch.Generator(device="cuda").manual_seed(7)
        self.rand = lambda *shape, lo=-1.0, hi=1.0, dtype=torch.bfloat16: (
            torch.rand(*shape, generator=g, device="cuda") * (hi - lo) + lo).to(dtype)
        self.a, self.b = self.rand(M, K), self.rand(N, K)
        # The bf16 path's GEMM: an f32 sum rounded to bf16 (cuBLAS's).
        self.acc32 = self.a.float() @ self.b.float().T
        self.acc64 = self.a.double() @ self.b.double().T

    def repeat_bitwise(self, run):
        first, second = run(), run()
        for name in first:
            self.assertTrue(torch.equal(first[name], second[name]), f"{name} differs between two runs")
        return first

    def test_residual_rms_partial(self):
        res, gamma = self.rand(M, N), self.rand(N, lo=0.5, hi=1.5)
        out = self.repeat_bitwise(lambda: coda_rs.launch("linear_residual_rms_partial", a=self.a, b=self.b, residual=res, gamma=gamma))
        h64 = self.acc64 + res.double()
        h16 = self.acc32.bfloat16() + res
        criterion(self, "h", out["h"], h64, h16)
        criterion(self, "u", out["u"], h64 * gamma.double(), h16 * gamma)
        criterion(self, "sq", coda_rs.row_sums(out["sq"], M), (h64 * h64).sum(1), (h16 * h16).float().sum(1))

    def test_rowscale_swiglu_in_place_on_a_side_stream(self):
        r = self.rand(M, lo=0.5, hi=2.0, dtype=torch.float32)
        y = torch.full((M, N // 2), float("nan"), dtype=torch.bfloat16, device="cuda")
        # A kernel's first launch in a process loads its module (CUDA's lazy
        # loading), which waits for running work such as the sleep below.
        coda_rs.launch("linear_rowscale_swiglu", a=self.a, b=self.b, r=r)
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)  # the side stream is busy for a while
            out = coda_rs.launch("linear_rowscale_swiglu", a=self.a, b=self.b, r=r, y=y)
        # On the default stream, not waiting: the launch is still queued behind the sleep.
        early = y.clone()
        side.synchronize()
        self.assertTrue(torch.isnan(early.float()).all().item(), "the launch ran on the side stream, after its sleep")
        self.assertIs(out["y"], y)
        z64, z16 = self.acc64 * r.double()[:, None], self.acc32.bfloat16() * r[:, None]
        z16 = z16.bfloat16()
        ref64 = torch.nn.functional.silu(z64[:, 0::2]) * z64[:, 1::2]
        ref16 = torch.nn.functional.silu(z16[:, 0::2]) * z16[:, 1::2]
        criterion(self, "y", y, ref64, ref16)

    def test_cross_entropy_partials(self):
        r = self.rand(M, lo=0.5, hi=2.0, dtype=torch.float32)
        target = torch.randint(0, N, (M,), device="cuda", dtype=torch.int32)
        target[::7] = -100  # ignored rows: nothing written
        out = self.repeat_bitwise(lambda: coda_rs.launch("linear_cross_entropy", a=self.a, b=self.b, r=r, target=target,
                                                         target_logit=torch.zeros(M, device="cuda")))
        logits64, logits16 = self.acc64 * r.double()[:, None], (self.acc32.bfloat16() * r[:, None]).bfloat16()
        criterion(self, "lse", coda_rs.row_lse(out["lse"], M), torch.logsumexp(logits64, 1), torch.logsumexp(logits16.float(), 1))
        keep = target >= 0
        t = target.long().clamp(min=0)[:, None]
        criterion(self, "target_logit", out["target_logit"][keep], logits64.gather(1, t)[:, 0][keep], logits16.gather(1, t)[:, 0][keep])
        self.assertTrue((out["target_logit"][~keep] == 0).all(), "ignored rows are not written")


    def test_inputs_dropped_while_the_launch_waits(self):
        """The caller drops its only references while the launch is queued; the
        memory must not go to new tensors before the launch has read it."""
        res, gamma = self.rand(M, N), self.rand(N, lo=0.5, hi=1.5)
        res_copy = res.clone()
        coda_rs.launch("linear_residual_rms_partial", a=self.a, b=self.b, residual=res, gamma=gamma)  # module loaded (above)
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            torch.cuda._sleep(200_000_000)
            out = coda_rs.launch("linear_residual_rms_partial", a=self.a, b=self.b, residual=res, gamma=gamma)
        del res
        # Same size, default stream: a freed block would be handed out here and overwritten.
        junk = [torch.full((M, N), 1e4, dtype=torch.bfloat16, device="cuda") for _ in range(4)]
        side.synchronize()
        criterion(self, "h", out["h"], self.acc64 + res_copy.double(), self.acc32.bfloat16() + res_copy)
        del junk

    def test_tensors_dropped_on_their_stream_are_free_at_once(self):
        """As after PyTorch's own ops: the memory of a queued launch's tensors
        made on the launch's stream goes back to the allocator (reusable in
        stream order) as soon as the caller drops them, not when the launch has run."""
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        torch.cuda._sleep(200_000_000)  # the launch stays queued meanwhile
        res, gamma = self.rand(M, N), self.rand(N, lo=0.5, hi=1.5)
        out = coda_rs.launch("linear_residual_rms_partial", a=self.a, b=self.b, residual=res, gamma=gamma)
        del res, gamma, out
        self.assertEqual(torch.cuda.memory_allocated(), before)
        torch.cuda.synchronize()

    def test_map_program_and_kn_layout(self):
        x, gamma = self.rand(M, N), self.rand(N, lo=0.5, hi=1.5)
        out = self.repeat_bitwise(lambda: coda_rs.launch("rms_input", x=x, gamma=gamma))
        criterion(self, "u", out["u"], x.double() * gamma.double(), x * gamma)
        criterion(self, "sq", coda_rs.row_sums(out["sq"], M), (x.double() ** 2).sum(1), (x * x).float().sum(1))
        b_kn = self.rand(K, N)
        out = self.repeat_bitwise(lambda: coda_rs.launch("matmul", a=self.a, b=b_kn))
        criterion(self, "y", out["y"], self.a.double() @ b_kn.double(), (self.a.float() @ b_kn.float()).bfloat16())

    def test_unwritten_rank_one_outputs_start_at_zero(self):
        r = self.rand(M, lo=0.5, hi=2.0, dtype=torch.float32)
        target = torch.full((M,), -100, device="cuda", dtype=torch.int32)
        out = coda_rs.launch("linear_cross_entropy", a=self.a, b=self.b, r=r, target=target)
        self.assertTrue((out["target_logit"] == 0).all().item(), "every target ignored: nothing written, zeros returned")


@unittest.skipUnless(GPU, "needs a CUDA GPU and PyTorch")
class Converters(unittest.TestCase):
    def test_bf16_cuda_weights_round_trip_and_keep_attention_scores(self):
        heads, kv, hd, d = 4, 2, 16, 64
        g = torch.Generator(device="cuda").manual_seed(3)
        w = lambda rows: torch.randn(rows, d, generator=g, device="cuda").bfloat16()
        wq, wk, wv = w(heads * hd), w(kv * hd), w(kv * hd)
        w_qkv = coda_rs.llama.qkv_from_checkpoint(wq, wk, wv, heads, kv)
        self.assertEqual((w_qkv.dtype, w_qkv.device.type, tuple(w_qkv.shape)), (torch.bfloat16, "cuda", ((heads + 2 * kv) * hd, d)))
        for a, b in zip(coda_rs.llama.qkv_to_checkpoint(w_qkv, heads, kv), (wq, wk, wv)):
            self.assertTrue(torch.equal(a, b))
        # q·kᵀ of each head (GQA: head h reads kv head h // 2) is the same in both layouts.
        x = torch.randn(8, d, generator=g, device="cuda").double()
        q0, k0 = x @ wq.double().T, x @ wk.double().T
        q1, k1 = x @ w_qkv[: heads * hd].double().T, x @ w_qkv[heads * hd:(heads + kv) * hd].double().T
        for h in range(heads):
            hq, hk = slice(h * hd, (h + 1) * hd), slice((h // 2) * hd, (h // 2 + 1) * hd)
            torch.testing.assert_close(q1[:, hq] @ k1[:, hk].T, q0[:, hq] @ k0[:, hk].T)
        gate, up = w(24), w(24)
        gu = coda_rs.llama.gate_up_from_checkpoint(gate, up)
        self.assertTrue(torch.equal(gu[0::2], gate) and torch.equal(gu[1::2], up))


@unittest.skipUnless(GPU, "needs a CUDA GPU and PyTorch")
class Refusals(unittest.TestCase):
    def refused(self, argument, fragment, **kwargs):
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.launch("linear_residual_rms_partial", **kwargs)
        self.assertEqual(e.exception.argument, argument, str(e.exception))
        self.assertIn(fragment, str(e.exception))
        print(f"  refused: {e.exception}")

    def test_each_rule_names_its_argument(self):
        bf = lambda *s: torch.zeros(*s, dtype=torch.bfloat16, device="cuda")
        a, b, res, gamma = bf(M, K), bf(N, K), bf(M, N), bf(N)
        self.refused("residual", "float", a=a, b=b, residual=res.float(), gamma=gamma)
        self.refused("residual", "[1000, 528]", a=a, b=b, residual=bf(M, N + 8), gamma=gamma)
        self.refused("residual", "stride", a=a, b=b, residual=bf(N, M).T, gamma=gamma)
        self.refused("b", "K = 264", a=a, b=bf(N, K + 8), residual=res, gamma=gamma)
        self.refused("h", "[1000, 528]", a=a, b=b, residual=res, gamma=gamma, h=bf(M, 8))
        self.refused("a", "CODA needs CUDA tensors", a=a.cpu(), b=b, residual=res, gamma=gamma)
        self.refused("h", "overlap", a=a, b=b, residual=res, gamma=gamma, h=res)
        self.refused("h", "must not require grad", a=a, b=b, residual=res, gamma=gamma, h=bf(M, N).requires_grad_())
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.launch("linear_cross_entropy", a=a, b=b, r=torch.ones(M, device="cuda"),
                           target=torch.zeros(M, dtype=torch.int64, device="cuda"))
        self.assertEqual(e.exception.argument, "target", str(e.exception))
        print(f"  refused: {e.exception}")


@unittest.skipUnless(GPU, "needs a CUDA GPU and PyTorch")
class PoolMemory(unittest.TestCase):
    def test_devices_by_index_or_name_and_refusals(self):
        """``pool_memory`` takes the device as PyTorch names it, leaves
        PyTorch's current device as it was, and refuses a device that is
        not a CUDA one of this machine by name."""
        before = torch.cuda.current_device()
        used, peak = coda_rs.pool_memory(0)
        self.assertTrue(0 <= used <= peak, (used, peak))
        self.assertEqual(coda_rs.pool_memory("cuda:0")[0], coda_rs.pool_memory(torch.device("cuda", 0))[0])
        coda_rs.reset_pool_peak("cuda")
        self.assertEqual(torch.cuda.current_device(), before)
        for bad in ("cpu", torch.cuda.device_count(), "gpu0"):
            with self.assertRaises(coda_rs.ArgumentError) as e:
                coda_rs.pool_memory(bad)
            self.assertEqual(e.exception.argument, "device", str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
