#!/usr/bin/env python3
"""napkin_torch on CPU tensors (no GPU): each bundled diagram's operator, whose backward is the
diagram `napkin grad` wrote run by its emitted PyTorch module, against torch autograd of the
forward diagram's module in fp32; bad inputs; and, with torch >= 2.4, the custom operators'
registration (torch.library.opcheck) and torch.compile(fullgraph=True).

    python3 python/tests/test_cpu.py [--napkin build/cli/napkin] [--part grad|compile|all]

Exit status: 0 when every check passed, 1 when one failed, 77 (CTest's SKIP_RETURN_CODE) when
torch is missing or no check could run (e.g. --part compile with torch < 2.4).
"""
import argparse
import importlib
import os
import sys
import tempfile

try:
    import torch
except ImportError:
    print("SKIP: torch is not installed for", sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
from cases import CASES, Runner, SkipCheck, assert_rows, check_gradients  # noqa: E402

import napkin_torch  # noqa: E402
from napkin_torch.ops import _HAS_CUSTOM_OP  # noqa: E402


def grad_checks(r, napkin):
    for name, (_, sizes, _) in CASES.items():
        def one(name=name, sizes=sizes):
            op = cases.load(name, napkin)
            rows, _ = check_gradients(op, sizes, "cpu")
            return f"{op.name} {sizes}: " + assert_rows(rows)
        r.check(f"grad.{name}", one)

    def wrt_subset():
        op = napkin_torch.load(os.path.join(cases.LIB, "attention.napkin"), wrt=["Q", "V"], napkin=napkin)
        assert op.wrt == ("Q", "V"), op.wrt
        Q, K, V = [t.requires_grad_() for t in cases.make_inputs(op, CASES["attention"][1], "cpu")]
        op(Q, K, V).float().sum().backward()
        assert Q.grad is not None and V.grad is not None and K.grad is None, "K has a gradient though not in wrt"
        rows, _ = check_gradients(op, CASES["attention"][1], "cpu")
        return assert_rows(rows)
    r.check("grad.wrt_subset", wrt_subset)

    def unused_output_and_dtypes():
        op = cases.load("layernorm", napkin)
        X = cases.make_inputs(op, dict(t=4, m=16), "cpu")[0].requires_grad_()
        W, B = torch.ones(16), torch.zeros(16)
        Y = op(X, W, B)
        assert Y.dtype == torch.bfloat16 and Y.shape == (4, 16), (Y.dtype, Y.shape)
        Y.float().sum().backward()
        assert X.grad.dtype == torch.float32 and X.grad.shape == X.shape, (X.grad.dtype, X.grad.shape)
        # d/dX of sum(layernorm(X) * 1 + 0) is 0 up to rounding: the centred, scaled rows sum to 0.
        assert X.grad.abs().max().item() < 0.05, X.grad.abs().max()
        return f"dX max {X.grad.abs().max().item():.1e}"
    r.check("grad.dtypes", unused_output_and_dtypes)


def error_checks(r, napkin):
    op = cases.load("attention", napkin)
    Q, K, V = cases.make_inputs(op, CASES["attention"][1], "cpu")

    def expect(exc, text, fn):
        try:
            fn()
        except exc as e:
            assert text in str(e), f"message '{e}' lacks '{text}'"
            return str(e)
        raise AssertionError(f"no {exc.__name__}")

    r.check("errors.count", lambda: expect(ValueError, "takes 3 tensors", lambda: op(Q, K)))
    r.check("errors.size", lambda: expect(ValueError, "axis 'd'", lambda: op(Q, K, V[..., :4])))
    r.check("errors.rank", lambda: expect(ValueError, "input 'K' has shape", lambda: op(Q, K[0], V)))
    r.check("errors.type", lambda: expect(TypeError, "not a torch.Tensor", lambda: op(Q, K, 3.0)))
    r.check("errors.no_file", lambda: expect(FileNotFoundError, "no diagram file",
                                             lambda: napkin_torch.load("/nonexistent.napkin", napkin=napkin)))

    def bad_diagram():
        with tempfile.NamedTemporaryFile("w", suffix=".napkin", delete=False) as f:
            f.write("diagram bad\naxis a = 4\nin X[a] : bf16\nY[a] = nosuchop(X)\nout Y : bf16\n")
        try:
            return expect(napkin_torch.BuildError, "napkin grad failed", lambda: napkin_torch.load(f.name, napkin=napkin))
        finally:
            os.unlink(f.name)
    r.check("errors.bad_diagram", bad_diagram)


def compile_checks(r, napkin):
    def need_custom_op():
        if not _HAS_CUSTOM_OP:
            raise SkipCheck(f"torch {torch.__version__} has no torch.library.custom_op (2.4 or later)")

    for name in ("rmsnorm", "attention", "gqa_attention", "mlp_swiglu"):
        def opcheck(name=name):
            need_custom_op()
            op = cases.load(name, napkin)
            sizes = CASES[name][1]
            args = [t.to(napkin_torch.ops.torch_dtype(op.dtypes[n])) for n, t in zip(op.inputs, cases.make_inputs(op, sizes, "cpu"))]
            args = [t.requires_grad_() for t in args]
            torch.library.opcheck(op.fwd_op, args)
            return f"{op.fwd_op} passes torch.library.opcheck"
        r.check(f"compile.opcheck.{name}", opcheck)

        def compiled(name=name):
            need_custom_op()
            importlib.import_module("torch._dynamo").reset()
            op = cases.load(name, napkin)
            fn = torch.compile(lambda *a: op(*a), fullgraph=True)  # fullgraph: a graph break raises
            rows, _ = check_gradients(op, CASES[name][1], "cpu", fn=fn)
            return "torch.compile(fullgraph=True): " + assert_rows(rows)
        r.check(f"compile.fullgraph.{name}", compiled)

    def dynamic_shapes():
        need_custom_op()
        importlib.import_module("torch._dynamo").reset()
        op = cases.load("rmsnorm", napkin)
        fn = torch.compile(lambda *a: op(*a), fullgraph=True, dynamic=True)
        for t in (8, 12):
            rows, _ = check_gradients(op, dict(t=t, m=32), "cpu", fn=fn)
            assert_rows(rows)
        return "t = 8 and 12 through one dynamic graph"
    r.check("compile.dynamic", dynamic_shapes)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--napkin", help="napkin CLI (default: $NAPKIN_BIN, PATH, build/cli/napkin)")
    ap.add_argument("--part", choices=("grad", "compile", "all"), default="all")
    args = ap.parse_args()
    if "NAPKIN_TORCH_CACHE" not in os.environ:
        os.environ["NAPKIN_TORCH_CACHE"] = tempfile.mkdtemp(prefix="napkin_torch_test.")
    print(f"torch {torch.__version__} ({'custom ops' if _HAS_CUSTOM_OP else 'no custom_op: autograd.Function fallback'}), "
          f"napkin {napkin_torch.find_napkin(args.napkin)}, cache {os.environ['NAPKIN_TORCH_CACHE']}")
    torch.manual_seed(0)
    r = Runner()
    if args.part in ("grad", "all"):
        grad_checks(r, args.napkin)
        error_checks(r, args.napkin)
    if args.part in ("compile", "all"):
        compile_checks(r, args.napkin)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
