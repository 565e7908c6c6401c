#!/usr/bin/env bash
# Fuzzes the diagram front end (lexer, parser, loader, verifier, printer round trip, DOT, evaluator)
# with libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer, for a bounded time.
# Usage: tests/fuzz/run.sh [SECONDS=300]    (needs clang and libclang-rt-14-dev: tools/install-deps.sh)
# Seeds: the bundled diagrams and the error corpus. Crashes land in tests/fuzz/work/crashes/;
# the script exits 1 if there is any. A hang over 5 s on one input counts as a crash.
set -euo pipefail
secs=${1:-300}
root=$(cd "$(dirname "$0")/../.." && pwd)
work="$root/tests/fuzz/work"
mkdir -p "$work/corpus" "$work/crashes"
cp "$root"/diagrams/library/*.napkin "$root"/tests/errors/*.napkin "$work/corpus/"
srcs=$(ls "$root"/diagrams/*.cpp | grep -v render_svg.cpp)
clang++ -std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I"$root" $srcs "$root/tests/fuzz/fuzz_diagram.cpp" -o "$work/fuzz_diagram"
cd "$work"
set +e
./fuzz_diagram corpus -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 -max_len=4096 \
  -artifact_prefix=crashes/ -print_final_stats=1 2>&1 | tee fuzz.log | grep -E "^#[0-9]+ +(DONE|pulse)|stat::|ERROR|SUMMARY" 
set -e
n=$(ls crashes | wc -l)
echo "fuzz: $(grep -o 'stat::number_of_executed_units: [0-9]*' fuzz.log | awk '{print $2}') inputs in ${secs} s, $n crash files in tests/fuzz/work/crashes/"
[ "$n" -eq 0 ]
