#!/usr/bin/env python3
"""napkin_torch on a GPU: for attention (plain, causal, GQA), the SwiGLU MLP, rmsnorm, layernorm
and the transformer block, napkin's forward and backward kernels (built with nvcc for the GPU's
arch) against torch autograd of the same diagram in fp32 (TF32 off), max|err| / max|ref| <= 2e-2
for the output and every gradient; torch.compile(fullgraph=True) around the operators; a
rebuild per distinct set of sizes; sizes that divide no tile. Prints each figure, the build
times, and forward+backward time of napkin's operator beside the eager PyTorch chain of the same
diagram (the emitted module, bf16) as information.

    python3 python/tests/test_gpu.py --napkin build/cli/napkin [--hw h100] [--only attention,rmsnorm] [--jobs 8]

Exit status 0 when every check passed, 1 when one failed, 77 without a CUDA device or torch.
"""
import argparse
import importlib
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

try:
    import torch
except ImportError:
    print("SKIP: torch is not installed for", sys.executable)
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases  # noqa: E402
from cases import CASES, Runner, SkipCheck, assert_rows, check_gradients, make_inputs  # noqa: E402

import napkin_torch  # noqa: E402
from napkin_torch.ops import _HAS_CUSTOM_OP  # noqa: E402


def detect_hw():
    """napkin hardware name of GPU 0 from its name (H100 -> h100, ...); SystemExit if unknown."""
    name = torch.cuda.get_device_name(0)
    for key, hw in (("H200", "h200"), ("H100", "h100"), ("A100", "a100"), ("B200", "b200"), ("4090", "rtx4090")):
        if key in name:
            return hw
    raise SystemExit(f"test_gpu.py: no napkin hardware description for '{name}'; pass --hw")


def fwd_bwd_ms(fn, inputs, runs=10):
    """Median milliseconds of fn(*inputs) plus backward of the sum of its outputs (CUDA events;
    wall clock on CPU)."""
    leaves = [t.detach().clone().requires_grad_(True) for t in inputs]

    def step():
        out = fn(*leaves)
        out = out if isinstance(out, tuple) else (out,)
        sum(o.float().sum() for o in out).backward()

    for _ in range(3):
        step()
    times = []
    for _ in range(runs):
        if inputs[0].device.type == "cpu":
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1e3)
            continue
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        step()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--napkin", help="napkin CLI (default: $NAPKIN_BIN, PATH, build/cli/napkin)")
    ap.add_argument("--nvcc", help="nvcc (default: $NAPKIN_NVCC, PATH, /usr/local/cuda/bin/nvcc)")
    ap.add_argument("--hw", help="napkin hardware (default: from the GPU's name)")
    ap.add_argument("--only", help="comma-separated case names: " + ",".join(CASES))
    ap.add_argument("--jobs", type=int, default=8, help="builds (napkin emit + nvcc) run at once")
    ap.add_argument("--no-timing", action="store_true", help="skip the forward+backward timings")
    ap.add_argument("--device", default="cuda", help="cuda; cpu runs this script's logic on napkin's emitted modules (a dry run)")
    args = ap.parse_args()
    dev = args.device
    if dev == "cpu":
        return run_checks(args, dev, args.hw or "h100")
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        return 77
    if "NAPKIN_TORCH_CACHE" not in os.environ:
        os.environ["NAPKIN_TORCH_CACHE"] = tempfile.mkdtemp(prefix="napkin_torch_gpu.")
    return run_checks(args, dev, args.hw or detect_hw())


