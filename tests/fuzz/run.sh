#!/usr/bin/env bash
# Fuzzes the diagram front end (lexer, parser, loader, verifier, printer round trip, DOT, evaluator)
# with libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, for a bounded time.
# and, with a second target, the schedule parser and checker, each for a bounded time.
# Usage: tests/fuzz/run.sh [SECONDS=300 [TARGET=diagram|schedule]]
#   (needs clang and libclang-rt-14-dev: tools/install-deps.sh)
# Seeds: the bundled diagrams and the error corpus (schedules: the illegal-schedule corpus).
# Crashes land in tests/fuzz/work/<target>/crashes/; the script exits 1 if there is any. A hang
# over 5 s on one input counts as a crash.
set -euo pipefail
secs=${1:-300}
target=${2:-diagram}
root=$(cd "$(dirname "$0")/../.." && pwd)
work="$root/tests/fuzz/work/$target"
rm -rf "$work/crashes"  # kept findings live in tests/fuzz/regressions
mkdir -p "$work/corpus" "$work/crashes"
if [ "$target" = schedule ]; then
  cp "$root"/tests/errors/schedules/*.schedule "$work/corpus/"
else
  cp "$root"/diagrams/library/*.napkin "$root"/tests/errors/*.napkin "$work/corpus/"
fi
srcs=$(ls "$root"/diagrams/*.cpp "$root"/perfmodel/*.cpp "$root"/derive/*.cpp "$root"/derive/passes/*.cpp "$root"/emit/*.cpp |
       grep -v render_svg.cpp)
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -DNAPKIN_DEFAULT_HARDWARE_DIR="\"$root/hardware\"" -I"$root" $srcs "$root/tests/fuzz/fuzz_$target.cpp" \
  -ltomlplusplus -lfmt -o "$work/fuzz_$target"
cd "$work"
set +e
./fuzz_$target corpus -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 -max_len=4096 \
  -artifact_prefix=crashes/ -print_final_stats=1 2>&1 | tee fuzz.log | grep -E "^#[0-9]+ +(DONE|pulse)|stat::|ERROR|SUMMARY" 
set -e
n=$(ls crashes | wc -l)
echo "fuzz ($target): $(grep -o 'stat::number_of_executed_units: [0-9]*' fuzz.log | awk '{print $2}') inputs in ${secs} s, $n crash files in $work/crashes/"
[ "$n" -eq 0 ]
