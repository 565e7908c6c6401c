#!/usr/bin/env bash
# Runs napkin bench on a lent GPU machine (see docs/benchmarks.md). The machine lacks napkin's
# Debian libraries, so the call carries build/cli/napkin and .devlibs/ (tools/device/pack.sh).
# Usage: tools/device/bench.sh quick|bundled|gemm|variants|attention|perf|torch|sweep|calibrate [MODE...]   (outputs under $OUT when set)
set -u
modes=${*:-quick}
out=/tmp/napkin-bench-out  # everything lands here; $OUT gets one results.tgz of it
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.devlibs:${LD_LIBRARY_PATH:-}
export NAPKIN_HARDWARE_DIR=$PWD/hardware
N=$PWD/.devlibs/napkin  # stripped copy of build/cli/napkin (tools/device/pack.sh)
$N --version || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
nvcc --version | tail -1
fails=0
bench() {  # bench TAG DIAGRAM [napkin bench options...]
  local tag=$1 file=$2
  shift 2
  echo "=== $tag: napkin bench $file $*"
  if ! $N bench "diagrams/library/$file.napkin" --workdir "/tmp/nb-$tag" "$@" 2>&1 | tee "$out/$tag.txt"; then fails=$((fails + 1)); fi
  cp "/tmp/nb-$tag/harness.json" "$out/$tag.harness.json" 2>/dev/null
}
for mode in $modes; do
case $mode in
  quick)
    bench att-small attention --set b=1 --set h=2 --set q=200 --set x=200 --runs 20
    bench causal-small causal_attention --set b=1 --set h=2 --set q=200 --set x=200 --runs 20
    bench gqa-small gqa_attention --set b=1 --set g=2 --set r=2 --set q=130 --set x=130 --runs 20
    bench mm-odd matmul --set a=1000 --set b=1000 --set c=1000 --runs 20
    bench gelu-small matmul_bias_gelu --set t=300 --set m=256 --set f=520 --runs 20
    bench mlp-small mlp_swiglu --set t=300 --set m=256 --set f=520 --runs 20
    bench ln-small layernorm --set t=100 --set m=1000 --runs 20
    bench sm-small softmax --set t=50 --set v=5000 --runs 20
    bench rms-small rmsnorm --set t=100 --set m=1000 --runs 20
    bench bmm-small batched_matmul --set n=3 --set a=200 --set b=128 --set c=300 --runs 20
    bench tb-small transformer_block --set b=2 --set s=96 --set m=256 --set g=2 --set r=2 --set d=64 --set f=384 --runs 20
    ;;
  bundled)
    bench attention-bundled attention
    ;;
  perf)
    bench att-4x16x4096 attention --set b=4 --set h=16 --set q=4096 --set x=4096
    bench causal-4x16x4096 causal_attention --set b=4 --set h=16 --set q=4096 --set x=4096
    bench gemm-8192 matmul --set a=8192 --set b=8192 --set c=8192
    bench swiglu mlp_swiglu
    bench layernorm layernorm
    bench gelu matmul_bias_gelu  # against cuBLASLt with its bias + GELU epilogue
    ;;
  gemm)  # the gemm strategy's two variants: correctness at odd sizes, then GEMM 8192^3 and SwiGLU
    bench mm-odd matmul --set a=1000 --set b=1000 --set c=1000 --runs 20
    bench mm-unaligned matmul --set a=777 --set b=333 --set c=1001 --runs 20
    bench gelu-small matmul_bias_gelu --set t=300 --set m=256 --set f=520 --runs 20
    bench mlp-small mlp_swiglu --set t=300 --set m=256 --set f=520 --runs 20
    bench bmm-small batched_matmul --set n=3 --set a=200 --set b=128 --set c=300 --runs 20
    bench gemm-8192 matmul --set a=8192 --set b=8192 --set c=8192
    NAPKIN_NO_WGMMA=1 bench gemm-8192-mma.sync matmul --set a=8192 --set b=8192 --set c=8192
    bench swiglu mlp_swiglu
    for tag in mm-odd bmm-small mlp-small; do  # mlp-small: clusters with an odd count of N tiles, the joint dual-GEMM wgmma
      for tool in memcheck racecheck; do
        echo "--- $tool $tag" | tee -a "$out/sanitizer.txt"
        (cd "/tmp/nb-$tag" && compute-sanitizer --tool $tool --error-exitcode 9 ./harness --no-time 2>&1 | tail -3) | tee -a "$out/sanitizer.txt"
      done
    done
    ;;
  variants)  # hand-written schedules (tools/device/schedules/*.schedule; first line `# bench: DIAGRAM [--set ...]`)
    for f in tools/device/schedules/*.schedule; do
      read -r -a spec <<< "$(sed -n 's/^# bench: //p' "$f" | head -1)"
      bench "variant-$(basename "$f" .schedule)" "${spec[@]}" --schedule "$f"
    done
    ;;
  calibrate)  # the model's ceilings: kernels/calibrate/microbench.cu (mma.sync, wgmma, bandwidths, exp, FP32)
    OUT=$out kernels/calibrate/run_on_device.sh || fails=$((fails + 1))
    ;;
  sweep)
    # checks, then compute-sanitizer's four tools on every case: 294 s on the H100 with 14 jobs (2026-11-22)
    tests/gpu/sweep.sh "$N" --jobs 14 --budget 480 2>&1 | tee "$out/sweep.txt"
    for r in /tmp/sweep-results.*; do [ -d "$r" ] && cp -r "$r" "$out/"; done  # per-case bench and sanitizer logs
    ;;
  attention)  # the attention goals alone: napkin bench, then SDPA and naive PyTorch
    bench att-4x16x4096 attention --set b=4 --set h=16 --set q=4096 --set x=4096
    bench causal-4x16x4096 causal_attention --set b=4 --set h=16 --set q=4096 --set x=4096
    modes_torch_only=attention
    ;&
  torch)
    torch_vs() {  # torch_vs TAG DIAGRAM KIND SIZES [--set ...] [-- extra script args]
      local tag=$1 file=$2 kind=$3 sizes=$4
      shift 4
      echo "=== $tag: compare_torch.py $kind $sizes $*"
      local sets=() extra=()
      while [ $# -gt 0 ]; do case $1 in --set) sets+=("$1" "$2"); shift 2 ;; *) extra+=("$1"); shift ;; esac; done
      $N emit "diagrams/library/$file.napkin" --target cuda "${sets[@]}" -o "/tmp/$tag.cu" &&
        nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o "/tmp/$tag.so" "/tmp/$tag.cu" &&
        python3 kernels/reference/compare_torch.py "$kind" --so "/tmp/$tag.so" --sizes "$sizes" --json "$out/$tag.torch.json" "${extra[@]}" | tee "$out/$tag.torch.txt" ||
        fails=$((fails + 1))
    }
    torch_vs att attention attention 4,16,4096,4096,128 --set b=4 --set h=16 --set q=4096 --set x=4096
    torch_vs causal causal_attention attention 4,16,4096,4096,128 --set b=4 --set h=16 --set q=4096 --set x=4096 --causal
    if [ -z "${modes_torch_only:-}" ]; then
      torch_vs swiglu mlp_swiglu swiglu 8192,4096,14336
      torch_vs layernorm layernorm layernorm 4096,1024
    fi
    modes_torch_only=
    ;;
esac
done
[ -n "${OUT:-}" ] && tar czf "$OUT/results.tgz" -C "$out" .
echo "benchmarks failed: $fails"
