#!/usr/bin/env python3
"""napkin_torch's torch-free parts: signatures read from emitted modules, sizes from shapes, the
pairing of forward and backward, napkin and nvcc command lines, cache keys, and (with the napkin
CLI) building a diagram's grad file and modules, cached; with nvcc, a CUDA library (built, not
run: no GPU needed). Runs in CI without torch:

    NAPKIN_BIN=build/cli/napkin python3 -m unittest discover -s python/tests -p 'test_unit.py' -v
"""
import ctypes
import os
import shutil
import sys
import tempfile
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(REPO / "python"))

from napkin_torch import build, fastpath, signature  # noqa: E402
from napkin_torch.signature import SignatureError  # noqa: E402

MODULE = '''
DIAGRAM = "blk"
_DECL = {
    "blk": (("b", (2,)), ("s", (8,)), ("h", (4,)), ("x", ("s",)), ("hb", ("h", "b")), ),
}
INPUTS = ("X", "W")
OUTPUTS = ("Y", "Y_lse")
AXES = {"X": ("b", "s", "h"), "W": ("h",), "T": ("b", "s"), "Y": ("b", "x", "h"), "Y_lse": ("b", "x")}
DTYPES = {"X": "bf16", "W": "fp32"}
OUT_DTYPES = {"Y": "bf16", "Y_lse": "fp32"}
'''


def sig(text=MODULE):
    return signature.parse_torch_module(text, "blk.py")


def napkin_bin():
    try:
        return build.find_napkin()
    except FileNotFoundError:
        return None


class SignatureTest(unittest.TestCase):
    def test_parse(self):
        s = sig()
        self.assertEqual(s.name, "blk")
        self.assertEqual(s.inputs, ("X", "W"))
        self.assertEqual(s.outputs, ("Y", "Y_lse"))
        self.assertEqual(s.axis_names, ("b", "s", "h", "x", "hb"))
        self.assertEqual(s.dtypes["W"], "fp32")
        self.assertEqual(s.axes["Y"], ("b", "x", "h"))
        self.assertTrue(s.is_derived("x"))
        self.assertFalse(s.is_derived("s"))

    def test_parse_errors(self):
        with self.assertRaisesRegex(SignatureError, r"no OUTPUTS"):
            sig(MODULE.replace('OUTPUTS = ("Y", "Y_lse")', ""))
        with self.assertRaisesRegex(SignatureError, r"blk.py:\d+: INPUTS is not a literal"):
            sig(MODULE.replace('INPUTS = ("X", "W")', "INPUTS = tuple(AXES)"))
        with self.assertRaisesRegex(SignatureError, "not a Python module"):
            sig("def (")
        with self.assertRaisesRegex(SignatureError, "array 'Y_lse' has no axes"):
            sig(MODULE.replace(', "Y_lse": ("b", "x")', ""))

    def test_sizes_from_shapes(self):
        s = sig()
        n = s.sizes({"X": (3, 5, 6), "W": (6,)})
        self.assertEqual(n, {"b": 3, "s": 5, "h": 6, "x": 5, "hb": 18})
        self.assertEqual(list(n), list(s.axis_names))  # declaration order: the CUDA sizes array
        self.assertEqual(s.settable(n), (("b", 3), ("s", 5), ("h", 6)))
        self.assertEqual(s.shape("Y", n), (3, 5, 6))
        self.assertEqual(s.shape("Y_lse", n), (3, 5))

    def test_sizes_default_to_declared(self):
        s = sig(MODULE.replace('"W": ("h",)', '"W": ("hb",)'))
        n = s.sizes({"X": (3, 5, 6), "W": (18,)})
        self.assertEqual(n["hb"], 18)
        t = sig(MODULE.replace('INPUTS = ("X", "W")', 'INPUTS = ("W",)'))
        self.assertEqual(t.sizes({"W": (7,)}), {"b": 2, "s": 8, "h": 7, "x": 8, "hb": 14})

    def test_size_errors(self):
        s = sig()
        with self.assertRaisesRegex(SignatureError, r"axis 'h' has size 6 from an earlier input and 7 in input 'W'"):
            s.sizes({"X": (3, 5, 6), "W": (7,)})
        with self.assertRaisesRegex(SignatureError, r"input 'X' has shape \[3, 5\], but its axes are \[b, s, h\]"):
            s.sizes({"X": (3, 5), "W": (6,)})
        with self.assertRaisesRegex(SignatureError, "input 'W' is missing"):
            s.sizes({"X": (3, 5, 6)})
        d = sig(MODULE.replace('"W": ("h",)', '"W": ("hb",)'))
        with self.assertRaisesRegex(SignatureError, "axis 'hb' is declared from other axes, size 18, but the inputs give it 17"):
            d.sizes({"X": (3, 5, 6), "W": (17,)})

    def test_storable(self):
        sig().check_storable()
        with self.assertRaisesRegex(SignatureError, r"not W \(fp8e4m3\)"):
            sig(MODULE.replace('"W": "fp32"', '"W": "fp8e4m3"')).check_storable()


