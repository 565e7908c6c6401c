#!/usr/bin/env bash
# Runs the calibration microbenchmarks on a GPU machine that has nvcc but not napkin's libraries
# (the device tool's machines): builds microbench.cu for the GPU found, runs it twice (to see the
# spread), and cross-checks two figures with PyTorch (a device copy; an 8192^3 bf16 product).
# Writes $OUT/measurements.txt (first run), $OUT/measurements-2.txt and $OUT/crosscheck.txt;
# `napkin calibrate --hw h100 --measurements measurements.txt` turns them into a description.
set -euo pipefail
cd "$(dirname "$0")"
out=${OUT:-.}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$out/nvidia-smi.txt"
nvcc --version | tail -1
cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
arch="-arch=sm_$cc"
[ "$cc" = "90" ] && arch="-gencode=arch=compute_90a,code=sm_90a -DNAPKIN_SM90A"
nvcc -O3 -std=c++17 $arch microbench.cu -o /tmp/microbench -lcublas
/tmp/microbench | tee "$out/measurements.txt"
/tmp/microbench > "$out/measurements-2.txt"
python3 - <<'PY' | tee "$out/crosscheck.txt"
import torch
def med(f, n=7):
    f(); torch.cuda.synchronize(); ts = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); f(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / 1e3)
    return sorted(ts)[n // 2]
x = torch.rand(2 << 28, device="cuda"); y = torch.empty_like(x)
t = med(lambda: y.copy_(x)); print("torch_copy_bytes_per_s %.6g" % (2 * x.numel() * 4 / t))
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
t = med(lambda: a @ b); print("torch_bf16_gemm_8192_flops_per_s %.6g" % (2 * 8192**3 / t))
PY
