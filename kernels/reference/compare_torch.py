#!/usr/bin/env python3
"""Loads a napkin-emitted kernel (a .cu built into a shared library) through its C entry point and
times it against PyTorch in one run, after checking that the outputs agree:
  attention: SDPA with the flash (FlashAttention-2) and cuDNN back ends, and naive attention;
  swiglu:    the eager chain silu(x @ W1) * (x @ W3) @ W2 (cuBLAS GEMMs plus element-wise kernels);
  layernorm: F.layer_norm, and the eager chain of its primitive operations;
  matmul:    torch.matmul (cuBLAS);
  fp8_gemm:  C = (A B^T) sa sb of fp8 A[i,k], B[j,k] (tests/kernels/gemm_fp8.napkin) against
             torch._scaled_mm (cuBLASLt fp8, per-tensor scales, bf16 out), checked element by
             element against fp32 of the dequantised inputs (fp8_gemm_tolerance);
  int8_gemm: C = (A B^T) sa sb of int8 A[i,k], B[j,k] (tests/kernels/gemm_int8.napkin) against
             torch._int_mm (cuBLASLt int8 -> int32) followed by the scale in fp32 and the cast to
             bf16 (the reference: the same output), and _int_mm alone, checked element by element
             against the exact product (int8_gemm_tolerance);
  generic:   any diagram: the module `napkin emit --target torch` wrote for it, run eagerly as
             emitted and through torch.compile (default mode), each output checked against the
             module in reference mode (fp32, TF32 off) on the same inputs.
Timing: CUDA events, each candidate warmed up, then --runs interleaved rounds (every candidate once a
round, the order rotating; median per candidate), inputs rotated over sets whose total exceeds
twice the L2; a GPU spin ahead of each timed call (spin_cycles), so the figures are GPU time, not the
host's issue time (before session 33 they included it: small kernels read slower). Usage (see tools/device/bench.sh):
  napkin emit diagrams/library/attention.napkin --target cuda --set b=4 ... -o att.cu
  nvcc -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o att.so att.cu
  python3 kernels/reference/compare_torch.py attention --so att.so --sizes 4,16,4096,4096,128 [--causal]
  napkin emit FILE --target torch --set ... -o mod.py   (and the .so as above, same --set)
  python3 kernels/reference/compare_torch.py generic --so x.so --module mod.py --sizes a=8192,b=256 [--scale W=0.02]
Generic inputs are seeded standard normal values (as `napkin eval` makes them; integers uniform over
their range) stored in each input's dtype, times each input's scale: 1/sqrt(fan-in) for an input
contracted with a computed array, 1 otherwise (the module's INPUT_FAN_IN at the run's sizes: the rule
napkin bench draws its inputs by, diagrams/input_scales.hpp), or --scale NAME=FACTOR where given;
--unit-scale draws every input at scale 1.
"""
import importlib.util
import time
import argparse
import ctypes
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


class Napkin:
    """The emitted file's C entry points (emit/cuda_emitter.hpp)."""

    def __init__(self, path):
        self.lib = ctypes.CDLL(path)
        self.lib.napkin_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.lib.napkin_workspace_bytes.argtypes = [ctypes.c_void_p]
        self.lib.napkin_workspace_bytes.restype = ctypes.c_size_t
        self.lib.napkin_last_error.restype = ctypes.c_char_p

    def runner(self, inputs, outputs, sizes):
        sz = (ctypes.c_int64 * len(sizes))(*sizes)
        ws = torch.empty(max(256, self.lib.napkin_workspace_bytes(sz)), dtype=torch.uint8, device="cuda")
        ins = (ctypes.c_void_p * len(inputs))(*[t.data_ptr() for t in inputs])
        outs = (ctypes.c_void_p * len(outputs))(*[t.data_ptr() for t in outputs])
        stream = torch.cuda.current_stream().cuda_stream

        def run(ins=ins):
            rc = self.lib.napkin_run(ins, outs, sz, ctypes.c_void_p(ws.data_ptr()), ctypes.c_void_p(stream))
            if rc != 0:
                raise RuntimeError(self.lib.napkin_last_error().decode())

        def with_inputs(tensors):
            return (ctypes.c_void_p * len(tensors))(*[t.data_ptr() for t in tensors])

        return run, with_inputs