def make(name, inputs, outputs, decl=(("a", (4,)),)):
    axes = {k: ("a",) for k in inputs + outputs}
    return signature.Signature(name, tuple(inputs), tuple(outputs), axes, {k: "bf16" for k in axes}, decl)


class PairTest(unittest.TestCase):
    def test_pair(self):
        orig = make("f", ["Q", "K"], ["O"])
        fwd = make("f_fwd", ["Q", "K"], ["O", "O_lse"])
        bwd = make("f_bwd", ["Q", "K", "dO", "O", "O_lse"], ["dQ", "dK"])
        p = signature.pair(orig, fwd, bwd)
        self.assertEqual(p.user_outputs, ("O",))
        self.assertEqual(p.saved, ("O_lse",))
        self.assertEqual(p.cotangent, {"dO": "O"})
        self.assertEqual(p.from_forward, {"Q": "Q", "K": "K", "O": "O", "O_lse": "O_lse"})
        self.assertEqual(p.grads, {"dQ": "Q", "dK": "K"})
        self.assertEqual(p.wrt, ("Q", "K"))

    def test_pair_errors(self):
        orig = make("f", ["Q"], ["O"])
        with self.assertRaisesRegex(SignatureError, "has inputs"):
            signature.pair(orig, make("f_fwd", ["K"], ["O"]), make("f_bwd", ["dO"], ["dK"]))
        with self.assertRaisesRegex(SignatureError, "do not start with"):
            signature.pair(orig, make("f_fwd", ["Q"], ["P", "O"]), make("f_bwd", ["dO"], ["dQ"]))
        with self.assertRaisesRegex(SignatureError, "input 'Z' is neither"):
            signature.pair(orig, make("f_fwd", ["Q"], ["O"]), make("f_bwd", ["Z"], ["dQ"]))
        with self.assertRaisesRegex(SignatureError, "output 'dZ' is not d<input>"):
            signature.pair(orig, make("f_fwd", ["Q"], ["O"]), make("f_bwd", ["dO"], ["dZ"]))
        with self.assertRaisesRegex(SignatureError, "axis 'a' is declared differently"):
            signature.pair(orig, make("f_fwd", ["Q"], ["O"]), make("f_bwd", ["dO"], ["dQ"], (("a", (8,)),)))


ENTRY = """
  static Args make_args(const void* const* in, void* const* out, const int64_t* sizes, void* workspace) {
    Args a{};
    a.N_t = sizes[0];
    a.N_x2 = sizes[1];
    if (in) a.X = static_cast<const __nv_bfloat16*>(in[0]);
    if (in) a.S = static_cast<const float*>(in[1]);
    if (out) a.napkin_copy_of_X = static_cast<__half*>(out[0]);
    bind_workspace(a, workspace);
    return a;
  }
"""


