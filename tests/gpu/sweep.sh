#!/usr/bin/env bash
# GPU correctness sweep (CTest label gpu; run on the device, not in CI). Two phases:
# 1. checks: `napkin bench` checks the emitted kernels against the fp32 GPU reference (and the fp64
#    evaluator where small) over attention with d in {64, 128}, N in {128, 1000, 4096}, causal and
#    not, GQA, matmuls whose sizes do not divide the tiles, bf16 and fp16, rows kernels (normalisers
#    and one-axis reductions), calls, and
#    kernels that read mask and bias arrays (tests/gpu/*.napkin) at sizes that divide no tile, with
#    d = 64, 96 (mma.sync flash), 128 and 256; cases tagged `.mma.sync` run with
#    NAPKIN_NO_WGMMA=1, so the sm_80 variants of the Hopper kernels run too.
# 2. sanitizer: compute-sanitizer memcheck, racecheck, synccheck and initcheck on every case's
#    harness (`--no-time`: the check run only; the fp32 reference kernels, ref_*, are executed but
#    not instrumented), counting the errors each reports; one summary line per tool.
# Inputs are fresh random numbers: the seed is NAPKIN_SWEEP_SEED, else drawn and printed.
# Cases run JOBS at a time (one GPU is shared; only correctness is checked, not time).
# Usage: tests/gpu/sweep.sh NAPKIN_BINARY [--jobs J] [--budget SECONDS] [--no-sanitize] [--only REGEX]
#   --only: the cases whose tag matches the extended regular expression REGEX (grep -E), no others.
#   --budget: sanitizer runs not started within SECONDS of the start are reported as not run, and
#   every run is stopped (timeout) by SECONDS + 60.
# Exit status 0 only when every check passed and every sanitizer run reported 0 errors.
set -u
N=${1:?napkin binary}
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
lib=$root/diagrams/library
gpu=$root/tests/gpu
jobs=$(($(nproc) / 2 > 1 ? $(nproc) / 2 : 1))
budget=0 sanitize=1 only=
while [ $# -gt 0 ]; do
  case $1 in
    --jobs) jobs=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --no-sanitize) sanitize=0; shift ;;
    --only) only=$2; shift 2 ;;
    *) echo "sweep.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
seed=${NAPKIN_SWEEP_SEED:-$(( $(date +%s%N) % 1000000007 + 1 ))}
res=$(mktemp -d /tmp/sweep-results.XXXXXX)
echo "gpu sweep: seed $seed, $jobs jobs, results in $res"

cases=()  # "TAG FILE [--set a=n ...]"; a TAG ending in .mma.sync runs with NAPKIN_NO_WGMMA=1
add() { cases+=("$*"); }
for d in 64 128; do
  for n in 128 1000 4096; do
    add "att-d$d-n$n" "$lib/attention.napkin" --set b=1 --set h=2 --set q=$n --set x=$n --set d=$d
    add "causal-d$d-n$n" "$lib/causal_attention.napkin" --set b=1 --set h=2 --set q=$n --set x=$n --set d=$d
  done