def spin_cycles(fn, sets):
    """GPU clock cycles of a spin (torch.cuda._sleep) that outlasts the host-side issue of one call
    of `fn` (already warmed up): twice the slowest of 5 host-side issue times (perf_counter around the call, no
    synchronisation), at least 100 us, converted with the spin's own rate measured by CUDA events.
    With the spin queued ahead of a call's start event, the GPU is busy while the host issues the
    call, so the events time the call's GPU work, not its Python, ctypes or descriptor-encoding time
    (kernels/bench/harness.cu does the same with its spin_ns kernel, session 32)."""
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    probe = 1 << 20
    a.record()
    torch.cuda._sleep(probe)
    b.record()
    torch.cuda.synchronize()
    cycles_per_s = probe / (a.elapsed_time(b) * 1e-3)
    host = 0.0
    for i in range(5):
        t = time.perf_counter()
        fn(sets[i % len(sets)])
        host = max(host, time.perf_counter() - t)
        torch.cuda.synchronize()
    return int(max(2 * host, 100e-6) * cycles_per_s)


WARMUP_S = 0.2  # seconds of warm-up calls before each candidate is timed


def warm_up(fn, sets):
    """Calls `fn` for WARMUP_S seconds (at least 5 calls), inputs rotating over `sets`: an idle GPU's
    clocks ramp up over its first tens of ms, and five calls of a 20 us kernel did not cover it
    (session 34, H200: the fp8 GEMM 8192x256x4096 timed first in its call 27.2 us, the same kernel
    later in the call 18.2 us)."""
    start, i = time.perf_counter(), 0
    while i < 5 or time.perf_counter() - start < WARMUP_S:
        fn(sets[i % len(sets)])
        i += 1
        if i % 16 == 0:
            torch.cuda.synchronize()  # the warm-up runs on the GPU, not only in the launch queue
    torch.cuda.synchronize()


def interleaved_ms(cands, runs):
    """[(name, median ms)] of each candidate (name, fn, sets) over `runs` calls, one GPU time each
    (CUDA events), timed in interleaved rounds: each round calls every candidate once, the order
    rotating by one per round, so that a clock or power state that drifts during the run weighs on
    every candidate alike (session 46, H200: timed one candidate after another, the first after
    torch.compile's seconds of idle GPU, napkin's grouped GEMM read 1471.6 us here against 1297.2
    us in napkin bench's interleaved rounds, and every generic case read 4-19% slow). Each
    candidate is warmed up first (warm_up), and each call's start event follows a spin
    (spin_cycles) so that host-side issue is not timed. Inputs rotate over each candidate's sets."""
    for _, fn, sets in cands:
        warm_up(fn, sets)
    spins = [spin_cycles(fn, sets) for _, fn, sets in cands]  # after the warm-up: no compilation in it
    times = [[] for _ in cands]
    for r in range(runs):
        for j in range(len(cands)):
            c = (r + j) % len(cands)
            _, fn, sets = cands[c]
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda._sleep(spins[c])
            a.record()
            fn(sets[r % len(sets)])
            b.record()
            torch.cuda.synchronize()
            times[c].append(a.elapsed_time(b))
    return [(name, statistics.median(t)) for (name, _, _), t in zip(cands, times)]


