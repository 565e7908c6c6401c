#!/usr/bin/env bash
# Fuzzes napkin with libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer for a bounded time,
# one target at a time: diagram (lexer, parser, loader, verifier, printer round trip, DOT,
# evaluator, derive and emit of small diagrams), schedule (schedule parser and checker) or
# hardware (hardware description reader, its printer round trip, the model's times).
# Usage: tests/fuzz/run.sh [SECONDS=300 [TARGET=diagram|schedule|hardware]]
#   (needs clang and libclang-rt-14-dev: tools/install-deps.sh)
# Builds the targets with CMake from tests/fuzz/CMakeLists.txt (the libraries' own source lists)
# in $FUZZ_BUILD_DIR (default tests/fuzz/work/build), unless FUZZ_PREBUILT=1 says they are built
# there already (the CTest tests fuzz.*, tests/CMakeLists.txt). Work files go to
# $FUZZ_WORK_DIR/<target> (default tests/fuzz/work/<target>).
# Seeds: the bundled diagrams and the error corpus (schedules: the illegal-schedule corpus;
# hardware: the bundled descriptions and the bad-hardware corpus). The saved findings of
# tests/fuzz/regressions run first, once each. Crashes land in <work>/crashes/; the script exits
# 1 if there is any. A hang over $FUZZ_TIMEOUT s (default 5) on one input counts as a crash.
set -euo pipefail
secs=${1:-300}
target=${2:-diagram}
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${FUZZ_BUILD_DIR:-$root/tests/fuzz/work/build}
work=${FUZZ_WORK_DIR:-$root/tests/fuzz/work}/$target
case "$target" in
  diagram)  seeds=("$root"/diagrams/library/*.napkin "$root"/tests/errors/*.napkin); ext=napkin ;;
  schedule) seeds=("$root"/tests/errors/schedules/*.schedule); ext=schedule ;;
  hardware) seeds=("$root"/hardware/*.toml "$root"/hardware/measured/*.toml "$root"/tests/errors/hardware/*.toml); ext=toml ;;
  *) echo "run.sh: unknown target '$target' (diagram, schedule or hardware)" >&2; exit 2 ;;
esac
if [ "${FUZZ_PREBUILT:-0}" != 1 ]; then
  cmake -S "$root/tests/fuzz" -B "$build" -DCMAKE_CXX_COMPILER="${FUZZ_CXX:-clang++}" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" --target "fuzz_$target" -j"$(nproc)" >/dev/null
fi
rm -rf "$work/crashes"  # kept findings live in tests/fuzz/regressions
mkdir -p "$work/corpus" "$work/crashes"
cp "${seeds[@]}" "$work/corpus/"
cd "$work"
fuzzer="$build/fuzz_$target"
timeout=${FUZZ_TIMEOUT:-5}
regressions=("$root"/tests/fuzz/regressions/*."$ext")
if [ -e "${regressions[0]}" ]; then
  "$fuzzer" -timeout="$timeout" -rss_limit_mb=2048 -artifact_prefix=crashes/ "${regressions[@]}" >regressions.log 2>&1 ||
    { tail -40 regressions.log; echo "fuzz ($target): a saved regression input fails again (see $work/regressions.log)"; exit 1; }
fi
set +e
"$fuzzer" corpus -max_total_time="$secs" -timeout="$timeout" -rss_limit_mb=2048 -max_len=4096 \
  -artifact_prefix=crashes/ -print_final_stats=1 >fuzz.log 2>&1
status=$?
set -e
grep -E "^#[0-9]+ +(DONE|pulse)|stat::number_of_executed_units|ERROR|SUMMARY" fuzz.log | tail -20
n=$(find crashes -type f | wc -l)
echo "fuzz ($target): $(grep -o 'stat::number_of_executed_units: [0-9]*' fuzz.log | awk '{print $2}') inputs in ${secs} s, exit $status, $n crash files in $work/crashes/"
if [ "$n" -ne 0 ] || [ "$status" -ne 0 ]; then
  grep -A30 -m1 "ERROR" fuzz.log || tail -30 fuzz.log
  exit 1
fi