done
# causal on mma.sync: interior chunks unmasked, the diagonal by 32-bit offsets (emit/cuda/render_score.cpp), keys
# fewer and more than queries
add causal-d64-n1000.mma.sync "$lib/causal_attention.napkin" --set b=1 --set h=2 --set q=1000 --set x=1000 --set d=64
add causal-q300-x517.mma.sync "$lib/causal_attention.napkin" --set b=1 --set h=2 --set q=300 --set x=517 --set d=64
add causal-q517-x300.mma.sync "$lib/causal_attention.napkin" --set b=1 --set h=2 --set q=517 --set x=300 --set d=64
add gqa-n1000 "$lib/gqa_attention.napkin" --set b=1 --set g=2 --set r=2 --set q=1000 --set x=1000
add gqa-n4096 "$lib/gqa_attention.napkin" --set b=2 --set g=2 --set r=4 --set q=4096 --set x=4096
add att-fp16-n1000 "$gpu/attention_fp16.napkin" --set b=1 --set h=2 --set q=1000 --set x=1000
add mm-1000x1000x1000 "$lib/matmul.napkin" --set a=1000 --set b=1000 --set c=1000
add mm-777x333x1001 "$lib/matmul.napkin" --set a=777 --set b=333 --set c=1001
# operands whose rows TMA cannot read in place: repacked for the wgmma path; the mma.sync path reads
# them in place by 8- or 4-byte cp.async or element by element (session 41)
add mm-777x333x1001.mma.sync "$lib/matmul.napkin" --set a=777 --set b=333 --set c=1001
add mm-1000x1002x1000 "$lib/matmul.napkin" --set a=1000 --set b=1002 --set c=1000
add mm-1000x1002x1000.mma.sync "$lib/matmul.napkin" --set a=1000 --set b=1002 --set c=1000
add mm-1000x1004x1000.mma.sync "$lib/matmul.napkin" --set a=1000 --set b=1004 --set c=1000
add gemm-fp8-1000x72x4040 "$root/tests/kernels/gemm_fp8.napkin" --set i=1000 --set j=72 --set k=4040
add gemm-fp8-1000x72x4040.mma.sync "$root/tests/kernels/gemm_fp8.napkin" --set i=1000 --set j=72 --set k=4040
add attention-fp8-q260-x1001 "$root/tests/kernels/attention_fp8.napkin" --set b=1 --set h=2 --set q=260 --set x=1001
add mm-fp16-1000x520x3000 "$gpu/matmul_fp16.napkin" --set a=1000 --set b=520 --set c=3000
add mm-out-transposed "$gpu/matmul_out_transposed.napkin"
# two consumer warpgroups taking tiles in turn (warps 8 pingpong), an epilogue input read along both axes
add mm-residual-pingpong-333x512x520 "$gpu/matmul_residual.napkin" --schedule "$gpu/matmul_residual_pingpong.schedule" --set t=333 --set m=512 --set f=520
add mm-out-transposed-1000x333x520 "$gpu/matmul_out_transposed.napkin" --set a=1000 --set b=333 --set c=520
# tiles wider than one wgmma N: two atoms side by side (160 + 160 over a K-major B, 192 + 128 over an
# N-major one), edge tiles along both axes; and the same tiles on mma.sync
add mm-nt-wide-1000x512x1001 "$gpu/matmul_nt.napkin" --schedule "$gpu/wide_nt.schedule"
add grouped-wide-777x3x333x1001 "$gpu/grouped_linear_small.napkin" --schedule "$gpu/wide_grouped.schedule"
add grouped-wide-777x3x333x1001.mma.sync "$gpu/grouped_linear_small.napkin" --schedule "$gpu/wide_grouped.schedule"
add dual-gemm-1000x520x3000 "$gpu/dual_gemm.napkin" --set t=1000 --set m=520 --set f=3000
add dual-gemm-333x200x130 "$gpu/dual_gemm.napkin" --set t=333 --set m=200 --set f=130
add mlp-300x256x520 "$lib/mlp_swiglu.napkin" --set t=300 --set m=256 --set f=520
add gelu-300x256x520 "$lib/matmul_bias_gelu.napkin" --set t=300 --set m=256 --set f=520
add gelu-tanh-300x256x520 "$lib/matmul_bias_gelu_tanh.napkin" --set t=300 --set m=256 --set f=520
add gelu-tanh-333x512x1000 "$lib/matmul_bias_gelu_tanh.napkin" --set t=333 --set m=512 --set f=1000  # edge tiles along t and f
add bmm-3x200x128x300 "$lib/batched_matmul.napkin" --set n=3 --set a=200 --set b=128 --set c=300
add softmax-50x5000 "$lib/softmax.napkin" --set t=50 --set v=5000
add layernorm-100x1000 "$lib/layernorm.napkin" --set t=100 --set m=1000
add rmsnorm-100x1000 "$lib/rmsnorm.napkin" --set t=100 --set m=1000
# rows whose re-read would miss the L2: a prefix of each row kept in SMEM by the statistics walk
# (lower/rows_form.hpp RowsForm::staged), the prefix's end inside a chunk of the walk
add softmax-staged-1000x50008 "$lib/softmax.napkin" --set t=1000 --set v=50008
add layernorm-staged-1000x50000 "$lib/layernorm.napkin" --set t=1000 --set m=50000
add rows-fused-staged-700x65536 "$root/tests/language/rmsnorm_rows_fused.napkin" --set t=700 --set m=65536
# rows masked throughout (NaN) and rows that start masked: softmax's update per 16-byte access and its map
add softmax-masked-rows-1100x1000 "$gpu/softmax_masked_rows.napkin"
add softmax-masked-rows-1100x1001 "$gpu/softmax_masked_rows.napkin" --set v=1001
# rows of a length that is not a multiple of 8: the scalar path of the rows kernel
add softmax-50x5003 "$lib/softmax.napkin" --set t=50 --set v=5003
add layernorm-100x1001 "$lib/layernorm.napkin" --set t=100 --set m=1001
# one-axis reductions on the rows strategy: teams of 4 and 2 lanes (short rows on the 16-byte path), of warps, the scalar path
add rowsum-4x4096x128 "$gpu/row_sum.napkin" --set b=4 --set q=4096
add rowsum-4x4001x24 "$gpu/row_sum.napkin" --set b=4 --set q=4001 --set d=24
add rowsum-3x333x37 "$gpu/row_sum.napkin" --set d=37
add rowmax-50000x40 "$gpu/row_max.napkin" --set t=50000
add rowmax-777x1001 "$gpu/row_max.napkin" --set v=1001
add rowmean-96x500 "$gpu/row_mean.napkin"
# an element-wise map of a reduction (rmsnorm's rstd times a per-row array): the storing lane maps
add rowrstd-3001x4096 "$gpu/row_rstd.napkin"
add rowrstd-5x40 "$gpu/row_rstd.napkin" --set t=5 --set m=40
# reductions under a band mask walk only the band (a rename, a prefix sum, a window)
add band-loops-300 "$root/tests/language/band_loops.napkin"
add band-loops-333x77 "$root/tests/language/band_loops.napkin" --set s=333 --set x=333 --set d=77
# a reduction over two axes down the columns (a norm's weight gradient over batch and tokens)
add colsum2-3x111x264 "$root/tests/language/col_sum_two_axes.napkin"
# transposed copies (strategy transpose): tiles through SMEM at sizes that divide no tile, bf16 and fp8
add transpose-3x130x77 "$root/tests/language/transpose.napkin"
add transpose-fp8-2x3x200x72 "$root/tests/language/transpose_fp8.napkin"
add transpose-fp8-1x32x8192x128 "$root/tests/language/transpose_fp8.napkin" --set b=1 --set h=32 --set x=8192 --set d=128
add colsum2-2x1024x4096 "$root/tests/language/col_sum_two_axes.napkin" --set b=2 --set s=1024 --set m=4096
add colsum2-2x77x130 "$root/tests/language/col_sum_two_axes.napkin" --set b=2 --set s=77 --set m=130
# statements sharing one rows kernel (rmsnorm's forward with its rstd, its backward's row mean read
# by dX): the vector path, the scalar path, teams of lanes over short rows
add rows-fused-300x1000 "$root/tests/language/rmsnorm_rows_fused.napkin"
add rows-fused-300x1001 "$root/tests/language/rmsnorm_rows_fused.napkin" --set m=1001
add rows-fused-3001x40 "$root/tests/language/rmsnorm_rows_fused.napkin" --set t=3001 --set m=40
# normalisers written out (derive-bind-reduction: each reduction bound to a statistic, the statistics
# and maps in rows kernels): RMSNorm and softmax written out; l2norm attention's normalisations
add written-out-300x1000 "$root/tests/language/normalisers_written_out.napkin"
add written-out-300x1001 "$root/tests/language/normalisers_written_out.napkin" --set m=1001
add written-out-3001x40 "$root/tests/language/normalisers_written_out.napkin" --set t=3001 --set m=40
add l2norm-attention-1x2x260 "$lib/l2norm_attention.napkin" --set b=1 --set h=2 --set q=260 --set x=260
# reductions down the columns on the cols strategy: 16 lanes of bf16, two column axes with a map, fp16 with a ragged row count
add colsum-2048x4096 "$gpu/col_sum.napkin"
add colsum-333x77 "$gpu/col_sum.napkin" --set t=333 --set m=77
add colmax-1000x3x77 "$gpu/col_max.napkin"
add colmean-999x1000 "$gpu/col_mean.napkin"
# normalisers over short rows: teams of 16 and 8 lanes (two walks), teams past the block's rows
add softmax-20000x128 "$lib/softmax.napkin" --set t=20000 --set v=128
add layernorm-20000x96 "$lib/layernorm.napkin" --set t=20000 --set m=96
add rmsnorm-3001x40 "$lib/rmsnorm.napkin" --set t=3001 --set m=40
# calls: the transformer block (Q scaled, see the file) runs its callees' kernels (RMSNorm mapped
# over b, GQA, SwiGLU whose result the residual add reads from a buffer)
add call-block "$gpu/call_block.napkin" --set b=2 --set s=96 --set m=256 --set g=2 --set r=2 --set d=64 --set f=384
# the language's masks and positions on the GPU (issue 13): a sliding window (no tile skipping) with
# ALiBi from pos(q) - pos(x), on both flash paths, and a band mask with element-wise min/max/abs
add window-alibi-n300 "$root/tests/language/sliding_window_alibi.napkin"
add window-alibi-n300.mma.sync "$root/tests/language/sliding_window_alibi.napkin"
add window-alibi-q130-x777 "$root/tests/language/sliding_window_alibi.napkin" --set q=130 --set x=777
add banded-elementwise "$root/tests/language/banded_elementwise.napkin"
# rows masked throughout (more queries than keys, a band after the query): NaN as in the evaluator, on both flash paths
add masked-rows-q300-x260 "$gpu/attention_masked_rows.napkin"
add masked-rows-q300-x260.mma.sync "$gpu/attention_masked_rows.napkin"
# mask and bias arrays read by score maps and epilogues, at sizes that divide no tile (issue 12)
add mask-bf16-n260 "$gpu/attention_mask_bf16.napkin" --set q=260 --set x=260
add mask-bf16-n260.mma.sync "$gpu/attention_mask_bf16.napkin" --set q=260 --set x=260
add mask-bf16-d64-q130-x777 "$gpu/attention_mask_bf16.napkin" --set q=130 --set x=777 --set d=64
add mask-bf16-d96-n260 "$gpu/attention_mask_bf16.napkin" --set q=260 --set x=260 --set d=96
add mask-bf16-d256-n260 "$gpu/attention_mask_bf16.napkin" --set q=260 --set x=260 --set d=256
add mask-fp32-n260 "$gpu/attention_mask_fp32.napkin" --set q=260 --set x=260
add mask-fp32-d64-q777-x130 "$gpu/attention_mask_fp32.napkin" --set q=777 --set x=130 --set d=64
add bias-n260 "$gpu/attention_bias.napkin" --set q=260 --set x=260
add bias-d96-q130-x777 "$gpu/attention_bias.napkin" --set q=130 --set x=777 --set d=96
add causal-mask-n260 "$gpu/causal_attention_mask.napkin" --set q=260 --set x=260
add causal-mask-n260.mma.sync "$gpu/causal_attention_mask.napkin" --set q=260 --set x=260
add causal-mask-d64-n777 "$gpu/causal_attention_mask.napkin" --set q=777 --set x=777 --set d=64
add mm-bias-777x333x1001 "$gpu/matmul_bias.napkin" --set t=777 --set m=333 --set f=1001
add mm-bias-777x520x1000 "$gpu/matmul_bias.napkin" --set t=777 --set m=520 --set f=1000  # rows of 16-byte multiples: wgmma
add mm-bias-777x520x1000.mma.sync "$gpu/matmul_bias.napkin" --set t=777 --set m=520 --set f=1000
add mm-bias-130x260x130 "$gpu/matmul_bias.napkin" --set t=130 --set m=260 --set f=130
# the generalised forms (issue 12): several contracted axes, thin and per-group GEMMs, sigmoid and
# d_qk != d_v attention; aligned and unaligned sizes
add multik-777x333-g3r2d100 "$gpu/gemm_multi_k.napkin" --set s=777 --set m=333 --set g=3 --set r=2 --set d=100
add multik-777x336-g3r2d72 "$gpu/gemm_multi_k.napkin" --set s=777 --set m=336 --set g=3 --set r=2 --set d=72
add multik-777x336-g3r2d72.mma.sync "$gpu/gemm_multi_k.napkin" --set s=777 --set m=336 --set g=3 --set r=2 --set d=72
add grouped-777-g3-333x1001 "$gpu/grouped_linear_small.napkin" --set t=777 --set g=3 --set i=333 --set o=1001
add grouped-4096-g8-1024 "$gpu/grouped_linear_small.napkin" --set t=4096 --set g=8 --set i=1024 --set o=1024
add thin-8192x4096x16 "$gpu/matmul_thin.napkin" --set a=8192 --set b=4096 --set c=16
add thin-16x4096x8192 "$gpu/matmul_thin.napkin" --set a=16 --set b=4096 --set c=8192
add thin-4001x1001x20 "$gpu/matmul_thin.napkin" --set a=4001 --set b=1001 --set c=20
add thin-20x1000x4000 "$gpu/matmul_thin.napkin" --set a=20 --set b=1000 --set c=4000
add sigmoid-n260 "$gpu/sigmoid_attention_small.napkin"
add sigmoid-n260.mma.sync "$gpu/sigmoid_attention_small.napkin"
add sigmoid-d64-q333-x517 "$gpu/sigmoid_attention_small.napkin" --set q=333 --set x=517 --set d=64
add cross192-q260-x333 "$gpu/cross_attention_192.napkin"
add cross192-q260-x333.mma.sync "$gpu/cross_attention_192.napkin"
add cross-dk64-dv256-q130-x777 "$gpu/cross_attention_192.napkin" --set dk=64 --set dv=256 --set q=130 --set x=777
# backward diagrams (napkin grad): flash_bwd with one stream and with the query heads as an outer
# stream (grouped-query attention), causal and not, at sizes that divide no tile
"$N" grad "$lib/attention.napkin" --wrt Q,K,V -o "$res/attention_grad.napkin" >/dev/null
"$N" grad "$lib/causal_attention.napkin" --wrt Q,K,V -o "$res/causal_attention_grad.napkin" >/dev/null
"$N" grad "$lib/gqa_attention.napkin" --wrt Q,K,V -o "$res/gqa_attention_grad.napkin" >/dev/null
add att-bwd-q200-x300 "$res/attention_grad.napkin" --diagram attention_bwd --set b=1 --set h=2 --set q=200 --set x=300
add att-bwd-q200-x300.mma.sync "$res/attention_grad.napkin" --diagram attention_bwd --set b=1 --set h=2 --set q=200 --set x=300
add causal-bwd-n333 "$res/causal_attention_grad.napkin" --diagram causal_attention_bwd --set b=1 --set h=2 --set q=333 --set x=333
add gqa-bwd-q333-x200 "$res/gqa_attention_grad.napkin" --diagram gqa_attention_bwd --set g=2 --set r=3 --set q=333 --set x=200 --set d=64
add gqa-bwd-q333-x200.mma.sync "$res/gqa_attention_grad.napkin" --diagram gqa_attention_bwd --set g=2 --set r=3 --set q=333 --set x=200 --set d=64
add gqa-bwd-n1000 "$res/gqa_attention_grad.napkin" --diagram gqa_attention_bwd --set g=2 --set r=2 --set q=1000 --set x=1000
add gqa-bwd-n1000.mma.sync "$res/gqa_attention_grad.napkin" --diagram gqa_attention_bwd --set g=2 --set r=2 --set q=1000 --set x=1000