class EntryPointTest(unittest.TestCase):
    def test_layout(self):
        axes, ins, outs = build.entry_point_layout(ENTRY)
        self.assertEqual(axes, ["t", "x2"])
        self.assertEqual(ins, [("X", "__nv_bfloat16"), ("S", "float")])
        self.assertEqual(outs, [("X", "__half")])
        with self.assertRaisesRegex(build.BuildError, "0 make_args"):
            build.entry_point_layout("int main() {}")

    def test_check(self):
        s = signature.Signature("f", ("X", "S"), ("X",), {"X": ("t",), "S": ("x2",)}, {"X": "bf16", "S": "fp32"},
                                (("t", (4,)), ("x2", ("t",))))
        with self.assertRaisesRegex(build.BuildError, "takes sizes"):  # the output is fp16 in the .cu
            build.check_entry_point(ENTRY, s)
        build.check_entry_point(ENTRY.replace("__half", "__nv_bfloat16"), s)


class CommandTest(unittest.TestCase):
    def test_nvcc(self):
        cmd = build.nvcc_command("/cuda/bin/nvcc", "sm_90a", "k.cu", "k.so")
        self.assertEqual(cmd[0], "/cuda/bin/nvcc")
        self.assertIn("-gencode=arch=compute_90a,code=sm_90a", cmd)
        self.assertIn("-shared", cmd)
        self.assertEqual(cmd[-3:], ["-o", "k.so", "k.cu"])
        self.assertEqual(build.gencode("sm_80"), "-gencode=arch=compute_80,code=sm_80")
        with self.assertRaises(ValueError):
            build.gencode("compute_90")

    def test_grad(self):
        cmd = build.grad_command("napkin", "a.napkin", "g.napkin", diagram="att", wrt=["Q", "K"], save=["S"])
        self.assertEqual(cmd, ["napkin", "grad", "a.napkin", "-o", "g.napkin", "--diagram", "att", "--wrt", "Q,K", "--save", "S"])
        cmd = build.grad_command("napkin", "a.napkin", "g.napkin", memory_budget=8e9, hw="h200")
        self.assertEqual(cmd[-4:], ["--memory-budget", "8000000000.0", "--hw", "h200"])
        with self.assertRaisesRegex(ValueError, "not both"):
            build.grad_command("napkin", "a", "g", save=["S"], memory_budget=1)

    def test_emit(self):
        cmd = build.emit_command("napkin", "g.napkin", "cuda", "k.cu", "att_bwd", "h100", (("q", 512), ("d", 128)))
        self.assertEqual(cmd, ["napkin", "emit", "g.napkin", "--target", "cuda", "-o", "k.cu", "--diagram", "att_bwd",
                               "--hw", "h100", "--set", "q=512", "--set", "d=128"])

    def test_arch(self):
        self.assertEqual(build.hardware_arch("h100"), "sm_90a")
        self.assertEqual(build.hardware_arch("a100"), "sm_80")
        self.assertEqual(build.hardware_arch(str(REPO / "hardware" / "rtx4090.toml")), "sm_89")
        with self.assertRaisesRegex(ValueError, "unknown hardware 'tpu'"):
            build.hardware_arch("tpu")

    def test_grad_names(self):
        self.assertEqual(build.grad_diagram_names("diagram att_fwd\n...\ndiagram att_bwd\n"), ("att_fwd", "att_bwd"))
        with self.assertRaises(ValueError):
            build.grad_diagram_names("diagram att_fwd\n")
        with self.assertRaises(ValueError):
            build.grad_diagram_names("diagram a_fwd\ndiagram b_bwd\n")

    def test_cache_key(self):
        k = build.cache_key("cuda", "abc", [("q", 512)], "sm_90a")
        self.assertEqual(k, build.cache_key("cuda", "abc", [("q", 512)], "sm_90a"))
        self.assertEqual(len(k), 20)
        self.assertNotEqual(k, build.cache_key("cuda", "abc", [("q", 1024)], "sm_90a"))
        self.assertNotEqual(k, build.cache_key("cuda", "abc", [("q", 512)], "sm_80"))

    def test_cache_root(self):
        old = os.environ.get("NAPKIN_TORCH_CACHE")
        try:
            os.environ["NAPKIN_TORCH_CACHE"] = "/tmp/x"
            self.assertEqual(build.cache_root(), Path("/tmp/x"))
            del os.environ["NAPKIN_TORCH_CACHE"]
            self.assertEqual(build.cache_root(), Path.home() / ".cache" / "napkin_torch")
        finally:
            if old is not None:
                os.environ["NAPKIN_TORCH_CACHE"] = old

    def test_run_error(self):
        with self.assertRaisesRegex(build.BuildError, r"false failed \(exit 1\)"):
            build.run(["false"], "false")


