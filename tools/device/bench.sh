#!/usr/bin/env bash
# Runs napkin bench on a lent GPU machine (see docs/benchmarks.md). The machine lacks napkin's
# Debian libraries, so the call carries build/cli/napkin and .devlibs/ (tools/device/pack.sh).
# ISSUE12_CASES=REGEX limits the issue12 mode to the cases whose tag matches it whole.
# Usage: tools/device/bench.sh quick|bundled|grads|candidates|gemm|fp8|fp8attn|int8|compare|variants|attention|perf|torch|issue12|torch-eval|regress|sweep|tiles|initcheck-probe|ncu|stalls|calibrate [MODE...]   (outputs under $OUT when set)
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
  if ! $N bench "diagrams/library/$file.napkin" --workdir "/tmp/nb-$tag" ${HW:+--hw "$HW"} "$@" 2>&1 | tee "$out/$tag.txt"; then fails=$((fails + 1)); fi
  cp "/tmp/nb-$tag/harness.json" "$out/$tag.harness.json" 2>/dev/null
}
torch_vs_eval() {  # every bundled diagram at evaluator sizes: the torch modules against napkin eval, on the CPU
  local small=(
    attention --set h=2 --set q=33 --set x=40 --set d=16 -- causal_attention --set h=2 --set q=33 --set x=40 --set d=16
    -- gqa_attention --set g=2 --set r=2 --set q=20 --set x=20 --set d=8 -- cross_attention --set h=2 --set q=40 --set x=50
    --set dk=24 --set dv=16 -- sigmoid_attention --set h=2 --set q=40 --set x=50 --set d=16 -- l2norm_attention --set h=2
    --set q=40 --set x=50 --set d=16 -- layernorm --set t=10 --set m=30 -- rmsnorm --set t=10 --set m=30 -- softmax --set t=5
    --set v=100 -- matmul --set a=20 --set b=30 --set c=10 -- matmul_bias_gelu --set t=10 --set m=20 --set f=30 -- matmul_bias_gelu_tanh --set t=10 --set m=20 --set f=30 -- mlp_swiglu
    --set t=10 --set m=20 --set f=30 -- batched_matmul --set n=3 --set a=5 --set b=7 --set c=4 -- rmsnorm_linear --set t=30
    --set m=20 --set f=30 -- grouped_linear --set t=30 --set g=3 --set i=20 --set o=25 -- transformer_block --set b=2
    --set s=21 --set m=40 --set g=2 --set r=2 --set d=12 --set f=70)
  local files=(); for a in "${small[@]}"; do case $a in --*|*=*) files+=("$a") ;; *) files+=("diagrams/library/$a.napkin") ;; esac; done
  CUDA_VISIBLE_DEVICES= python3 tools/torch_vs_eval.py "$N" "${files[@]}"
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
  fp8)  # the fp8 GEMM (tests/kernels/gemm_fp8.napkin: fp8e4m3 A[i,k], B[j,k], per-tensor scales, bf16 out):
    # per shape, emitted and built for sm_90a, checked element by element against fp32 of the
    # dequantised inputs on fresh random inputs, then timed against torch._scaled_mm (cuBLASLt) in
    # the same run, with the model's prediction (napkin derive) and its error
    hw=h100; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && hw=h200
    for shape in 8192,8192,8192 8192,256,4096 1000,1000,1008; do  # the goal's 8192^3, a thin N, odd M, N and a K of 7.9 chunks
      IFS=, read -r si sj sk <<< "$shape"
      tag=fp8-${si}x${sj}x${sk}
      sets=(--hw $hw --set i=$si --set j=$sj --set k=$sk)
      echo "=== $tag: napkin emit tests/kernels/gemm_fp8.napkin ${sets[*]}; compare_torch.py fp8_gemm"
      pred=$($N derive tests/kernels/gemm_fp8.napkin "${sets[@]}" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["predicted_seconds"] * 1e6)')
      $N emit tests/kernels/gemm_fp8.napkin --target cuda "${sets[@]}" -o "/tmp/$tag.cu" &&
        nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o "/tmp/$tag.so" "/tmp/$tag.cu" &&
        python3 kernels/reference/compare_torch.py fp8_gemm --so "/tmp/$tag.so" --sizes "$shape" --predicted-us "$pred" --json "$out/$tag.torch.json" |
          tee "$out/$tag.torch.txt" && [ "${PIPESTATUS[0]}" -eq 0 ] || fails=$((fails + 1))
    done
    ;;
  compare)  # issue 17: napkin compare --measure, measured beside predicted for each dtype, on the
    # declared sizes: attention (Llama-3-8B, one layer) and the K-major GEMM of tests/kernels/gemm_fp8.napkin.
    # Under fp8e4m3 the inputs are stored in fp8 and the outputs in bf16 (the quantized storage rule), and
    # attention's V[b,h,x,d] gets a K-major copy (derive-operand-relayout: V_k[b,h,d,x]) so that O += P V
    # takes the fp8 flash form on wgmma: attention's fp8 row shows 2 kernels. The K-major GEMM also names
    # the other Hopper description, whose rows say why they are not measured on this GPU.
    hw=h100; other=h200; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && hw=h200 && other=h100
    for f in diagrams/library/attention.napkin tests/kernels/gemm_fp8.napkin; do
      tag=compare-$(basename "$f" .napkin)
      hws=$hw; [ "$f" = tests/kernels/gemm_fp8.napkin ] && hws=$hw,$other
      echo "=== $tag: napkin compare $f --hw $hws --dtype bf16,fp8e4m3 --measure"
      $N compare "$f" --hw "$hws" --dtype bf16,fp8e4m3 --measure --workdir "/tmp/nc-$tag" -o "$out/$tag" 2>&1 | tee "$out/$tag.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || fails=$((fails + 1))
      for r in /tmp/nc-$tag/*/harness.json; do [ -f "$r" ] && cp "$r" "$out/$tag.$(basename "$(dirname "$r")").harness.json"; done
    done
    ;;
  int8)  # the int8 GEMM (tests/kernels/gemm_int8.napkin: int8 A[i,k], B[j,k], int32 accumulation, per-tensor scales, bf16 out):
    # per shape, emitted and built for the GPU's arch (mma.sync m16n8k32), checked element by element
    # against the exact product on fresh random inputs, then timed against torch._int_mm + the scale
    # in fp32 + the cast to bf16 (the reference: the same output) and torch._int_mm alone (int32
    # out) in the same run, with the model's prediction (napkin derive) and its error
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
    hw=h100 arch=sm_90a
    case $gpu in *H200*) hw=h200 ;; *A100*) hw=a100 arch=sm_80 ;; esac
    for shape in 8192,8192,8192 8192,256,4096 1000,72,1008; do  # the goal's 8192^3, a thin N, odd M and K (K of 7.9 chunks)
      IFS=, read -r si sj sk <<< "$shape"
      tag=int8-${si}x${sj}x${sk}
      sets=(--hw $hw --set i=$si --set j=$sj --set k=$sk)
      echo "=== $tag: napkin emit tests/kernels/gemm_int8.napkin ${sets[*]}; compare_torch.py int8_gemm"
      pred=$($N derive tests/kernels/gemm_int8.napkin "${sets[@]}" --format json | python3 -c 'import json,sys; print(json.load(sys.stdin)["predicted_seconds"] * 1e6)')
      $N emit tests/kernels/gemm_int8.napkin --target cuda "${sets[@]}" -o "/tmp/$tag.cu" &&
        nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_${arch#sm_},code=$arch -o "/tmp/$tag.so" "/tmp/$tag.cu" &&
        python3 kernels/reference/compare_torch.py int8_gemm --so "/tmp/$tag.so" --sizes "$shape" --predicted-us "$pred" --json "$out/$tag.torch.json" |
          tee "$out/$tag.torch.txt" && [ "${PIPESTATUS[0]}" -eq 0 ] || fails=$((fails + 1))
    done
    ;;
  fp8attn)  # the fp8 attention forward (tests/kernels/attention_fp8.napkin: fp8e4m3 Q, K, Vt[b,h,d,x],
    # per-tensor scales, bf16 out) and napkin's bf16 attention at B4 H16 N4096 d128 in the same run:
    # each napkin bench checks element by element against the fp32 reference of the (dequantised)
    # inputs on fresh random inputs first (fp8: max|err| / max|ref| <= 2^-4, e4m3's unit roundoff:
    # kernels/bench.cpp check_tolerance), then times; then the fp8/bf16 speed ratio and each model error
    hw=h100; nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 && hw=h200
    seed=$(( $(date +%s) % 1000000 ))
    sets=(--hw "$hw" --set b=4 --set h=16 --set q=4096 --set x=4096 --seed "$seed" --format json)
    for c in "fp8attn-4x16x4096 tests/kernels/attention_fp8.napkin" "bf16attn-4x16x4096 diagrams/library/attention.napkin"; do
      read -r tag file <<< "$c"
      echo "=== $tag: napkin bench $file ${sets[*]}"
      $N bench "$file" --workdir "/tmp/nb-$tag" "${sets[@]}" > "$out/$tag.json" 2> "$out/$tag.err" || fails=$((fails + 1))
      tail -5 "$out/$tag.err"
    done
    python3 - "$out/fp8attn-4x16x4096.json" "$out/bf16attn-4x16x4096.json" <<'PY' | tee "$out/fp8attn-summary.txt" || fails=$((fails + 1))
import json, sys
runs = []
for path in sys.argv[1:]:
    try:
        runs.append(json.load(open(path)))
    except (OSError, ValueError) as e:
        sys.exit(f"fp8attn: no report in {path}: {e}")
for name, r in zip(("fp8e4m3", "bf16"), runs):
    for c in r["check_fp32_gpu_reference"]:
        print(f"{name}: check {c['output']} vs fp32 reference: max|err| / max|ref| = {c['max_err_over_max_ref']:.3e} (tolerance {r['tolerance']:.3e}) {'ok' if c['pass'] else 'FAILED'}")
    for k in r["kernels"]:
        print(f"{name}: kernel {k['kernel']} ({k['strategy']}): measured {k['measured_s'] * 1e6:.1f} us, {k['tflops']:.0f} TFLOP/s, "
              f"predicted {k['predicted_s'] * 1e6:.1f} us ({k['model_error'] * 100:+.0f}%)")
    print(f"{name}: derived {r['derived_s'] * 1e6:.1f} us ({r['derived_tflops']:.0f} TFLOP/s), predicted {r['derived_predicted_s'] * 1e6:.1f} us "
          f"({(r['derived_predicted_s'] / r['derived_s'] - 1) * 100:+.0f}%), on {r['device']}")
fp8, bf16 = runs
print(f"fp8/bf16 speed ratio: {bf16['derived_s'] / fp8['derived_s']:.2f}x (goal: at least 1.5x); "
      f"predicted ratio {bf16['derived_predicted_s'] / fp8['derived_predicted_s']:.2f}x")
sys.exit(0 if fp8["pass"] and bf16["pass"] else 1)
PY
    ;;
  variants)  # hand-written schedules (tools/device/schedules/*.schedule, or $VARIANTS; first line `# bench: DIAGRAM [--set ...]`)
    for f in ${VARIANTS:-tools/device/schedules/*.schedule}; do
      read -r -a spec <<< "$(sed -n 's/^# bench: //p' "$f" | head -1)"
      bench "variant-$(basename "$f" .schedule)" "${spec[@]}" --schedule "$f"
    done
    ;;
  issue12)  # issue 12's goals: per case `napkin bench` (timing, the model's error) and
    # compare_torch.py generic (the emitted torch module, eager and torch.compile, checked against
    # its fp32 reference mode). Phase 1 builds everything at once (nvcc through nvcc_cached.sh;
    # the torch modules; torch.compile's caches warmed one case at a time); phase 2 times one case
    # at a time. Sized for about 7 minutes on an H100 (an estimate, not yet measured; budget 9).
    export NVCC_CACHE_DIR=/tmp/napkin-nvcc-cache TORCHINDUCTOR_FX_GRAPH_CACHE=1
    nvcc_cached=$PWD/tools/device/nvcc_cached.sh
    # Inputs: both napkin bench and compare_torch.py draw each at 1/sqrt(fan-in) where it meets a computed
    # array (diagrams/input_scales.hpp), so that activations stay O(1); SCALES overrides that for the torch check.
    cases=(  # TAG DIAGRAM SIZES (NAME=SIZE,...; - for the diagram's own) SCALES (compare_torch.py --scale; - for none)
      "cross cross_attention - -"
      "sigmoid sigmoid_attention - -"
      "l2norm l2norm_attention - -"
      "rmsnorm-linear rmsnorm_linear - -"
      "grouped-linear grouped_linear - -"
      "mm-8192x4096x256 matmul a=8192,b=4096,c=256 -"
      "mm-8192x256x4096 matmul a=8192,b=256,c=4096 -"
      "tb-2048 transformer_block b=1,s=2048 -"
      "tb-8192 transformer_block b=1,s=8192 -"
    )
    if [ -n "${ISSUE12_CASES:-}" ]; then  # a regex on the tags: run only those (the whole table takes over one 600 s call)
      kept=(); for c in "${cases[@]}"; do [[ ${c%% *} =~ ^(${ISSUE12_CASES})$ ]] && kept+=("$c"); done; cases=("${kept[@]}")
      echo "=== issue12: cases ${cases[*]%% *}"
    fi
    set_args() { sets=(); [ "$1" = - ] || for kv in ${1//,/ }; do sets+=(--set "$kv"); done; }
    start=$SECONDS
    for c in "${cases[@]}"; do
      read -r tag file sizes scales <<< "$c"
      set_args "$sizes"
      (NVCC_CACHE_BUILD_ONLY=1 $N bench "diagrams/library/$file.napkin" --workdir "/tmp/nb-$tag" --nvcc "$nvcc_cached" ${HW:+--hw "$HW"} "${sets[@]}" >/dev/null 2>&1
       $N emit "diagrams/library/$file.napkin" --target cuda ${HW:+--hw "$HW"} "${sets[@]}" -o "/tmp/$tag.cu" &&
         nvcc -O3 -std=c++17 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -o "/tmp/$tag.so" "/tmp/$tag.cu") > "$out/$tag.build.txt" 2>&1 &
      $N emit "diagrams/library/$file.napkin" --target torch "${sets[@]}" -o "/tmp/$tag.py" || echo "=== $tag: emit --target torch failed"
    done
    (torch_vs_eval > "$out/torch_vs_eval.txt" 2>&1 || echo "=== issue12: tools/torch_vs_eval.py FAILED (see torch_vs_eval.txt)") &
    for c in "${cases[@]}"; do  # the GPU does nothing else meanwhile: nothing is timed in phase 1
      read -r tag file sizes scales <<< "$c"
      timeout 120 python3 kernels/reference/compare_torch.py generic --module "/tmp/$tag.py" --sizes "${sizes/#-/}" --compile-only 2>&1 | tail -1
    done
    wait
    tail -1 "$out/torch_vs_eval.txt"
    echo "=== issue12: phase 1 (builds, torch modules against the evaluator, torch.compile warm-up) took $((SECONDS - start)) s"
    for c in "${cases[@]}"; do
      read -r tag file sizes scales <<< "$c"
      set_args "$sizes"
      bench "$tag" "$file" "${sets[@]}" --runs 20 --nvcc "$nvcc_cached"
      scale_args=(); [ "$scales" = - ] || scale_args=(--scale "$scales")
      echo "=== $tag: compare_torch.py generic ${sizes/#-/(declared sizes)} ${scale_args[*]}"
      if [ -f "/tmp/$tag.so" ]; then
        timeout 180 python3 kernels/reference/compare_torch.py generic --so "/tmp/$tag.so" --module "/tmp/$tag.py" --sizes "${sizes/#-/}" \
          "${scale_args[@]}" --runs 20 --json "$out/$tag.torch.json" 2>&1 | tee "$out/$tag.torch.txt"
        [ "${PIPESTATUS[0]}" -eq 0 ] || fails=$((fails + 1))
      else
        echo "no /tmp/$tag.so: see $out/$tag.build.txt"; tail -5 "$out/$tag.build.txt"; fails=$((fails + 1))
      fi
      echo "=== issue12: $((SECONDS - start)) s so far"
    done
    ;;
  torch-eval)  # the torch modules of every bundled diagram against the fp64 evaluator (CPU; issue12 runs it too)
    torch_vs_eval 2>&1 | tee "$out/torch_vs_eval.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || fails=$((fails + 1))
    ;;
  regress)  # issue 12's GEMM goals beside the regression check: GEMM 8192^3 and the two thin GEMMs, derived, against cuBLAS
    bench gemm-8192 matmul --set a=8192 --set b=8192 --set c=8192
    bench mm-8192x4096x256 matmul --set a=8192 --set b=4096 --set c=256
    bench mm-8192x256x4096 matmul --set a=8192 --set b=256 --set c=4096
    ;;
  ncu)  # Nsight Compute (--set full, source-level stall sampling) on napkin's kernels in earlier modes' harnesses ($NCU_TAGS: bench tags)
    for tag in ${NCU_TAGS:-}; do
      echo "=== ncu $tag" | tee -a "$out/ncu.txt"
      (cd "/tmp/nb-$tag" && timeout 200 ncu --kernel-name-base demangled -k regex:'^napkin_' --launch-count 1 --set full \
         --import-source no ./harness --no-time 2>&1 | grep -v '^==PROF==') >> "$out/ncu.txt"
      echo "=== ncu $tag: the first cuBLAS kernel (its name gives its tiles)" | tee -a "$out/ncu.txt"
      (cd "/tmp/nb-$tag" && timeout 200 ncu --kernel-name-base demangled -k regex:'nvjet|sm90|gemm|cutlass' --launch-count 1 --section SpeedOfLight \
         --section LaunchStats ./harness --runs 20 2>&1 | grep -v '^==PROF==' | grep -A40 -E 'nvjet|sm90|gemm|cutlass' | head -60) | tee -a "$out/ncu.txt"
    done
    ;;
  stalls)  # why a kernel waits: ncu's stall reasons (cycles per issued instruction, by reason) and the
    # SASS instructions with the most stall samples, for napkin's kernel in earlier modes' harnesses ($NCU_TAGS)
    for tag in ${NCU_TAGS:-}; do
      echo "=== stalls $tag" | tee -a "$out/stalls.txt"
      rep=/tmp/stalls-$tag
      (cd "/tmp/nb-$tag" && timeout 240 ncu --kernel-name-base demangled -k regex:'^napkin_' --launch-count 1 --set full \
         --import-source no -f -o "$rep" ./harness --no-time > /dev/null 2>&1) || { echo "ncu failed on $tag"; fails=$((fails + 1)); continue; }
      ncu -i "$rep.ncu-rep" --page raw --csv --metrics \
        'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio|gpu__time_duration.sum|smsp__average_warp_latency_per_inst_issued.ratio|lts__t_bytes.sum.per_second|dram__bytes_read.sum.per_second|sm__throughput.avg.pct_of_peak_sustained_elapsed' \
        2>/dev/null | python3 tools/device/stall_table.py raw | tee -a "$out/stalls.txt"
      ncu -i "$rep.ncu-rep" --page source --csv --print-source sass 2>/dev/null | python3 tools/device/stall_table.py source 40 | tee -a "$out/stalls.txt"
    done
    ;;
  tiles)  # the device tile library's unit test (tests/gpu/tiles_test.cu) built for this GPU: sm_90a on a Hopper
    cc=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d ' .')
    arch=sm_$cc; [ "$cc" = 90 ] && arch=sm_90a
    echo "=== tiles: nvcc -arch=$arch tests/gpu/tiles_test.cu"
    if nvcc -std=c++17 -O2 -arch="$arch" -I"$PWD" -o /tmp/tiles_test tests/gpu/tiles_test.cu > "$out/tiles.txt" 2>&1; then
      timeout 60 /tmp/tiles_test 2>&1 | tee -a "$out/tiles.txt"
      [ "${PIPESTATUS[0]}" -eq 0 ] || fails=$((fails + 1))
    else
      cat "$out/tiles.txt"; fails=$((fails + 1))
    fi
    ;;
  initcheck-probe)  # does compute-sanitizer's initcheck track TMA stores? (tests/gpu/initcheck_probe.cu)
    echo "=== initcheck-probe: nvcc -arch=sm_90a tests/gpu/initcheck_probe.cu, run under compute-sanitizer --tool initcheck"
    if nvcc -std=c++17 -O2 -arch=sm_90a -I"$PWD" -o /tmp/initcheck_probe tests/gpu/initcheck_probe.cu > "$out/initcheck-probe.txt" 2>&1; then
      compute-sanitizer --tool initcheck /tmp/initcheck_probe 2>&1 | grep -E "initcheck_probe|Uninitialized|ERROR SUMMARY|at .*(reader|writer)" | sort | uniq -c | tee -a "$out/initcheck-probe.txt"
    else
      cat "$out/initcheck-probe.txt"; fails=$((fails + 1))
    fi
    ;;
  calibrate)  # the model's ceilings: kernels/calibrate/microbench.cu (mma.sync, wgmma, bandwidths, exp, FP32)
    OUT=$out kernels/calibrate/run_on_device.sh || fails=$((fails + 1))
    ;;
  candidates)  # issue 14: the model's first choice against the schedules it ranks next (napkin bench --candidates),
    # one diagram per call (10 builds each): CAND=attention|causal|matmul|mlp|rmsnorm, CAND_N (default 10)
    case ${CAND:-matmul} in
      attention) bench cand-attention attention --set b=4 --set h=16 --set q=4096 --set x=4096 --hw "${HW:-h100}" --candidates "${CAND_N:-10}" --runs 20 ;;
      causal) bench cand-causal causal_attention --set b=4 --set h=16 --set q=4096 --set x=4096 --hw "${HW:-h100}" --candidates "${CAND_N:-10}" --runs 20 ;;
      matmul) bench cand-matmul matmul --set a=4096 --set b=4096 --set c=4096 --hw "${HW:-h100}" --candidates "${CAND_N:-10}" --runs 20 ;;
      mlp) bench cand-mlp mlp_swiglu --set t=2048 --hw "${HW:-h100}" --candidates "${CAND_N:-10}" --runs 20 ;;
      rmsnorm) bench cand-rmsnorm rmsnorm --hw "${HW:-h100}" --candidates "${CAND_N:-10}" --runs 20 ;;
    esac
    ;;
  grads)  # issue 16: napkin grad's backwards at the training block's shapes (Llama-3-8B, s 2048), each
    # forward and backward checked and timed: rmsnorm (its rstd and its backward's row terms in one
    # rows kernel each), GQA attention (the split's partial sums on the cols vector path), the block
    # (its argument renames walking one step of their band, its norm weights summed over b and s)
    mkdir -p "$out/g"
    gb() {  # gb TAG FILE DIAGRAM [--set ...]
      local tag=$1 file=$2 dia=$3
      shift 3
      echo "=== $tag: napkin bench $file --diagram $dia $*"
      if ! $N bench "$file" --diagram "$dia" --workdir "/tmp/nb-$tag" --hw "${HW:-h200}" --runs 20 "$@" 2>&1 | tee "$out/$tag.txt"; then fails=$((fails + 1)); fi
    }
    for d in rmsnorm gqa_attention_bshd transformer_block; do
      $N grad "diagrams/library/$d.napkin" --memory-budget 8e9 --hw "${HW:-h200}" -o "$out/g/$d.napkin" > /dev/null || fails=$((fails + 1))
    done
    gb rms-fwd "$out/g/rmsnorm.napkin" rmsnorm_layer_fwd --set t=2048
    gb rms-bwd "$out/g/rmsnorm.napkin" rmsnorm_layer_bwd --set t=2048
    gb gqa-bwd "$out/g/gqa_attention_bshd.napkin" gqa_attention_bshd_bwd --set q=2048 --set x=2048
    gb block-fwd "$out/g/transformer_block.napkin" transformer_block_fwd --set s=2048
    gb block-bwd "$out/g/transformer_block.napkin" transformer_block_bwd --set s=2048
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
    if [ -n "${modes_torch_only:-}" ]; then  # issue 12: d = 64 (its B16 H16 N1024) and d = 256 on wgmma, against FA2 and cuDNN
      bench att-d64 attention --set b=16 --set h=16 --set q=1024 --set x=1024 --set d=64
      torch_vs att-d64 attention attention 16,16,1024,1024,64 --set b=16 --set h=16 --set q=1024 --set x=1024 --set d=64
      bench att-d256 attention --set b=4 --set h=16 --set q=4096 --set x=4096 --set d=256
      torch_vs att-d256 attention attention 4,16,4096,4096,256 --set b=4 --set h=16 --set q=4096 --set x=4096 --set d=256
    fi
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