if [ -n "$only" ]; then  # --only: keep the cases whose tag matches
  kept=()
  for c in "${cases[@]}"; do grep -qE -- "$only" <<< "${c%% *}" && kept+=("$c"); done
  cases=("${kept[@]}")
  echo "gpu sweep: --only '$only': ${#cases[@]} cases"
fi
wgmma_env() { case $1 in *.mma.sync) echo NAPKIN_NO_WGMMA=1 ;; *) echo NAPKIN_NO_WGMMA=0 ;; esac; }
throttle() { while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n; done; }

check() {  # check TAG FILE [--set ...]: writes $res/TAG.check (first line ok or FAIL)
  local tag=$1 file=$2
  shift 2
  local out
  if out=$(env "$(wgmma_env "$tag")" "$N" bench "$file" --workdir "/tmp/sweep-$tag" --runs 20 --seed "$seed" "$@" 2>&1) &&
    echo "$out" | grep -q "result: correct"; then
    echo "ok    $tag: $(echo "$out" | grep -m1 'check .* fp32' | sed 's/.*= //')  [$(echo "$out" | grep -oE '^  [A-Za-z_]+ +((gemm|flash|flash_bwd)(/[a-z.]+)?|rows|cols|simt|call) ' | awk '{print $2}' | tr '\n' ' ')]" >"$res/$tag.check"
  else
    { echo "FAIL  $tag"; echo "$out" | tail -20; } >"$res/$tag.check"
  fi
}
for c in "${cases[@]}"; do
  read -r -a a <<<"$c"
  throttle
  check "${a[@]}" &