@unittest.skipIf(napkin_bin() is None, "no napkin CLI (set NAPKIN_BIN)")
class FastPathTest(unittest.TestCase):
    """The C part's build (fastpath.py) without torch: its command line and its off switch."""

    def test_compile_command(self):
        cmd = fastpath.compile_command("g++", "/src/fastpath.cpp", "/out/m.so", ["/t/include", "/py"], ["/t/lib"],
                                       ['PYBIND11_COMPILER_TYPE="_gcc"', "_GLIBCXX_USE_CXX11_ABI=1"])
        self.assertEqual(cmd[:len(fastpath.CXX_FLAGS) + 1], ["g++", *fastpath.CXX_FLAGS])
        self.assertIn('-DPYBIND11_COMPILER_TYPE="_gcc"', cmd)  # one argument, quotes kept: no shell
        self.assertEqual(cmd[cmd.index("-isystem") + 1], "/t/include")
        self.assertLess(cmd.index("/src/fastpath.cpp"), cmd.index("-L/t/lib"))  # libraries after the source
        self.assertEqual(cmd[cmd.index("-o") + 1], "/out/m.so")
        self.assertIn("-Wl,-rpath,/t/lib", cmd)
        self.assertEqual(cmd[-len(fastpath.LIBRARIES):], [f"-l{x}" for x in fastpath.LIBRARIES])
        self.assertTrue(fastpath.SOURCE.is_file())

    def test_turned_off(self):
        saved = dict(fastpath._state)
        old = os.environ.get("NAPKIN_TORCH_FASTPATH")
        os.environ["NAPKIN_TORCH_FASTPATH"] = "0"
        fastpath._state.update(module=None, tried=False, reason=None)
        try:
            self.assertIsNone(fastpath.module())
            self.assertIn("NAPKIN_TORCH_FASTPATH=0", fastpath.reason())
        finally:
            fastpath._state.update(saved)
            if old is None:
                del os.environ["NAPKIN_TORCH_FASTPATH"]
            else:
                os.environ["NAPKIN_TORCH_FASTPATH"] = old