def rotating(make, bytes_per_set):
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    n = max(1, min(8, -(-2 * l2 // max(bytes_per_set, 1))))
    return [make(i) for i in range(n)]


def rel_err(got, want):
    return ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()


def load_module(path):
    spec = importlib.util.spec_from_file_location("napkin_emitted", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def named(text, what, convert):
    """'a=1,b=2' as a dict; SystemExit with a message on a malformed item."""
    out = {}
    for item in filter(None, text.split(",")):
        name, eq, value = item.partition("=")
        try:
            out[name] = convert(value)
        except ValueError:
            eq = ""
        if not eq or not name:
            raise SystemExit(f"compare_torch.py: {what} expects NAME=VALUE items, got '{item}'")
    return out


def input_scales(mod, sizes, overrides, unit):
    """Input name -> the factor its random values are drawn with: 1/sqrt(fan-in) by the module's
    INPUT_FAN_IN (axis names and integers) at `sizes`, 1 with `unit` or for a module without it;
    then the --scale items `overrides` (NAME=FACTOR,...). SystemExit naming a non-input."""
    fan_in = {} if unit else getattr(mod, "INPUT_FAN_IN", {})
    scale = {}
    for name in mod.INPUTS:
        n = 1
        for f in fan_in.get(name, ()):
            n *= sizes[f] if isinstance(f, str) else f
        scale[name] = n ** -0.5
    for item in overrides:
        for name, factor in named(item, "--scale", float).items():
            if name not in mod.INPUTS:
                raise SystemExit(f"compare_torch.py: --scale names '{name}', which is not an input of {mod.DIAGRAM}")
            scale[name] = factor
    return scale


def generic(args, dev):
    """Checks and times the emitted kernel against the emitted torch module (eager and compiled).
    --compile-only: compiles the module with torch.compile on one input set and returns None (a
    warm-up of the compile caches, run where nothing is timed)."""
    mod = load_module(args.module)
    try:
        sizes = mod._sizes(mod._DECL[mod.DIAGRAM], None, None, named(args.sizes, "--sizes", int))
    except ValueError as e:
        raise SystemExit(f"compare_torch.py: {e}")
    scale = input_scales(mod, sizes, args.scale, args.unit_scale)
    stored = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    for name, dt in list(mod.DTYPES.items()) + list(mod.OUT_DTYPES.items()):
        if dt not in stored:
            raise SystemExit(f"compare_torch.py: '{name}' is {dt}; napkin's CUDA emitter stores fp32, bf16 and fp16 only")
    shape = lambda name: tuple(sizes[a] for a in mod.AXES[name])

    def make(i):
        g = torch.Generator(device=dev).manual_seed(1000 + i)
        return [(torch.randn(shape(k), device=dev, generator=g) * scale.get(k, 1.0)).to(stored[mod.DTYPES[k]]) for k in mod.INPUTS]

    def nbytes(ts):
        return sum(t.numel() * t.element_size() for t in ts)

    first = make(0)
    if args.compile_only:
        t0 = time.time()
        torch.compile(mod.run)(dict(zip(mod.INPUTS, first)), sizes)
        torch.cuda.synchronize()
        print(f"generic {mod.DIAGRAM} sizes {sizes}: torch.compile took {time.time() - t0:.1f} s (compile only)")
        return None
    nap = Napkin(args.so)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sets = [first] + [make(i) for i in range(1, max(1, min(8, -(-2 * l2 // max(nbytes(first), 1)))))]
    outs = [torch.empty(shape(k), device=dev, dtype=stored[mod.OUT_DTYPES[k]]) for k in mod.OUTPUTS]
    run, with_inputs = nap.runner(sets[0], outs, [sizes[a] for a in sizes])
    run()
    torch.cuda.synchronize()
    as_dict = lambda s: dict(zip(mod.INPUTS, s))
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    ref = mod.run(as_dict(sets[0]), sizes, reference=True)
    eager = lambda s: mod.run(as_dict(s), sizes)
    got = {"napkin": dict(zip(mod.OUTPUTS, outs)), "eager": eager(sets[0])}
    t0 = time.time()
    compiled_fn = torch.compile(mod.run)
    compiled = lambda s: compiled_fn(as_dict(s), sizes)
    try:
        got["torch.compile"] = compiled(sets[0])
    except Exception as e:  # reported, and the napkin and eager rows still printed
        print(f"torch.compile failed: {type(e).__name__}: {str(e)[:500]}")
        compiled = None
    compile_s = time.time() - t0
    check = {}
    for who, res in got.items():
        check[who] = max(rel_err(res[k], ref[k]) for k in mod.OUTPUTS)
    del ref, got
    torch.cuda.empty_cache()
    ptrs = [with_inputs(s) for s in sets]
    cands = [("napkin", run, ptrs), ("eager PyTorch (emitted module)", eager, sets)]
    if compiled:
        cands.append(("torch.compile (default mode)", compiled, sets))
    rows = interleaved_ms(cands, args.runs)
    info = {"diagram": mod.DIAGRAM, "sizes": sizes, "scale": scale, "compile_s": compile_s, "sets": len(sets)}
    return rows, check, info


def fp8_gemm_tolerance(ref, mag):
    """Element-wise tolerance of an fp8 GEMM's bf16 output against the fp32 product of its
    dequantised inputs. Both sides multiply the same fp8 values (their products are exact in fp32:
    3 + 3 mantissa bits, fp8e5m2 2 + 2), so the fp8 rounding of the inputs is not in the error;
    what is: the bf16 rounding of the output (half an ulp, 2^-9 relative; 2^-8 allowed for a
    second rounding, e.g. of a scale product), plus the accumulation. Hopper's fp8 wgmma keeps
    about 14 mantissa bits in its accumulation, not fp32's 23 (DeepSeek-V3 technical report,
    arXiv 2412.19437, section 3.3.2), and napkin's kernel accumulates a whole K in the wgmma
    accumulators: each addition errs by up to 2^-14 of the running sum, whose magnitude is at most
    sum_k |a_k b_k| (`mag`, scaled by sa sb) and for random signs about sqrt(k / K) of it, so the
    total stays near 2^-14 mag; 2^-10 mag leaves a factor of 16 for unlucky elements while a
    wrong tile (one missing K chunk of 128 at K = 8192: about 1/8 of |C|, where |C| is about
    mag / sqrt(K) = mag / 90) is still far outside it."""
    return ref.abs() * 2.0**-8 + mag * 2.0**-10


def fp8_gemm(args, nap, dev):
    """Returns (rows, check, flops, sets, bad): napkin's fp8 GEMM and torch._scaled_mm on the same
    fresh random inputs, checked element by element first (fp8_gemm_tolerance)."""
    i, j, k = [int(s) for s in args.sizes.split(",")]
    f8 = torch.float8_e4m3fn

    def make(n):
        g = torch.Generator(device=dev).manual_seed(1000 + n)
        xa, xb = torch.randn(i, k, device=dev, generator=g), torch.randn(j, k, device=dev, generator=g) * k**-0.5
        sa, sb = (xa.abs().max() / 448).reshape(1), (xb.abs().max() / 448).reshape(1)  # per-tensor scales: the amax at fp8e4m3's largest value
        return [(xa / sa).to(f8), (xb / sb).to(f8), sa.float().contiguous(), sb.float().contiguous()]

    sets = rotating(make, i * k + j * k)
    out = torch.empty(i, j, device=dev, dtype=torch.bfloat16)
    run, with_inputs = nap.runner(sets[0], [out], [i, j, k])
    run()
    A, B, sa, sb = sets[0]
    torch.backends.cuda.matmul.allow_tf32 = False
    a32, b32 = A.float() * sa, B.float() * sb
    ref = a32 @ b32.T
    tol = fp8_gemm_tolerance(ref, a32.abs() @ b32.abs().T)
    scaled = lambda s: torch._scaled_mm(s[0], s[1].t(), scale_a=s[2], scale_b=s[3], out_dtype=torch.bfloat16)
    # torch._scaled_mm takes only sizes that are multiples of 16: other shapes are checked, not compared
    cublas = i % 16 == 0 and j % 16 == 0 and k % 16 == 0
    if not cublas:
        print(f"torch._scaled_mm needs multiples of 16 ({i}x{j}x{k}): napkin checked and timed alone")
    check, bad = {}, {}
    for name, got in (("napkin", out),) + ((("torch._scaled_mm", scaled(sets[0])),) if cublas else ()):
        err = (got.float() - ref).abs()
        check[name] = rel_err(got, ref)
        bad[name] = int((err > tol).sum().item())
    ptrs = [with_inputs(s) for s in sets]
    rows = interleaved_ms([("napkin", run, ptrs)] + ([("torch._scaled_mm (cuBLASLt)", scaled, sets)] if cublas else []), args.runs)
    return rows, check, 2 * i * j * k, sets, bad


def int8_gemm_tolerance(ref):
    """Element-wise tolerance of an int8 GEMM's bf16 output against the exact result `ref` (the
    integer sum, exact in fp64 below 2^53, times sa sb in fp64). The int32 accumulation is exact,
    so what remains is rounding: the sum to fp32 and the two scale products in fp32 (2^-24 relative
    each), then the bf16 output (half an ulp, 2^-9 relative); 2^-8 |ref| leaves a factor of 2 over
    their sum, and any error in the integer sum (one missing product of a K chunk, at least 1 in
    about sqrt(K) * 74^2 = 5e5 at K = 8192) is outside it wherever it is not hidden under a bf16
    ulp of the result."""
    return ref.abs() * 2.0**-8


def int8_gemm(args, nap, dev):
    """Returns (rows, check, flops, sets, bad): napkin's int8 GEMM, torch._int_mm with the scale
    chain (the reference: int8 x int8 -> int32, times sa sb in fp32, cast to bf16, the output napkin
    computes) and torch._int_mm alone (int32 out, no scale: a lower bound on the chain), on the same
    fresh random inputs, checked element by element first (int8_gemm_tolerance)."""
    i, j, k = [int(s) for s in args.sizes.split(",")]

    def make(n):
        g = torch.Generator(device=dev).manual_seed(2000 + n)
        a = torch.randint(-128, 128, (i, k), device=dev, dtype=torch.int8, generator=g)
        b = torch.randint(-128, 128, (j, k), device=dev, dtype=torch.int8, generator=g)
        sa = (torch.rand(1, device=dev, generator=g) + 0.5) / 127  # per-tensor scales, as a symmetric quantiser's amax / 127
        sb = (torch.rand(1, device=dev, generator=g) + 0.5) / (127 * k**0.5)
        return [a, b, sa.float().contiguous(), sb.float().contiguous()]

    sets = rotating(make, i * k + j * k)
    out = torch.empty(i, j, device=dev, dtype=torch.bfloat16)
    run, with_inputs = nap.runner(sets[0], [out], [i, j, k])
    run()
    A, B, sa, sb = sets[0]
    ref = (A.double() @ B.double().T) * sa.double() * sb.double()  # exact integer sums (|sum| <= 2^14 K < 2^53), then the scales
    tol = int8_gemm_tolerance(ref)
    chain = lambda s: (torch._int_mm(s[0], s[1].t()).float() * (s[2] * s[3])).to(torch.bfloat16)
    plain = lambda s: torch._int_mm(s[0], s[1].t())
    # torch._int_mm (cuBLASLt) needs M over 16 and K and N multiples of 8: other shapes are checked, not compared
    cublas = i > 16 and k % 8 == 0 and j % 8 == 0
    if not cublas:
        print(f"torch._int_mm needs M > 16 and K, N multiples of 8 ({i}x{j}x{k}): napkin checked and timed alone")
    check, bad = {}, {}
    for name, got in (("napkin", out),) + ((("torch._int_mm + scale", chain(sets[0])),) if cublas else ()):
        err = (got.double() - ref).abs()
        check[name] = rel_err(got, ref)
        bad[name] = int((err > tol).sum().item())
    if cublas:  # the plain product is exact: it must equal the integer sum, element for element
        exact = A.double() @ B.double().T
        got = plain(sets[0]).double()
        check["torch._int_mm (int32)"] = rel_err(got, exact)
        bad["torch._int_mm (int32)"] = int((got != exact).sum().item())
    ptrs = [with_inputs(s) for s in sets]
    refs = [("torch._int_mm + scale (reference)", chain, sets), ("torch._int_mm alone (int32 out)", plain, sets)]
    rows = interleaved_ms([("napkin", run, ptrs)] + (refs if cublas else []), args.runs)
    return rows, check, 2 * i * j * k, sets, bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kind", choices=["attention", "swiglu", "layernorm", "matmul", "generic", "fp8_gemm", "int8_gemm"])
    ap.add_argument("--so")
    ap.add_argument("--sizes", required=True,
                    help="the diagram's axis sizes, in declaration order, comma-separated (generic: NAME=SIZE,...; others default)")
    ap.add_argument("--module", help="generic: the module napkin emit --target torch wrote")
    ap.add_argument("--scale", action="append", default=[],
                    help="generic: NAME=FACTOR,... multiplies that input's random values (default: 1/sqrt(fan-in), INPUT_FAN_IN)")
    ap.add_argument("--unit-scale", action="store_true", help="generic: every input at scale 1 (before --scale)")
    ap.add_argument("--compile-only", action="store_true", help="generic: only warm torch.compile's caches (no --so needed)")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--json")
    ap.add_argument("--predicted-us", type=float, help="fp8_gemm, int8_gemm: napkin's predicted time (napkin derive --format json), for the model's error")
    args = ap.parse_args()
    if args.kind == "generic":
        if not args.module:
            raise SystemExit("compare_torch.py: generic needs --module (napkin emit FILE --target torch -o mod.py)")
        if not args.so and not args.compile_only:
            raise SystemExit("compare_torch.py: generic needs --so (or --compile-only)")
        torch.manual_seed(0)
        result = generic(args, "cuda")
        if result is None:
            return 0
        rows, check, info = result
        ok = check["napkin"] < 2e-2 and len(rows) == 3  # the references' own errors are printed, not judged
        print(f"generic {info['diagram']} sizes {info['sizes']} on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
              f"median of {args.runs} interleaved rounds, {info['sets']} rotating input sets; torch.compile took {info['compile_s']:.1f} s (not timed)")
        print("input scales: " + ", ".join(f"{k} {v:.4g}" for k, v in info["scale"].items()))
        print("check (max|err| / max|fp32 ref| over the outputs): " + ", ".join(f"{k} {v:.2e}" for k, v in check.items()) +
              ("  ok" if ok else "  FAILED"))
        t_nap = rows[0][1]
        for name, ms in rows:
            print(f"  {name:<32} {ms * 1e3:10.1f} us   napkin speed-up {ms / t_nap:6.2f}x")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"kind": "generic", **info, "check": check, "ms": dict(rows),
                           "speedup": {name: ms / t_nap for name, ms in rows[1:]}, "ok": ok}, fh, indent=1)
        return 0 if ok else 1
    if not args.so:
        raise SystemExit(f"compare_torch.py: {args.kind} needs --so")
    sizes = [int(s) for s in args.sizes.split(",")]
    nap = Napkin(args.so)
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    if args.kind == "fp8_gemm":
        rows, check, flops, sets, bad = fp8_gemm(args, nap, dev)
        ok = bad["napkin"] == 0
        print(f"fp8_gemm sizes {sizes} (fp8e4m3, per-tensor scales, bf16 out) on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
              f"median of {args.runs} interleaved rounds, {len(sets)} rotating input sets")
        print("check against fp32 of the dequantised inputs, element by element (|err| <= 2^-8 |ref| + 2^-10 sum|a b|): " +
              ", ".join(f"{k} {bad[k]} outside, max|err|/max|ref| {v:.2e}" for k, v in check.items()) + ("  ok" if ok else "  FAILED"))
        t_nap = rows[0][1]
        for name, ms in rows:
            print(f"  {name:<28} {ms * 1e3:10.1f} us {flops / ms / 1e9:8.1f} TFLOP/s   napkin speed-up {ms / t_nap:6.2f}x")
        if args.predicted_us:
            print(f"  model: predicted {args.predicted_us:.1f} us, measured {t_nap * 1e3:.1f} us, error {(args.predicted_us / (t_nap * 1e3) - 1) * 100:+.1f}%")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"kind": args.kind, "sizes": sizes, "check": check, "outside_tolerance": bad, "ms": dict(rows),
                           "predicted_us": args.predicted_us, "ok": ok}, fh, indent=1)
        return 0 if ok else 1
    if args.kind == "int8_gemm":
        rows, check, flops, sets, bad = int8_gemm(args, nap, dev)
        ok = bad["napkin"] == 0
        print(f"int8_gemm sizes {sizes} (int8, int32 accumulation, per-tensor scales, bf16 out) on {torch.cuda.get_device_name()}, "
              f"torch {torch.__version__}, median of {args.runs} interleaved rounds, {len(sets)} rotating input sets")
        print("check against the exact product, element by element (|err| <= 2^-8 |ref|): " +
              ", ".join(f"{k} {bad[k]} outside, max|err|/max|ref| {v:.2e}" for k, v in check.items()) + ("  ok" if ok else "  FAILED"))
        t_nap = rows[0][1]
        for name, ms in rows:
            print(f"  {name:<34} {ms * 1e3:10.1f} us {flops / ms / 1e9:8.1f} TOP/s   napkin speed-up {ms / t_nap:6.2f}x")
        if args.predicted_us:
            print(f"  model: predicted {args.predicted_us:.1f} us, measured {t_nap * 1e3:.1f} us, error {(args.predicted_us / (t_nap * 1e3) - 1) * 100:+.1f}%")
        if args.json:
            with open(args.json, "w") as fh:
                json.dump({"kind": args.kind, "sizes": sizes, "check": check, "outside_tolerance": bad, "ms": dict(rows),
                           "reference": "torch._int_mm + scale (reference)", "predicted_us": args.predicted_us, "ok": ok}, fh, indent=1)
        return 0 if ok else 1
    if args.kind == "attention":
        b, h, q, x, d = sizes
        flops = 4 * b * h * q * x * d * (0.5 if args.causal else 1.0)

        def make(i):
            g = torch.Generator(device=dev).manual_seed(i)
            return [torch.randn(b, h, n, d, device=dev, dtype=bf, generator=g) for n in (q, x, x)]

        sets = rotating(make, 2 * b * h * (q + 2 * x) * d)
        out = torch.empty(b, h, q, d, device=dev, dtype=bf)
        run, with_inputs = nap.runner(sets[0], [out], sizes)
        run()
        Q, K, V = sets[0]
        ref = F.scaled_dot_product_attention(Q.float(), K.float(), V.float(), is_causal=args.causal)
        check = {"napkin": rel_err(out, ref)}
        ptrs = [with_inputs(s) for s in sets]
        cands = [("napkin", run, ptrs)]

        def sdpa(backend):  # one backend, entered around each call: the rounds interleave the backends
            def call(s):
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(*s, is_causal=args.causal)
            return call

        for name, backend in (("sdpa flash (FA2)", SDPBackend.FLASH_ATTENTION), ("sdpa cuDNN", SDPBackend.CUDNN_ATTENTION)):
            check[name] = rel_err(sdpa(backend)(sets[0]), ref)
            cands.append((name, sdpa(backend), sets))
        mask = torch.ones(q, x, device=dev, dtype=torch.bool).tril() if args.causal else None

        def naive(s):
            Qs, Ks, Vs = s
            S = (Qs @ Ks.transpose(-1, -2)) * d**-0.5
            if mask is not None:
                S = S.masked_fill(~mask, float("-inf"))
            return torch.softmax(S, dim=-1) @ Vs

        check["naive"] = rel_err(naive(sets[0]), ref)
        rows = interleaved_ms(cands + [("naive PyTorch", naive, sets)], args.runs)
    elif args.kind == "swiglu":
        t, m, f = sizes
        flops = 2 * t * m * f * 3

        def make(i):
            g = torch.Generator(device=dev).manual_seed(i)
            return [torch.randn(*s, device=dev, dtype=bf, generator=g) * sc for s, sc in (((t, m), 1.0), ((m, f), m**-0.5), ((m, f), m**-0.5), ((f, m), f**-0.5))]

        sets = rotating(make, 2 * (t * m + 3 * m * f))
        out = torch.empty(t, m, device=dev, dtype=bf)
        run, with_inputs = nap.runner(sets[0], [out], sizes)
        run()
        X, W1, W3, W2 = [s.float() for s in sets[0]]
        ref = (F.silu(X @ W1) * (X @ W3)) @ W2
        chain = lambda s: (F.silu(s[0] @ s[1]) * (s[0] @ s[2])) @ s[3]
        check = {"napkin": rel_err(out, ref), "eager chain": rel_err(chain(sets[0]), ref)}
        ptrs = [with_inputs(s) for s in sets]
        rows = interleaved_ms([("napkin", run, ptrs), ("eager PyTorch chain", chain, sets)], args.runs)
    elif args.kind == "layernorm":
        t, m = sizes
        flops = 8 * t * m

        def make(i):
            g = torch.Generator(device=dev).manual_seed(i)
            return [torch.randn(t, m, device=dev, dtype=bf, generator=g), torch.randn(m, device=dev, dtype=bf, generator=g),
                    torch.randn(m, device=dev, dtype=bf, generator=g)]

        sets = rotating(make, 2 * t * m)
        out = torch.empty(t, m, device=dev, dtype=bf)
        run, with_inputs = nap.runner(sets[0], [out], sizes)
        run()
        X, W, B = [s.float() for s in sets[0]]
        ref = F.layer_norm(X, (m,), W, B, 1e-5)

        def chain(s):
            x = s[0]
            mu = x.mean(-1, keepdim=True)
            var = ((x - mu) ** 2).mean(-1, keepdim=True)
            return (x - mu) * torch.rsqrt(var + 1e-5) * s[1] + s[2]

        check = {"napkin": rel_err(out, ref), "F.layer_norm": rel_err(F.layer_norm(*sets[0][:1], (m,), sets[0][1], sets[0][2], 1e-5), ref),
                 "eager chain": rel_err(chain(sets[0]), ref)}
        ptrs = [with_inputs(s) for s in sets]
        rows = interleaved_ms([("napkin", run, ptrs), ("F.layer_norm (one kernel)", lambda s: F.layer_norm(s[0], (m,), s[1], s[2], 1e-5), sets),
                               ("eager chain of primitives", chain, sets)], args.runs)
    else:
        a, k, c = sizes
        flops = 2 * a * k * c

        def make(i):
            g = torch.Generator(device=dev).manual_seed(i)
            return [torch.randn(a, k, device=dev, dtype=bf, generator=g), torch.randn(k, c, device=dev, dtype=bf, generator=g) * k**-0.5]

        sets = rotating(make, 2 * (a * k + k * c))
        out = torch.empty(a, c, device=dev, dtype=bf)
        run, with_inputs = nap.runner(sets[0], [out], sizes)
        run()
        ref = sets[0][0].float() @ sets[0][1].float()
        check = {"napkin": rel_err(out, ref), "torch.matmul": rel_err(sets[0][0] @ sets[0][1], ref)}
        ptrs = [with_inputs(s) for s in sets]
        rows = interleaved_ms([("napkin", run, ptrs), ("torch.matmul (cuBLAS)", lambda s: s[0] @ s[1], sets)], args.runs)
    ok = check["napkin"] < 2e-2  # the references' own errors are printed, not judged
    print(f"{args.kind} sizes {sizes}{' causal' if args.causal else ''} on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"median of {args.runs} interleaved rounds, {len(sets)} rotating input sets")
    print("check (max|err| / max|fp32 ref|): " + ", ".join(f"{k} {v:.2e}" for k, v in check.items()) + ("  ok" if ok else "  FAILED"))
    t_nap = rows[0][1]
    for name, ms in rows:
        print(f"  {name:<28} {ms * 1e3:10.1f} us {flops / ms / 1e9:8.1f} TFLOP/s   napkin speed-up {ms / t_nap:6.2f}x")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"kind": args.kind, "sizes": sizes, "causal": args.causal, "check": check, "ms": dict(rows)}, fh, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
