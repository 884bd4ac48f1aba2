"""What CI checks of the wheel without a GPU or PyTorch: it imports, lists
its programs and their interfaces, and refuses bad arguments by name before
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

    def test_unknown_program(self):
        with self.assertRaises(coda_rs.ArgumentError) as e:
            coda_rs.program_info("no_such_program")
        self.assertEqual(e.exception.argument, "program")
        self.assertIn("linear_residual_rms_partial", str(e.exception))


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

    def test_map_program_given_operands(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("a", "is a map program", program="rms_input", a=x, b=x, x=x, gamma=x)

    def test_not_a_tensor(self):
        x = np.zeros((4, 8), np.float32)
        self.refused("a", "is not a DLPack tensor", a=[[1.0]], b=x, residual=x, gamma=x)


if __name__ == "__main__":
    unittest.main()