class BuildTest(unittest.TestCase):
    """With the napkin CLI: grad files, modules and signatures of bundled diagrams, and the cache."""

    def setUp(self):
        self.cache = tempfile.mkdtemp(prefix="napkin_torch_unit.")

    def tearDown(self):
        shutil.rmtree(self.cache, ignore_errors=True)

    def load(self, name, **kw):
        return build.DiagramBuild(REPO / "diagrams" / "library" / name, cache=self.cache, **kw)

    def test_attention(self):
        b = self.load("attention.napkin")
        p = signature.pair(b.signatures["orig"], b.signatures["fwd"], b.signatures["bwd"])
        self.assertEqual((b.fwd_name, b.bwd_name), ("attention_fwd", "attention_bwd"))
        self.assertEqual(p.user_outputs, ("O",))
        self.assertIn("P_lse", p.saved)
        self.assertEqual(p.cotangent, {"dO": "O"})
        self.assertEqual(p.wrt, ("Q", "K", "V"))
        self.assertEqual(b.signatures["fwd"].dtypes["P_lse"], "fp32")
        self.assertEqual(b.arch, "sm_90a")

    def test_gqa_sizes(self):
        b = self.load("gqa_attention.napkin")
        fwd = b.signatures["fwd"]
        n = fwd.sizes({"Q": (1, 2, 4, 64, 128), "K": (1, 2, 96, 128), "V": (1, 2, 96, 128)})
        self.assertEqual(fwd.settable(n), (("b", 1), ("g", 2), ("r", 4), ("q", 64), ("x", 96), ("d", 128)))
        self.assertEqual(fwd.shape("O", n), (1, 2, 4, 64, 128))
        with self.assertRaisesRegex(SignatureError, "axis 'g'"):
            fwd.sizes({"Q": (1, 2, 4, 64, 128), "K": (1, 8, 96, 128), "V": (1, 8, 96, 128)})

    def test_transformer_block_derived_axis(self):
        b = self.load("transformer_block.napkin")
        fwd = b.signatures["fwd"]
        derived = [a for a in fwd.axis_names if fwd.is_derived(a)]
        self.assertEqual(len(derived), 1)  # the attention call's key axis, declared = s
        shapes = {k: tuple({"b": 1, "s": 64, "m": 256, "g": 2, "r": 2, "d": 64, "f": 512}[a] for a in fwd.axes[k]) for k in fwd.inputs}
        n = fwd.sizes(shapes)
        self.assertEqual(n[derived[0]], 64)
        self.assertNotIn(derived[0], dict(fwd.settable(n)))
        self.assertEqual(len(b.signatures["bwd"].outputs), 10)

    def test_wrt(self):
        b = self.load("mlp_swiglu.napkin", wrt=["X", "W2"])
        self.assertEqual(b.signatures["bwd"].outputs, ("dX", "dW2"))

    def test_cache_reused(self):
        a = self.load("rmsnorm.napkin")
        stamp = (a.dir / "fwd.py").stat().st_mtime_ns
        b = self.load("rmsnorm.napkin")
        self.assertEqual(a.dir, b.dir)
        self.assertEqual((b.dir / "fwd.py").stat().st_mtime_ns, stamp)  # not emitted again
        c = self.load("rmsnorm.napkin", hw="a100")
        self.assertNotEqual(c.dir, a.dir)
        self.assertEqual(c.arch, "sm_80")

    def test_bad_diagram(self):
        bad = Path(self.cache) / "bad.napkin"
        bad.write_text("diagram bad\naxis a = 4\nin X[a] : bf16\nY[a] = X +\nout Y : bf16\n")
        with self.assertRaisesRegex(build.BuildError, r"bad.napkin:4:\d+: error"):
            build.DiagramBuild(bad, cache=self.cache)

    def test_cuda_library(self):
        try:
            build.find_nvcc()
        except FileNotFoundError as e:
            self.skipTest(str(e))
        b = self.load("rmsnorm.napkin")
        lib = b.cuda_library("bwd", (("t", 48), ("m", 96)))
        self.assertTrue(lib.is_file())
        text = (lib.parent / "kernel.cu").read_text()
        self.assertIn("rmsnorm_layer_bwd", text)
        axes, ins, outs = build.entry_point_layout(text)
        self.assertEqual(axes, ["t", "m"])
        self.assertEqual(ins, [("X", "__nv_bfloat16"), ("W", "__nv_bfloat16"), ("dY", "__nv_bfloat16"), ("Y_rstd", "float")])
        self.assertEqual(outs, [("dX", "__nv_bfloat16"), ("dW", "__nv_bfloat16")])
        build.check_entry_point(text, b.signatures["bwd"])
        with self.assertRaisesRegex(build.BuildError, "its PyTorch module says"):
            build.check_entry_point(text, b.signatures["fwd"])
        so = ctypes.CDLL(str(lib))  # loads without a GPU: nothing runs
        self.assertGreater(so.napkin_kernel_count(), 0)
        so.napkin_workspace_bytes.restype = ctypes.c_size_t
        so.napkin_workspace_bytes(ctypes.byref((ctypes.c_int64 * 2)(48, 96)))
        stamp = lib.stat().st_mtime_ns
        self.assertEqual(b.cuda_library("bwd", (("t", 48), ("m", 96))), lib)
        self.assertEqual(lib.stat().st_mtime_ns, stamp)  # cached
        self.assertNotEqual(b.library_dir("bwd", (("t", 64), ("m", 96)))[0], lib.parent)  # other sizes: another build


if __name__ == "__main__":
    unittest.main(verbosity=2)
