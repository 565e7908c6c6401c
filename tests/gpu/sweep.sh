#!/usr/bin/env bash
# GPU correctness sweep (CTest label gpu; run on the device, not in CI): napkin bench checks the
# emitted kernels against the fp32 GPU reference (and the fp64 evaluator where small) over
# attention with d in {64, 128}, N in {128, 1000, 4096}, causal and not, GQA, matmuls whose sizes
# do not divide the tiles, bf16 and fp16; then compute-sanitizer memcheck and racecheck on the
# bundled tensor-core kernels. Usage: tests/gpu/sweep.sh NAPKIN_BINARY [--quick]
set -u
N=${1:?napkin binary}
root=$(cd "$(dirname "$0")/../.." && pwd)
lib=$root/diagrams/library
fails=0 runs=0
check() {  # check TAG FILE [--set ...]
  local tag=$1 file=$2
  shift 2
  runs=$((runs + 1))
  if out=$("$N" bench "$file" --workdir "/tmp/sweep-$tag" --runs 20 "$@" 2>&1) && echo "$out" | grep -q "result: correct"; then
    echo "ok    $tag: $(echo "$out" | grep -m1 'check .* fp32' | sed 's/.*= //')  [$(echo "$out" | grep -oE '^  [A-Za-z_]+ +((gemm|flash)(/[a-z.]+)?|rows|simt|call) ' | awk '{print $2}' | tr '\n' ' ')]"
  else
    fails=$((fails + 1))
    echo "FAIL  $tag"
    echo "$out" | tail -20
  fi
}
for d in 64 128; do
  for n in 128 1000 4096; do
    check "att-d$d-n$n" "$lib/attention.napkin" --set b=1 --set h=2 --set q=$n --set x=$n --set d=$d
    check "causal-d$d-n$n" "$lib/causal_attention.napkin" --set b=1 --set h=2 --set q=$n --set x=$n --set d=$d
  done
done
check gqa-n1000 "$lib/gqa_attention.napkin" --set b=1 --set g=2 --set r=2 --set q=1000 --set x=1000
check gqa-n4096 "$lib/gqa_attention.napkin" --set b=2 --set g=2 --set r=4 --set q=4096 --set x=4096
check att-fp16-n1000 "$root/tests/gpu/attention_fp16.napkin" --set b=1 --set h=2 --set q=1000 --set x=1000
check mm-1000x1000x1000 "$lib/matmul.napkin" --set a=1000 --set b=1000 --set c=1000
check mm-777x333x1001 "$lib/matmul.napkin" --set a=777 --set b=333 --set c=1001
check mm-fp16-1000x520x3000 "$root/tests/gpu/matmul_fp16.napkin" --set a=1000 --set b=520 --set c=3000
check mlp-300x256x520 "$lib/mlp_swiglu.napkin" --set t=300 --set m=256 --set f=520
check gelu-300x256x520 "$lib/matmul_bias_gelu.napkin" --set t=300 --set m=256 --set f=520
check bmm-3x200x128x300 "$lib/batched_matmul.napkin" --set n=3 --set a=200 --set b=128 --set c=300
check softmax-50x5000 "$lib/softmax.napkin" --set t=50 --set v=5000
check layernorm-100x1000 "$lib/layernorm.napkin" --set t=100 --set m=1000
check rmsnorm-100x1000 "$lib/rmsnorm.napkin" --set t=100 --set m=1000
# rows of a length that is not a multiple of 8: the scalar path of the rows kernel
check softmax-50x5003 "$lib/softmax.napkin" --set t=50 --set v=5003
check layernorm-100x1001 "$lib/layernorm.napkin" --set t=100 --set m=1001
# calls: the transformer block (Q scaled, see the file) runs its callees' kernels (RMSNorm mapped
# over b, GQA, SwiGLU whose result the residual add reads from a buffer)
check call-block "$root/tests/gpu/call_block.napkin" --set b=2 --set s=96 --set m=256 --set g=2 --set r=2 --set d=64 --set f=384
# compute-sanitizer over the harness binaries of the tensor-core kernels (the check run only).
if command -v compute-sanitizer >/dev/null; then
  for tag in att-d128-n1000 causal-d64-n1000 causal-d128-n1000 layernorm-100x1000 mm-777x333x1001 mm-1000x1000x1000 mlp-300x256x520 bmm-3x200x128x300; do
    for tool in memcheck racecheck; do
      runs=$((runs + 1))
      if out=$(cd "/tmp/sweep-$tag" && compute-sanitizer --tool $tool --error-exitcode 9 ./harness --no-time 2>&1); then
        echo "ok    $tool $tag: $(echo "$out" | grep -m1 'ERROR SUMMARY' || echo 'no summary')"
      else
        fails=$((fails + 1))
        echo "FAIL  $tool $tag"
        echo "$out" | tail -8
      fi
    done
  done
else
  echo "compute-sanitizer not found"
  fails=$((fails + 1))
fi
echo "gpu sweep: $((runs - fails)) of $runs passed"
[ "$fails" -eq 0 ]
