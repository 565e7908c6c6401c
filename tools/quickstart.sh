#!/usr/bin/env bash
# napkin quick start: installs the dependencies if missing (Debian 12, apt), builds, and runs the
# main job on the bundled attention diagram: check it, evaluate it at small sizes, render it.
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
echo "== napkin check diagrams/library/attention.napkin"
"$napkin" check "$diagram"
echo "== napkin eval (fp64 reference, small sizes)"
"$napkin" eval "$diagram" --set h=2 --set q=64 --set x=64 --set d=32 --seed 1 -o "$out/eval"
echo "== napkin render"
"$napkin" render "$diagram" -o "$out/attention.svg"
echo
echo "outputs: $out/eval/*.npy (inputs and output, numpy.load reads them), $out/attention.svg"
