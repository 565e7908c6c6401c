#!/usr/bin/env bash
# Compile check of the fp8 GEMM (ctest label compile; no GPU needed): emits
# tests/kernels/gemm_fp8.napkin for the H100 at the shape I,J,K, builds it for sm_90a (PTX, then
# SASS through ptxas) and for sm_80 (where the fp8 mma.sync atom traps: no 8-bit float MMA before
# sm_89), and checks that the sm_90a PTX issues the fp8 wgmma (m64nNk32 .e4m3) on 1-byte TMA boxes
# and, for the fallback the launcher takes where the wgmma path cannot run, mma.sync m16n8k32 .e4m3;
# where K * 1 byte is not a multiple of 16 (TMA's stride rule), that the operands are repacked by
# napkin::pitch_copy first. Usage: compile_fp8.sh NAPKIN NVCC WORKDIR I,J,K
set -eu
napkin=$1 nvcc=$2 dir=$3
IFS=, read -r i j k <<< "$4"
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir"
"$napkin" emit "$src/tests/kernels/gemm_fp8.napkin" --hw h100 --target cuda --set i="$i" --set j="$j" --set k="$k" -o "$dir/gemm_fp8.cu"
"$nvcc" -std=c++17 -O3 --Werror all-warnings -ptx -arch=compute_90a -o "$dir/gemm_fp8.ptx" "$dir/gemm_fp8.cu"
"$nvcc" -std=c++17 -O3 --Werror all-warnings -cubin -gencode=arch=compute_90a,code=sm_90a -o "$dir/gemm_fp8.cubin" "$dir/gemm_fp8.cu"
grep -q "wgmma.mma_async.sync.aligned.m64n[0-9]*k32.f32.e4m3.e4m3" "$dir/gemm_fp8.ptx" || { echo "no fp8 wgmma in the PTX"; exit 1; }
grep -q "cp.async.bulk.tensor" "$dir/gemm_fp8.ptx" || { echo "no TMA load in the PTX"; exit 1; }
grep -q "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32" "$dir/gemm_fp8.ptx" || { echo "no fp8 mma.sync (the fallback) in the PTX"; exit 1; }
"$nvcc" -std=c++17 -O3 --Werror all-warnings -cubin -gencode=arch=compute_80,code=sm_80 -o "$dir/gemm_fp8.sm_80.cubin" "$dir/gemm_fp8.cu"
if (( k % 16 != 0 )); then
  grep -q "pitch_copy(a.C__pad_A, a.A" "$dir/gemm_fp8.cu" || { echo "K = $k: no repacking copy of A before the TMA path"; exit 1; }
  grep -q "pitch_copy_kernel" "$dir/gemm_fp8.ptx" || { echo "K = $k: no pitch_copy kernel in the PTX"; exit 1; }
fi
echo "gemm_fp8 $i x $j x $k: builds for sm_90a and sm_80, fp8 wgmma on TMA, fp8 mma.sync as the fallback"
