"""Diagrams, sizes and the gradient check shared by test_cpu.py and test_gpu.py (needs torch).

check_gradients(op, sizes, device): napkin_torch's outputs and gradients against torch autograd
of the same diagram computed by plain PyTorch ops in fp32 (op.reference: the module `napkin emit
--target torch` wrote), on the same inputs (rounded to the declared dtypes), with one random
cotangent per output. The figure is max|err| / max|ref| per array.
"""
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))

import napkin_torch  # noqa: E402

TOLERANCE = 2e-2  # max|err| / max|ref|, against an fp32 reference (issue 16: bf16 tolerance)

LIB = os.path.join(REPO, "diagrams", "library")

# name -> (file, sizes for CPU tests, sizes for GPU tests). Axis names as in the diagram.
CASES = {
    "attention": ("attention.napkin", dict(b=2, h=2, q=16, x=24, d=8), dict(b=2, h=4, q=512, x=512, d=128)),
    "causal_attention": ("causal_attention.napkin", dict(b=1, h=2, q=20, x=20, d=8), dict(b=2, h=4, q=512, x=512, d=128)),
    "gqa_attention": ("gqa_attention.napkin", dict(b=1, g=2, r=2, q=16, x=16, d=8), dict(b=1, g=2, r=4, q=512, x=512, d=128)),
    "gqa_attention_bshd": ("gqa_attention_bshd.napkin", dict(b=2, g=2, r=2, q=12, x=12, d=8), dict(b=2, g=2, r=3, q=333, x=333, d=128)),
    "mlp_swiglu": ("mlp_swiglu.napkin", dict(t=16, m=32, f=48), dict(t=512, m=512, f=1536)),
    "rmsnorm": ("rmsnorm.napkin", dict(t=16, m=64), dict(t=1024, m=1024)),
    "layernorm": ("layernorm.napkin", dict(t=16, m=64), dict(t=1024, m=1024)),
    "transformer_block": ("transformer_block.napkin", dict(b=1, s=16, m=32, g=2, r=2, d=8, f=48),
                          dict(b=1, s=256, m=512, g=2, r=2, d=128, f=1024)),
}


def load(name, napkin=None, hw="h100"):
    """The Operator of CASES[name]."""
    return napkin_torch.load(os.path.join(LIB, CASES[name][0]), hw=hw, napkin=napkin)


def make_inputs(op, sizes, device, seed=0):
    """fp32 tensors, one per input of op at `sizes`, holding values of the declared dtypes: standard
    normal times 1/sqrt(fan-in) (the emitted module's INPUT_FAN_IN), norm weights around 1."""
    mod = op.module("orig")
    g = torch.Generator().manual_seed(seed)
    out = []
    for name in op.inputs:
        shape = tuple(sizes[a] for a in mod.AXES[name])
        fan = 1
        for f in getattr(mod, "INPUT_FAN_IN", {}).get(name, ()):
            fan *= sizes[f] if isinstance(f, str) else f
        t = torch.randn(shape, generator=g) * fan ** -0.5
        if len(shape) == 1:  # a norm's weight or bias
            t = 1 + 0.1 * t if name.startswith(("W", "norm")) else 0.1 * t
        out.append(t.to(napkin_torch.ops.torch_dtype(op.dtypes[name])).float().to(device))
    return out


def rel(got, want):
    """max|got - want| / max|want| in fp32 (0 when both are zero)."""
    got, want = got.detach().float(), want.detach().float()
    top = want.abs().max().item()
    err = (got - want).abs().max().item()
    return err / top if top > 0 else err


def run_grads(fn, inputs, cotangents):
    """Outputs of fn(*leaves) and the gradients of sum(out * cotangent) w.r.t. each input."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    out = out if isinstance(out, tuple) else (out,)
    loss = sum((o.float() * c).sum() for o, c in zip(out, cotangents))
    loss.backward()
    return [o.detach() for o in out], [leaf.grad for leaf in leaves]


def check_gradients(op, sizes, device, seed=0, fn=None):
    """Rows (array, max|err|/max|ref|) of op's outputs and gradients against op.reference's, and
    the seconds napkin's forward and backward took (first call: builds included).
    fn: what to call instead of op (e.g. a torch.compile'd op)."""
    inputs = make_inputs(op, sizes, device, seed)
    with torch.no_grad():
        shapes = op.reference(*inputs)
    shapes = shapes if isinstance(shapes, tuple) else (shapes,)
    g = torch.Generator().manual_seed(seed + 1)
    cot = [torch.randn(tuple(o.shape), generator=g).to(device) for o in shapes]
    ref_out, ref_grads = run_grads(lambda *a: op.reference(*a), inputs, cot)
    t0 = time.time()
    got_out, got_grads = run_grads(fn or op, inputs, cot)
    if device != "cpu":
        torch.cuda.synchronize()
    seconds = time.time() - t0
    rows = [(name, rel(a, b)) for name, a, b in zip(op.outputs, got_out, ref_out)]
    for name, a, b in zip(op.inputs, got_grads, ref_grads):
        if name in op.wrt:
            rows.append(("d" + name, rel(a, b) if a is not None else float("inf")))
    return rows, seconds


class Runner:
    """Runs named checks, prints one line each, and the closing 'N passed, N failed, N skipped'."""

    def __init__(self):
        self.passed, self.failed, self.skipped = 0, 0, 0

    def check(self, name, fn):
        try:
            msg = fn()
        except SkipCheck as e:
            self.skipped += 1
            print(f"SKIP {name}: {e}", flush=True)
            return
        except Exception as e:  # reported, and the other checks still run
            self.failed += 1
            import traceback
            traceback.print_exc()
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            return
        self.passed += 1
        print(f"ok   {name}" + (f": {msg}" if msg else ""), flush=True)

    def finish(self):
        print(f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped")
        if self.failed:
            return 1
        return 0 if self.passed else 77


class SkipCheck(Exception):
    """A check that cannot run here (reported as skipped, never as passed)."""


def assert_rows(rows, tol=TOLERANCE):
    """Raises AssertionError naming each row over `tol`; returns the rows as text."""
    text = ", ".join(f"{n} {e:.2e}" for n, e in rows)
    bad = [n for n, e in rows if not e <= tol]
    if bad:
        raise AssertionError(f"over {tol:g}: {', '.join(bad)} ({text})")
    return text