done
wait
runs=0 fails=0 passed=()
for c in "${cases[@]}"; do
  tag=${c%% *}
  runs=$((runs + 1))
  cat "$res/$tag.check"
  if head -1 "$res/$tag.check" | grep -q '^ok'; then passed+=("$tag"); else fails=$((fails + 1)); fi
done
echo "gpu sweep checks: $((runs - fails)) of $runs passed (seed $seed)"

tools=(memcheck racecheck synccheck initcheck)
if [ "$sanitize" = 1 ]; then
  if ! command -v compute-sanitizer >/dev/null; then
    echo "compute-sanitizer not found"
    fails=$((fails + 1))
  else
    sanitize_one() {  # sanitize_one TAG TOOL: $res/TAG.TOOL.log, .rc
      local tag=$1 tool=$2 limit=300
      [ "$budget" -gt 0 ] && [ $((budget + 60 - SECONDS)) -lt $limit ] && limit=$((budget + 60 - SECONDS))
      # initcheck does not count TMA stores as writes (tests/gpu/initcheck_probe.cu): its runs take the direct-store epilogue
      local store=NAPKIN_NO_TMA_STORE=0
      [ "$tool" = initcheck ] && store=NAPKIN_NO_TMA_STORE=1
      (cd "/tmp/sweep-$tag" && env "$(wgmma_env "$tag")" "$store" timeout "$limit" compute-sanitizer --tool "$tool" --error-exitcode 9 \
        --kernel-name-exclude kns=ref_ ./harness --no-time --seed "$seed") >"$res/$tag.$tool.log" 2>&1
      echo $? >"$res/$tag.$tool.rc"
    }
    # the largest cases (n4096) last, so that a budget leaves out the slowest runs
    order=()
    for tag in "${passed[@]}"; do [[ $tag == *n4096* ]] || order+=("$tag"); done
    for tag in "${passed[@]}"; do [[ $tag == *n4096* ]] && order+=("$tag"); done
    for tag in "${order[@]}"; do
      for tool in "${tools[@]}"; do
        throttle
        if [ "$budget" -gt 0 ] && [ "$SECONDS" -ge "$budget" ]; then break 2; fi
        sanitize_one "$tag" "$tool" &
      done
    done
    wait
    # Errors a run reported: its ERROR SUMMARY, else racecheck's "(N errors", else 0 when it exited 0.
    errors_of() {
      local log=$1 rc=$2 n
      n=$(grep -oE 'ERROR SUMMARY: [0-9]+ errors?$' "$log" | grep -oE '[0-9]+' | tail -1)  # not "N errors were not printed"
      [ -z "$n" ] && n=$(grep -oE '\(([0-9]+) errors?' "$log" | grep -oE '[0-9]+' | tail -1)
      [ -z "$n" ] && [ "$rc" = 0 ] && n=0
      echo "${n:-?}"
    }
    declare -A total
    notrun=0 broken=0
    for tool in "${tools[@]}"; do total[$tool]=0; done
    for tag in "${passed[@]}"; do
      line="san   $tag:"
      bad=0
      for tool in "${tools[@]}"; do
        if [ ! -f "$res/$tag.$tool.rc" ]; then
          line+=" $tool not-run"
          notrun=$((notrun + 1))
          continue
        fi
        rc=$(cat "$res/$tag.$tool.rc")
        n=$(errors_of "$res/$tag.$tool.log" "$rc")
        line+=" $tool $n"
        if [ "$n" = "?" ]; then broken=$((broken + 1)) bad=1; else total[$tool]=$((total[$tool] + n)); [ "$n" -gt 0 ] && bad=1; fi
        [ "$rc" != 0 ] && [ "$rc" != 9 ] && bad=1 && line+="(exit $rc$([ "$rc" = 124 ] && echo ', timed out'))"
      done
      echo "$line"
      if [ "$bad" = 1 ]; then
        fails=$((fails + 1))
        for tool in "${tools[@]}"; do
          [ -f "$res/$tag.$tool.log" ] && [ "$(cat "$res/$tag.$tool.rc")" != 0 ] && { echo "  --- $tool $tag"; grep -v '^=========     ' "$res/$tag.$tool.log" | head -12; }
        done
      fi
    done
    echo "sanitizer: ${#passed[@]} harnesses x ${#tools[@]} tools: memcheck ${total[memcheck]} errors, racecheck ${total[racecheck]}," \
      "synccheck ${total[synccheck]}, initcheck ${total[initcheck]}; $broken runs without a count, $notrun not run (budget)"
    [ "$notrun" -gt 0 ] && fails=$((fails + 1))
  fi
fi
echo "gpu sweep: $((runs - fails)) of $runs passed"
[ "$fails" -eq 0 ]