def run_checks(args, dev, hw):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    names = args.only.split(",") if args.only else list(CASES)
    for n in names:
        if n not in CASES:
            raise SystemExit(f"test_gpu.py: no case '{n}' (cases: {', '.join(CASES)})")
    print(f"device {torch.cuda.get_device_name(0) if dev == 'cuda' else dev}, hw {hw}, torch {torch.__version__}, "
          f"napkin {napkin_torch.find_napkin(args.napkin)}, cache {os.environ['NAPKIN_TORCH_CACHE']}", flush=True)
    r = Runner()
    ops = {}

    def load(n):
        return napkin_torch.load(os.path.join(cases.LIB, CASES[n][0]), hw=hw, napkin=args.napkin, nvcc=args.nvcc)

    for n in names:
        r.check(f"load.{n}", lambda n=n: repr(ops.setdefault(n, load(n))))

    # Build every forward and backward at the test sizes in parallel (nvcc dominates).
    def prepare(n):
        t0 = time.time()
        paths = ops[n].prepare(*make_inputs(ops[n], CASES[n][2], "cpu"))
        return n, time.time() - t0, paths

    t0 = time.time()
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = {n: pool.submit(prepare, n) for n in names if n in ops}
    for n, fut in futures.items():
        r.check(f"build.{n}", lambda fut=fut: "%s: %.1f s (fwd and bwd emitted and compiled)" % fut.result()[:2])
    print(f"builds took {time.time() - t0:.1f} s in all", flush=True)

    for n in names:
        def grads(n=n):
            if n not in ops:
                raise SkipCheck("not loaded")
            rows, sec = check_gradients(ops[n], CASES[n][2], dev)
            msg = f"{CASES[n][2]}: " + assert_rows(rows)
            if not args.no_timing:
                op = ops[n]
                inputs = [t.to(napkin_torch.ops.torch_dtype(op.dtypes[k])) for k, t in zip(op.inputs, make_inputs(op, CASES[n][2], dev))]
                ms_napkin = fwd_bwd_ms(ops[n], inputs)
                ms_eager = fwd_bwd_ms(lambda *a, op=ops[n]: op.reference(*a, fp32=False), inputs)
                msg += f"; fwd+bwd {ms_napkin:.3f} ms napkin, {ms_eager:.3f} ms eager PyTorch (bf16), {ms_eager / ms_napkin:.2f}x"
            return msg
        r.check(f"grad.{n}", grads)

    def fast_road(n):
        """The C++ fast path (napkin_torch/fastpath.py) against the Python road: same outputs and
        gradients, and the second eager call at a shape takes it."""
        if dev != "cuda":
            raise SkipCheck("the fast path runs CUDA calls only")
        if n not in ops:
            raise SkipCheck("not loaded")
        from napkin_torch import fastpath
        if fastpath.module() is None:
            raise AssertionError(f"the C++ fast path did not build or load: {fastpath.reason()}")
        op = ops[n]
        inputs = [t.to(napkin_torch.ops.torch_dtype(op.dtypes[k])) for k, t in zip(op.inputs, make_inputs(op, CASES[n][2], dev, seed=3))]
        with torch.no_grad():
            shapes = op(*inputs)
        shapes = shapes if isinstance(shapes, tuple) else (shapes,)
        g = torch.Generator().manual_seed(4)
        cot = [torch.randn(tuple(o.shape), generator=g).to(dev) for o in shapes]

        def road(fast):
            kept = dict(op._fast)
            if not fast:
                op._fast.clear()
            before = op.fast_calls
            try:
                out, grads = cases.run_grads(op, inputs, cot)
            finally:
                op._fast.update(kept)
            return out, grads, op.fast_calls - before

        road(False)  # the Python road's backward makes the fast Op at these shapes
        py_out, py_grads, _ = road(False)
        fa_out, fa_grads, took = road(True)
        assert took == 1, f"the fast path ran {took} times for one eager call (expected 1)"
        rows = [(name, rel) for name, rel in zip(op.outputs, map(cases.rel, fa_out, py_out))]
        rows += [("d" + name, cases.rel(a, b)) for name, a, b in zip(op.inputs, fa_grads, py_grads) if name in op.wrt]
        same = sum(torch.equal(a, b) for a, b in zip(fa_out + [x for x in fa_grads if x is not None],
                                                      py_out + [x for x in py_grads if x is not None]))
        return f"fast path vs Python road ({same} of {len(rows)} arrays bit-identical): " + assert_rows(rows, tol=1e-2)

    for n in names:
        r.check(f"fastpath.{n}", lambda n=n: fast_road(n))

    def compiled(n):
        if not _HAS_CUSTOM_OP:
            raise SkipCheck(f"torch {torch.__version__} has no torch.library.custom_op")
        if n not in ops:
            raise SkipCheck("not loaded")
        importlib.import_module("torch._dynamo").reset()
        fn = torch.compile(lambda *a: ops[n](*a), fullgraph=True)
        rows, _ = check_gradients(ops[n], CASES[n][2], dev, fn=fn)
        return "torch.compile(fullgraph=True): " + assert_rows(rows)

    for n in ("attention", "transformer_block"):
        if n in names:
            r.check(f"compile.{n}", lambda n=n: compiled(n))

    def block_in_compiled_model():
        """napkin's rmsnorm and GQA attention between torch matmuls, compiled whole."""
        if not _HAS_CUSTOM_OP:
            raise SkipCheck(f"torch {torch.__version__} has no torch.library.custom_op")
        if "rmsnorm" not in ops or "gqa_attention" not in ops:
            raise SkipCheck("needs the rmsnorm and gqa_attention cases")
        norm, attn = ops["rmsnorm"], ops["gqa_attention"]
        b, s, m, g, rr, d = 1, 256, 512, 2, 4, 128
        gen = torch.Generator().manual_seed(5)
        x = torch.randn(b, s, m, generator=gen).to(dev, torch.bfloat16)
        wq = (torch.randn(m, g * rr * d, generator=gen) * m ** -0.5).to(dev, torch.bfloat16).requires_grad_()
        wkv = (torch.randn(m, 2 * g * d, generator=gen) * m ** -0.5).to(dev, torch.bfloat16).requires_grad_()
        wn = torch.ones(m, device=dev, dtype=torch.bfloat16, requires_grad=True)

        def f(x, wn, wq, wkv, use_napkin):
            h = norm(x.reshape(b * s, m), wn) if use_napkin else norm.reference(x.reshape(b * s, m).float(), wn.float())
            h = h.to(torch.bfloat16).reshape(b, s, m)
            q = (h @ wq).reshape(b, s, g, rr, d).permute(0, 2, 3, 1, 4)
            k, v = (h @ wkv).reshape(b, s, 2, g, d).permute(2, 0, 3, 1, 4)
            o = attn(q, k, v) if use_napkin else attn.reference(q.float(), k.float(), v.float())
            return o.float().square().mean()

        grads = []
        for use in (True, False):
            for t in (wn, wq, wkv):
                t.grad = None
            fn = torch.compile(f, fullgraph=True) if use else f
            fn(x, wn, wq, wkv, use).backward()
            grads.append([t.grad.float() for t in (wn, wq, wkv)])
        rows = [(n, cases.rel(a, b_)) for n, a, b_ in zip(("dnorm", "dWq", "dWkv"), *grads)]
        return "compiled model around napkin ops vs fp32 reference: " + assert_rows(rows)
    r.check("compile.model", block_in_compiled_model)

    def rebuild_per_shape():
        if "attention" not in ops:
            raise SkipCheck("needs the attention case")
        op = ops["attention"]
        before = len(op._libs)
        for q in (200, 384):  # 200: no tile divides it (predicated edges)
            rows, sec = check_gradients(op, dict(b=1, h=2, q=q, x=q, d=128), dev)
            assert_rows(rows)
        built = len(op._libs) - before
        if dev == "cpu":
            return "q = x = 200 and 384 correct (CPU: nothing built)"
        assert built == 4, f"{built} libraries built for 2 new shapes (fwd and bwd each): expected 4"
        return "q = x = 200 and 384: 4 more libraries, each correct"
    r.check("shapes.rebuild", rebuild_per_shape)
    return r.finish()


if __name__ == "__main__":
    sys.exit(main())
