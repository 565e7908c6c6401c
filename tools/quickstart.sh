#!/usr/bin/env bash
# napkin quick start: installs the dependencies if missing (Debian 12, apt), builds, and runs the
# main job on the bundled attention diagram: derive FlashAttention from it by relabelling (steps,
# schedule, cost table on the H100), check and evaluate it at small sizes, write its pseudocode,
# and render the plain and the relabelled diagram.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install-deps.sh"
echo "== building napkin (build/)"
mkdir -p "$root/build"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo > "$root/build/build.log" 2>&1 || { cat "$root/build/build.log"; exit 1; }
cmake --build "$root/build" -j"$(nproc)" >> "$root/build/build.log" 2>&1 || { tail -50 "$root/build/build.log"; exit 1; }
napkin="$root/build/cli/napkin"
diagram="$root/diagrams/library/attention.napkin"
out="$root/build/quickstart"
mkdir -p "$out"
echo "== napkin derive diagrams/library/attention.napkin --hw h100"
"$napkin" derive "$diagram" --hw h100
echo
echo "== napkin check, eval (fp64 reference at small sizes), emit, render"
"$napkin" check "$diagram"
"$napkin" eval "$diagram" --set h=2 --set q=64 --set x=64 --set d=32 --seed 1 -o "$out/eval" > "$out/eval.txt"
"$napkin" emit "$diagram" --hw h100 --target pseudo -o "$out/attention.pseudo.txt"
"$napkin" render "$diagram" -o "$out/attention.svg" 2>/dev/null
"$napkin" render "$diagram" --derive --hw h100 -o "$out/attention.relabelled.svg" 2>/dev/null
echo
echo "outputs in $out:"
echo "  eval/*.npy                the fp64 reference: inputs and output (numpy.load reads them); summary in eval.txt"
echo "  attention.pseudo.txt      looped pseudocode of the derived schedule"
echo "  attention.svg             the diagram; attention.relabelled.svg: levels, partitions, kernels, bytes"
