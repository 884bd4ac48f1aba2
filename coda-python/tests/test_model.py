"""``coda_rs.model`` on an H100/H200 with PyTorch: a three-layer CodaLlama,
converted from a PlainLlama's state dict, gives the loss and the gradient
of every weight (mapped back to the standard names) within the project's
criterion against the PlainLlama in f64, the yardstick that model in bf16;
bitwise repeatable; its state dict maps back to the plain one bit for bit."""

import copy
import unittest

try:
    import torch

    GPU = torch.cuda.is_available()
except ImportError:  # CI installs no torch: this file is for the GPU machine
    GPU = False

if GPU:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from coda_rs import ArgumentError
    from coda_rs.model import CodaLlama, LlamaConfig, PlainLlama
    from test_gpu import criterion


@unittest.skipUnless(GPU, "needs a CUDA GPU and PyTorch")
class Model(unittest.TestCase):
    def setUp(self):
        self.c = c = LlamaConfig(vocab=1000, hidden=256, ffn=512, layers=3, heads=2, kv_heads=1, head_dim=128)
        torch.manual_seed(5)
        self.plain = PlainLlama(c, device="cuda")
        with torch.no_grad():  # norms away from 1, larger weights: gradients of every size
            for p in self.plain.parameters():
                p.copy_(p.float().uniform_(0.5, 1.5) if p.dim() == 1 else p.float() * 3)
        g = torch.Generator(device="cuda").manual_seed(6)
        # Two sequences of 160 (320 tokens, ragged against the tiles and the chunks of 256).
        self.tokens = torch.randint(0, c.vocab, (2, 160), generator=g, device="cuda")
        self.targets = torch.randint(0, c.vocab, (2, 160), generator=g, device="cuda")
        self.targets[0, :7] = -100

    def grads(self, model):
        for p in model.parameters():
            p.grad = None
        # PyTorch's math attention: its fused ones' backward is not bitwise repeatable.
        with sdpa_kernel(SDPBackend.MATH):
            loss = model(self.tokens, self.targets)
            loss.backward()
        named = {n: p.grad for n, p in model.named_parameters()}
        return loss.detach(), (model.hf_state_dict(named) if isinstance(model, CodaLlama) else named)

    def test_loss_and_every_gradient_against_f64(self):
        coda = CodaLlama.from_state_dict(self.c, self.plain.state_dict(), device="cuda", chunk_rows=256)
        loss, grads = self.grads(coda)
        loss2, grads2 = self.grads(coda)
        exact_loss, exact = self.grads(copy.deepcopy(self.plain).double())
        bf16_loss, bf16 = self.grads(self.plain)
        self.assertEqual(sorted(grads), sorted(exact))
        criterion(self, "loss", loss, exact_loss, bf16_loss)
        self.assertTrue(torch.equal(loss, loss2), "loss differs between two runs")
        for name in sorted(exact):
            self.assertEqual(grads[name].dtype, torch.bfloat16, name)
            self.assertTrue(torch.equal(grads[name], grads2[name]), f"{name} differs between two runs")
            criterion(self, name, grads[name], exact[name], bf16[name])

    def test_state_dict_maps_back_bit_for_bit(self):
        coda = CodaLlama.from_state_dict(self.c, self.plain.state_dict(), device="cuda")
        back = coda.hf_state_dict()
        mine = self.plain.state_dict()
        self.assertEqual(sorted(back), sorted(mine))
        for name, t in mine.items():
            self.assertTrue(torch.equal(back[name].cuda(), t), name)

    def test_refusals_name_their_argument(self):
        sd = self.plain.state_dict()
        del sd["model.layers.2.mlp.up_proj.weight"]
        with self.assertRaises(ArgumentError) as e:
            CodaLlama.from_state_dict(self.c, sd, device="cuda")
        self.assertEqual(e.exception.argument, "state_dict")
        self.assertIn("model.layers.2.mlp.up_proj.weight", str(e.exception))
        with self.assertRaises(ArgumentError) as e:
            LlamaConfig(vocab=1001, hidden=256, ffn=512, layers=3, heads=2, kv_heads=1, head_dim=128)
        self.assertEqual(e.exception.argument, "vocab")


if __name__ == "__main__":
    unittest.main()
