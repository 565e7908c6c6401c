#!/usr/bin/env bash
# Compile check of the fp8 attention (ctest label compile; no GPU needed): emits
# tests/kernels/attention_fp8.napkin for the H100 at B,H,N (queries = keys), builds it for sm_90a
# (PTX, then SASS through ptxas, warnings as errors) and checks that the PTX issues the fp8 wgmma
# (m64nNk32 .e4m3) for S = Q K^T and O += P V (A from registers), loads by TMA and has no mma.sync,
# and that ptxas reports no spills; where N bytes is not a multiple of 16 (TMA's stride rule for Vt's
# rows), that Vt is repacked by napkin::pitch_copy first. Usage: compile_fp8_attention.sh NAPKIN NVCC WORKDIR B,H,N
set -eu
napkin=$1 nvcc=$2 dir=$3
IFS=, read -r b h n <<< "$4"
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$dir"
"$napkin" emit "$src/tests/kernels/attention_fp8.napkin" --hw h100 --target cuda --set b="$b" --set h="$h" --set q="$n" --set x="$n" -o "$dir/attention_fp8.cu"
"$nvcc" -std=c++17 -O3 --Werror all-warnings -ptx -arch=compute_90a -o "$dir/attention_fp8.ptx" "$dir/attention_fp8.cu"
"$nvcc" -std=c++17 -O3 --Werror all-warnings -cubin -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -o "$dir/attention_fp8.cubin" \
  "$dir/attention_fp8.cu" > "$dir/ptxas.txt" 2>&1 || { cat "$dir/ptxas.txt"; exit 1; }
grep -q "wgmma.mma_async.sync.aligned.m64n[0-9]*k32.f32.e4m3.e4m3 *{[^}]*}, *%rd" "$dir/attention_fp8.ptx" || { echo "no fp8 wgmma from SMEM (S = Q K^T) in the PTX"; exit 1; }
grep -q "wgmma.mma_async.sync.aligned.m64n[0-9]*k32.f32.e4m3.e4m3 *{[^}]*}, *{" "$dir/attention_fp8.ptx" || { echo "no fp8 wgmma with A from registers (O += P V) in the PTX"; exit 1; }
grep -q "cp.async.bulk.tensor" "$dir/attention_fp8.ptx" || { echo "no TMA load in the PTX"; exit 1; }
if grep -q "mma.sync" "$dir/attention_fp8.ptx"; then echo "mma.sync in the PTX of fp8 attention (it has the wgmma path alone)"; exit 1; fi
if grep -E "[1-9][0-9]* bytes spill" "$dir/ptxas.txt"; then echo "register spills in the fp8 attention kernel"; exit 1; fi
if (( n % 16 != 0 )); then
  grep -q "pitch_copy(a.S_to_O__pad_Vt, a.Vt" "$dir/attention_fp8.cu" || { echo "N = $n: no repacking copy of Vt before the TMA path"; exit 1; }
fi
echo "attention_fp8 B$b H$h N$n: builds for sm_90a, fp8 wgmma on TMA, no spills"
