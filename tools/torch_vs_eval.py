#!/usr/bin/env python3
"""Checks `napkin emit --target torch` against the fp64 evaluator on the CPU, where torch and NumPy
are installed (the device machines; Debian's python3-torch): for each diagram file, the emitted
module runs on the inputs `napkin eval` made (times the module's INPUT_SCALES), in reference mode (fp32: error under 1e-4 of the
largest output value, or absolutely where every value is below 1)
and as emitted (inputs in their dtypes, 16-bit intermediates: under 1e-1, which catches wrong
semantics but not 16-bit rounding through deep diagrams; the GPU check is compare_torch.py's); prints one line per output and exits 1 on a failure.
Usage: tools/torch_vs_eval.py NAPKIN FILE [--set a=1 ...] [--diagram NAME]
       (several files: FILE --set ... -- FILE2 --set ...)
"""
import importlib.util
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch


def check(napkin, args, work):
    mod_path = os.path.join(work, "module.py")
    subprocess.run([napkin, "emit", *args, "--target", "torch", "-o", mod_path], check=True)
    subprocess.run([napkin, "eval", *args, "-o", os.path.join(work, "eval")], check=True, stdout=subprocess.DEVNULL)
    spec = importlib.util.spec_from_file_location("emitted", mod_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    # Inputs at their fan-in scale (INPUT_SCALES, as napkin bench and compare_torch.py draw them), so
    # activations stay O(1): unscaled weights drive deep diagrams' softmaxes one-hot, where 16-bit
    # rounding is no longer small. The evaluator reruns on the scaled inputs.
    scales = getattr(mod, "INPUT_SCALES", {})
    if any(v != 1 for v in scales.values()):
        given = []
        for k, v in scales.items():
            f = os.path.join(work, "eval", k + ".npy")
            np.save(f, np.load(f) * v)
            given += ["--input", f"{k}={f}"]
        subprocess.run([napkin, "eval", *args, *given, "-o", os.path.join(work, "eval")], check=True, stdout=subprocess.DEVNULL)
    inputs = {k: torch.from_numpy(np.load(os.path.join(work, "eval", k + ".npy"))) for k in mod.INPUTS}
    want = {k: np.load(os.path.join(work, "eval", k + ".npy")) for k in mod.OUTPUTS}
    ok = True
    modes = [("reference", 1e-4), ("emitted", 1e-1)]
    if any(d.startswith("fp8") for d in mod.DTYPES.values()) and not hasattr(torch, "float8_e4m3fn"):
        print(f"  {mod.DIAGRAM}: fp8 inputs and torch {torch.__version__} has no float8 dtypes: reference mode only")
        modes.pop()
    for mode, tol in modes:
        try:
            if mode == "reference":
                got = mod.run(inputs, reference=True)
            else:
                got = mod.run({k: v.to(mod._storage(mod.DTYPES[k])) for k, v in inputs.items()})
        except RuntimeError as e:  # e.g. a CPU torch without half-precision matmul
            print(f"  {mod.DIAGRAM} {mode}: torch raised: {e} FAILED")
            ok = False
            continue
        for k in mod.OUTPUTS:
            g = got[k].double().numpy()
            np.seterr(invalid="ignore")
            w = want[k]
            scale = max(float(np.max(np.abs(np.where(np.isfinite(w), w, 0)), initial=0.0)), 1.0)
            finite_same = np.array_equal(np.isfinite(g), np.isfinite(w)) and np.array_equal(np.isnan(g), np.isnan(w))
            err = float(np.max(np.abs(np.where(np.isfinite(w) & np.isfinite(g), g - w, 0)), initial=0.0)) / scale
            good = g.shape == w.shape and finite_same and err <= tol
            ok = ok and good
            print(f"  {mod.DIAGRAM} {k} {mode}: shape {g.shape} max rel err {err:.2e} {'ok' if good else 'FAILED'}")
    return ok


def main():
    napkin, rest = sys.argv[1], sys.argv[2:]
    groups, cur = [], []
    for a in rest:
        if a == "--":
            groups.append(cur)
            cur = []
        else:
            cur.append(a)
    groups.append(cur)
    ok = True
    for g in groups:
        with tempfile.TemporaryDirectory() as work:
            print(" ".join(g))
            try:
                ok = check(napkin, g, work) and ok
            except (subprocess.CalledProcessError, ValueError) as e:
                print(f"  FAILED: {e}")
                ok = False
    print("all ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
