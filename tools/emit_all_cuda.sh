#!/usr/bin/env bash
# Emits the CUDA of every bundled diagram and every GPU-sweep diagram (tests/gpu/*.napkin) on each
# hardware description, and of every device-benchmark schedule (tools/device/schedules), into
# OUTDIR, one .cu per case (a failed emit leaves its stderr in a .err file instead). Used to show a
# refactoring of the CUDA renderers leaves the output byte-identical:
#   tools/emit_all_cuda.sh build/cli/napkin /tmp/before && (edit, build) &&
#   tools/emit_all_cuda.sh build/cli/napkin /tmp/after && diff -r /tmp/before /tmp/after
# Usage: tools/emit_all_cuda.sh NAPKIN OUTDIR
set -u
napkin=$1 out=$2
src=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
n=0 failed=0
emit() {  # NAME ARGS...
  local name=$1; shift
  n=$((n + 1))
  if ! "$napkin" emit "$@" --target cuda -o "$out/$name.cu" 2> "$out/$name.err"; then failed=$((failed + 1)); else rm -f "$out/$name.err"; fi
}
for f in "$src"/diagrams/library/*.napkin "$src"/tests/gpu/*.napkin; do
  for hw in a100 h100 h200 b200 rtx4090; do emit "$(basename "$(dirname "$f")")-$(basename "$f" .napkin)-$hw" "$f" --hw "$hw"; done
done
while IFS= read -r f; do
  read -r -a spec <<< "$(sed -n 's/^# bench: //p' "$f" | head -1)"
  [ ${#spec[@]} -gt 0 ] || continue
  emit "schedule-$(echo "${f#"$src"/tools/device/schedules/}" | tr / -)" "$src/diagrams/library/${spec[0]}.napkin" "${spec[@]:1}" --hw h100 --schedule "$f"
done < <(find "$src/tools/device/schedules" -name '*.schedule' | sort)
echo "emitted $n cases into $out ($failed failed: see the .err files)"
