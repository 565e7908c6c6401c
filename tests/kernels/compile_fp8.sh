#!/usr/bin/env bash
# Compile check of the fp8 GEMM (ctest label compile; no GPU needed): emits
# tests/kernels/gemm_fp8.napkin for the H100 at the shape I,J,K, builds it for sm_90a (PTX, then
# SASS through ptxas) and checks that the PTX issues the fp8 wgmma (m64nNk32 .e4m3) on 1-byte TMA
# boxes and has no mma.sync. Usage: compile_fp8.sh NAPKIN NVCC WORKDIR I,J,K
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
if grep -q "mma.sync" "$dir/gemm_fp8.ptx"; then echo "mma.sync in the PTX of an fp8 GEMM (it has the wgmma path alone)"; exit 1; fi
echo "gemm_fp8 $i x $j x $k: builds for sm_90a, fp8 wgmma on TMA"
