"""What CI checks of the wheel without a GPU or PyTorch: it imports, was
built optimised, lists its programs and their interfaces, and refuses bad arguments by name before
anything needs a device (numpy arrays stand in for CPU tensors)."""

import unittest

import numpy as np

import coda_rs


class Interface(unittest.TestCase):
    def test_programs_and_their_parameters(self):
        names = coda_rs.programs()
        self.assertIn("coda-llama::linear_residual_rms_partial", names)
        info = coda_rs.program_info("linear_residual_rms_partial")
        self.assertEqual(info["name"], "coda-llama::linear_residual_rms_partial")
        self.assertFalse(info["map"])
        self.assertEqual(info["b_layout"], "nk")
        self.assertEqual(
            [(p["name"], p["dtype"], p["shape"], p["output"]) for p in info["params"]],
            [("residual", "bf16", "Tile", False), ("gamma", "bf16", "PerCol", False),
             ("h", "bf16", "Tile", True), ("u", "bf16", "Tile", True), ("sq", "f32", "RowPartial", True)],
        )
        self.assertEqual(info["configs"][0], "pp_128x128_c1x2")

    def test_built_optimised(self):
        # An unoptimised build runs the host code (launch checks, layout
        # converters) many times slower: maturin build --release.
        self.assertTrue(coda_rs._coda.OPTIMIZED, "the wheel was built without --release")

    def test_unknown_program(self):
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.program_info("no_such_program")
        self.assertEqual(e.exception.argument, "program")
        self.assertIn("linear_residual_rms_partial", str(e.exception))


class BlockConfigs(unittest.TestCase):
    """The block op's config rules and RoPE table, natively (``coda_rs.block``
    itself needs PyTorch: its tests are ``test_block.py``)."""

    LLAMA_8B = (4096, 14336, 32, 8, 128, 1e-5, 500000.0, False)

    def test_rope_frequencies_per_column(self):
        freq = coda_rs._coda.block_rope_freq(self.LLAMA_8B)
        self.assertEqual(len(freq), (32 + 2 * 8) * 128)
        # Each adjacent pair of a q or k head shares θ^(−2i/head_dim); v is not rotated.
        self.assertEqual(freq[0:4], [1.0, 1.0, np.float32(500000.0 ** (-2 / 128)), np.float32(500000.0 ** (-2 / 128))])
        self.assertEqual(freq[128], 1.0)
        self.assertEqual(set(freq[(32 + 8) * 128:]), {0.0})

    def test_bad_configs_name_the_field(self):
        fields = ["hidden", "ffn", "heads", "kv_heads", "head_dim", "eps", "rope_theta", "qk_norm"]
        for field, change in [("hidden", {"hidden": 4095}), ("ffn", {"ffn": 0}), ("kv_heads", {"kv_heads": 5}), ("head_dim", {"head_dim": 4}),
                              ("eps", {"eps": 0.0}), ("rope_theta", {"rope_theta": 1.0}), ("qk_norm", {"qk_norm": True, "head_dim": 64})]:
            c = dict(zip(fields, self.LLAMA_8B))
            c.update(change)
            with self.assertRaises(coda_rs.ArgumentError) as e:
                coda_rs._coda.block_check(tuple(c.values()))
            self.assertEqual(e.exception.argument, field, str(e.exception))


class HeadChunks(unittest.TestCase):
    """The rows of the LM-head op's chunk buffers, which it allocates with
    PyTorch, and their rules, natively (``coda_rs.head`` needs PyTorch)."""

    def test_rows_of_the_chunk_buffers(self):
        rows = coda_rs._coda.head_buffer_rows
        self.assertEqual(rows(1000, 256), 256)
        self.assertEqual(rows(8192, 4096), 4096)
        self.assertEqual(rows(700, 4096), 700)  # fewer tokens than a chunk: one chunk of them all

    def test_bad_chunks_name_the_argument(self):
        for argument, tokens, chunk_rows in [("chunk_rows", 1000, 100), ("chunk_rows", 1000, 0), ("tokens", 0, 256), ("tokens", 2**31, 256)]:
            with self.assertRaises(coda_rs.ArgumentError) as e:
                coda_rs._coda.head_buffer_rows(tokens, chunk_rows)
            self.assertEqual(e.exception.argument, argument, str(e.exception))


