#!/usr/bin/env bash
# Runs napkin bench on a lent GPU machine (see docs/benchmarks.md). The machine lacks napkin's
# Debian libraries, so the call carries build/cli/napkin and .devlibs/ (tools/device/pack.sh).
# Usage: tools/device/bench.sh quick|perf|sweep   (outputs under $OUT when set)
set -u
mode=${1:-quick}
out=${OUT:-/tmp/napkin-bench-out}
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
    ;;
  perf)
    bench att-4x16x4096 attention --set b=4 --set h=16 --set q=4096 --set x=4096 --format json
    bench causal-4x16x4096 causal_attention --set b=4 --set h=16 --set q=4096 --set x=4096 --format json
    bench gemm-8192 matmul --set a=8192 --set b=8192 --set c=8192 --format json
    bench swiglu mlp_swiglu --format json
    bench layernorm layernorm --format json
    ;;
esac
echo "benchmarks failed: $fails"
