#!/usr/bin/env bash
# Compile check of the int8 GEMM (ctest label compile; no GPU needed): emits
# tests/kernels/gemm_int8.napkin for HW (a100 or h100) at the shape I,J,K, builds it for ARCH
# (sm_80 or sm_90a: PTX, then SASS through ptxas) and checks that the PTX issues the int8 mma.sync
# (m16n8k32 .s32.s8.s8.s32) on cp.async tiles, for sm_90a also the int8 wgmma (m64nNk32
# .s32.s8.s8) on TMA tiles, and no floating-point MMA.
# Usage: compile_int8.sh NAPKIN NVCC WORKDIR HW ARCH I,J,K
set -eu
napkin=$1 nvcc=$2 dir=$3 hw=$4 arch=$5
IFS=, read -r i j k <<< "$6"
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir"
"$napkin" emit "$src/tests/kernels/gemm_int8.napkin" --hw "$hw" --target cuda --set i="$i" --set j="$j" --set k="$k" -o "$dir/gemm_int8.cu"
"$nvcc" -std=c++17 -O3 --Werror all-warnings -ptx -arch="compute_${arch#sm_}" -o "$dir/gemm_int8.ptx" "$dir/gemm_int8.cu"
"$nvcc" -std=c++17 -O3 --Werror all-warnings -cubin -gencode=arch="compute_${arch#sm_}",code="$arch" -o "$dir/gemm_int8.cubin" "$dir/gemm_int8.cu"
grep -q "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" "$dir/gemm_int8.ptx" || { echo "no int8 mma.sync in the PTX"; exit 1; }
grep -q "cp.async" "$dir/gemm_int8.ptx" || { echo "no cp.async in the PTX"; exit 1; }
if grep -q "\.f32\.bf16\|\.f32\.f16\|\.f32\.e4m3\|\.f32\.e5m2\|\.f32\.tf32" "$dir/gemm_int8.ptx"; then echo "a floating-point MMA in the PTX of an int8 GEMM"; exit 1; fi
what="int8 mma.sync m16n8k32 on cp.async"
if [ "$arch" = sm_90a ]; then
  grep -q "wgmma.mma_async.sync.aligned.m64n[0-9]*k32.s32.s8.s8" "$dir/gemm_int8.ptx" || { echo "no int8 wgmma in the sm_90a PTX"; exit 1; }
  grep -q "cp.async.bulk.tensor" "$dir/gemm_int8.ptx" || { echo "no TMA load in the sm_90a PTX"; exit 1; }
  what="$what, int8 wgmma m64nNk32 on TMA"
elif grep -q "wgmma" "$dir/gemm_int8.ptx"; then
  echo "wgmma in the PTX for $arch"; exit 1
fi
echo "gemm_int8 $i x $j x $k for $hw: builds for $arch, $what"