class Refusals(unittest.TestCase):
    """Each bad call raises ArgumentError naming the argument; none needs a GPU."""

    def refused(self, argument, fragment, **kwargs):
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.launch(kwargs.pop("program", "linear_residual_rms_partial"), **kwargs)
        self.assertIsInstance(e.exception, ValueError)
        self.assertEqual(e.exception.argument, argument, str(e.exception))
        self.assertIn(fragment, str(e.exception))

    def test_unknown_parameter(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("bias", "has no parameter `bias`", a=x, b=x, residual=x, gamma=x, bias=x)

    def test_missing_input(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("gamma", "input `gamma` (PerCol<bf16>) is missing", a=x, b=x, residual=x)

    def test_missing_operand(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("b", "pass `a` and `b`", a=x, residual=x, gamma=x)

    def test_cpu_tensor(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("a", "CODA needs CUDA tensors", a=x, b=x, residual=x, gamma=x)

    def test_unknown_program(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("program", "no program `nope`", program="nope", a=x, b=x)

    def test_a_parameter_may_be_named_program(self):
        # `program` is positional-only, so a keyword of that name is the DSL's.
        x = np.zeros((4, 8), np.float32)
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.launch("linear_residual_rms_partial", a=x, b=x, residual=x, gamma=x, program=x)
        self.assertEqual(e.exception.argument, "program")
        self.assertIn("has no parameter `program`", str(e.exception))

    def test_map_program_given_operands(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("a", "is a map program", program="rms_input", a=x, b=x, x=x, gamma=x)

    def test_not_a_tensor(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("a", "is not a DLPack tensor", a=[[1.0]], b=x, residual=x, gamma=x)

    def test_scalars_are_refused_where_f32_would_change_them(self):
        x = np.zeros((4, 8), np.float32)
        args = dict(program="linear_cross_entropy_softcap", a=x, b=x, r=x, target=x, inv_cap=1.0)
        self.refused("cap", "past f32's range", cap=1e39, **args)
        self.refused("cap", "would run as 0", cap=-1e-46, **args)
        self.refused("cap", "must be a number", cap=[30.0], **args)
        self.refused("a", "CODA needs CUDA tensors", cap=float("inf"), **args)  # inf passes as itself

    def test_a_producers_own_exceptions(self):
        # A producer that says it cannot export is refused by name (its error kept
        # as the cause); anything else it raises (here Ctrl-C) is not turned into one.
        def producer(error):
            class Producer:
                def __dlpack__(self, **kwargs):
                    raise error

                def __dlpack_device__(self):
                    raise error

            return Producer()

        x = np.zeros((4, 8), np.float32)
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.launch("linear_residual_rms_partial", a=producer(TypeError("no export")), b=x, residual=x, gamma=x)
        self.assertEqual(e.exception.argument, "a")
        self.assertIsInstance(e.exception.__cause__, TypeError)
        with self.assertRaises(KeyboardInterrupt):
            coda_rs.launch("linear_residual_rms_partial", a=producer(KeyboardInterrupt()), b=x, residual=x, gamma=x)


class Converters(unittest.TestCase):
    """Checkpoint layouts to the kernels' and back (numpy stands in for torch)."""

    def test_gate_up_rows_interleave_and_split(self):
        f, d = 3, 4
        gate = np.arange(f * d, dtype=np.float32).reshape(f, d)
        up = -gate - 1
        w = coda_rs.llama.gate_up_from_checkpoint(gate, up)
        self.assertEqual(w.shape, (2 * f, d))
        np.testing.assert_array_equal(w[0::2], gate)
        np.testing.assert_array_equal(w[1::2], up)
        g, u = coda_rs.llama.gate_up_to_checkpoint(w)
        np.testing.assert_array_equal(g, gate)
        np.testing.assert_array_equal(u, up)

    def test_qkv_pairs_become_adjacent_and_back(self):
        heads, kv, hd, d = 4, 2, 8, 3
        wq = np.arange(heads * hd * d, dtype=np.uint16).reshape(heads * hd, d)  # bf16 bits stand in
        wk = (1000 + np.arange(kv * hd * d)).astype(np.uint16).reshape(kv * hd, d)
        wv = (2000 + np.arange(kv * hd * d)).astype(np.uint16).reshape(kv * hd, d)
        w = coda_rs.llama.qkv_from_checkpoint(wq, wk, wv, heads, kv)
        self.assertEqual(w.shape, ((heads + 2 * kv) * hd, d))
        # Head 1 of q: its new rows (2i, 2i + 1) are the checkpoint's rows (i, i + hd/2).
        for i in range(hd // 2):
            np.testing.assert_array_equal(w[hd + 2 * i], wq[hd + i])
            np.testing.assert_array_equal(w[hd + 2 * i + 1], wq[hd + i + hd // 2])
        np.testing.assert_array_equal(w[(heads + kv) * hd:], wv)
        q, k, v = coda_rs.llama.qkv_to_checkpoint(w, heads, kv)
        for a, b in ((q, wq), (k, wk), (v, wv)):
            np.testing.assert_array_equal(a, b)

    def test_head_vectors_become_adjacent_and_back(self):
        hd = 8
        v = np.arange(hd, dtype=np.uint16)  # bf16 bits stand in
        w = coda_rs.llama.head_vector_from_checkpoint(v)
        # The same order as a head's rows of w_qkv: (2i, 2i + 1) ← (i, i + hd/2).
        np.testing.assert_array_equal(w, [0, 4, 1, 5, 2, 6, 3, 7])
        np.testing.assert_array_equal(coda_rs.llama.head_vector_to_checkpoint(w), v)

    def test_mismatched_weights_are_refused_by_name(self):
        gate = np.zeros((3, 4), np.float32)
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.llama.gate_up_from_checkpoint(gate, np.zeros((2, 4), np.float32))
        self.assertEqual(e.exception.argument, "up", str(e.exception))
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.llama.qkv_from_checkpoint(np.zeros((24, 3), np.float32), np.zeros((16, 3), np.float32),
                                              np.zeros((16, 3), np.float32), 4, 2)  # head_dim 6, wk needs 12 rows
        self.assertEqual(e.exception.argument, "wk", str(e.exception))

    def test_weights_of_another_dtype_shape_or_rank_are_refused_by_name(self):
        """Each converter refuses by name what it cannot take: weights of the
        same bytes but another dtype or shape (which a byte count alone would
        pass, reordering garbage), another rank or element size, head counts
        that do not split the rows."""
        llama = coda_rs.llama
        gate = np.zeros((3, 4), np.float16)
        cases = [
            ("up", lambda: llama.gate_up_from_checkpoint(gate, np.zeros((4, 3), np.int16)), "dtype"),
            ("up", lambda: llama.gate_up_from_checkpoint(gate, np.zeros((4, 3), np.float16)), "must be (3, 4)"),
            ("gate", lambda: llama.gate_up_from_checkpoint(np.zeros(12, np.float16), gate), "rank 2"),
            ("gate", lambda: llama.gate_up_from_checkpoint(np.zeros((3, 4), np.float64), gate), "2- or 4-byte"),
            ("w_gate_up", lambda: llama.gate_up_to_checkpoint(np.zeros((5, 4), np.float32)), "must be a multiple of 2 (gate and up"),
            ("heads", lambda: llama.qkv_from_checkpoint(gate, gate, gate, 0, 1), "≥ 1"),
            ("heads", lambda: llama.qkv_from_checkpoint(gate, gate, gate, 1.5, 1), "whole number"),
            ("kv_heads", lambda: llama.qkv_from_checkpoint(gate, gate, gate, 3, 2), "must divide heads"),
            ("wq", lambda: llama.qkv_from_checkpoint(np.zeros((10, 3), np.float32), np.zeros((5, 3), np.float32),
                                                      np.zeros((5, 3), np.float32), 4, 4), "must be a multiple of 4 (heads)"),
            ("wv", lambda: llama.qkv_from_checkpoint(np.zeros((8, 3), np.float32), np.zeros((4, 3), np.float32),
                                                      np.zeros((4, 3), np.float16), 4, 2), "dtype"),
            ("w_qkv", lambda: llama.qkv_to_checkpoint(np.zeros((10, 3), np.float32), 2, 1), "must be a multiple of 4 (heads + 2·kv_heads)"),
            ("v", lambda: llama.head_vector_from_checkpoint(np.zeros((2, 4), np.uint16)), "vector"),
        ]
        for name, call, rule in cases:
            with self.subTest(name=name, rule=rule), self.assertRaises(coda_rs.ArgumentError) as e:
                call()
            self.assertEqual(e.exception.argument, name, str(e.exception))
            self.assertIn(rule, str(e.exception))
        # numpy integers count as head counts.
        w = llama.qkv_from_checkpoint(np.zeros((8, 3), np.float32), np.zeros((4, 3), np.float32), np.zeros((4, 3), np.float32),
                                      np.int64(4), np.int32(2))
        self.assertEqual(w.shape, (16, 3))


class StateDicts(unittest.TestCase):
    """A whole model's weights, standard names to CODA's (blocks spanning
    two layers) and back (numpy stands in for torch)."""

    def setUp(self):
        layers, self.heads, self.kv, hd, d, f, v = 3, 2, 1, 4, 6, 5, 16
        rng = np.random.default_rng(1)
        shapes = {"model.embed_tokens.weight": (v, d), "model.norm.weight": (d,), "lm_head.weight": (v, d)}
        for i in range(layers):
            a = f"model.layers.{i}."
            shapes.update({a + "input_layernorm.weight": (d,), a + "post_attention_layernorm.weight": (d,),
                           a + "self_attn.q_proj.weight": (self.heads * hd, d), a + "self_attn.k_proj.weight": (self.kv * hd, d),
                           a + "self_attn.v_proj.weight": (self.kv * hd, d), a + "self_attn.o_proj.weight": (d, self.heads * hd),
                           a + "mlp.gate_proj.weight": (f, d), a + "mlp.up_proj.weight": (f, d), a + "mlp.down_proj.weight": (d, f)})
        self.sd = {k: rng.standard_normal(s).astype(np.float32) for k, s in shapes.items()}
        self.layers = layers

    def test_blocks_span_two_layers_and_map_back(self):
        coda = coda_rs.llama.coda_state_dict(self.sd, self.layers, self.heads, self.kv)
        self.assertEqual(sorted(k for k in coda if k.startswith("blocks.")),
                         sorted(f"blocks.{i}.{w}" for i in range(2) for w in ("wo", "gamma1", "w_gate_up", "w_down", "gamma2", "w_qkv")))
        # Block 1: layer 1's o_proj and MLP, layer 2's input norm and q/k/v.
        np.testing.assert_array_equal(coda["blocks.1.wo"], self.sd["model.layers.1.self_attn.o_proj.weight"])
        np.testing.assert_array_equal(coda["blocks.1.w_gate_up"][1::2], self.sd["model.layers.1.mlp.up_proj.weight"])
        np.testing.assert_array_equal(coda["blocks.1.gamma2"], self.sd["model.layers.2.input_layernorm.weight"])
        np.testing.assert_array_equal(coda["qkv0.gamma"], self.sd["model.layers.0.input_layernorm.weight"])
        np.testing.assert_array_equal(coda["last.w_down"], self.sd["model.layers.2.mlp.down_proj.weight"])
        np.testing.assert_array_equal(coda["head.w"], self.sd["lm_head.weight"])
        back = coda_rs.llama.hf_state_dict(coda, self.layers, self.heads, self.kv)
        self.assertEqual(sorted(back), sorted(self.sd))
        for k, w in self.sd.items():
            np.testing.assert_array_equal(back[k], w, k)

    def test_missing_and_extra_weights_are_refused(self):
        sd = dict(self.sd)
        del sd["model.layers.1.self_attn.k_proj.weight"]
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.llama.coda_state_dict(sd, self.layers, self.heads, self.kv)
        self.assertEqual(e.exception.argument, "state_dict")
        self.assertIn("model.layers.1.self_attn.k_proj.weight", str(e.exception))
        # A state dict of more layers than the model has.
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.llama.coda_state_dict(self.sd, 2, self.heads, self.kv)
        self.assertIn("model.layers.2.", str(e.exception))
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.llama.coda_state_dict(self.sd, 0, self.heads, self.kv)
        self.assertEqual(e.exception.argument, "layers")


if __name__ == "__main__":
    unittest.main()
