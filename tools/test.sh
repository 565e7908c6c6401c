#!/usr/bin/env bash
# Runs napkin's whole test suite (labels unit, property, golden, errors, derive, emit, kernels, compile,
# fuzz; gpu tests need a GPU and are run on the device): installs the dependencies if missing,
# builds with warnings as errors, and runs CTest. Without nvcc of CUDA 12.0 or later (not in
# Debian) the CUDA compile checks show as skipped in the summary; the rest runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/install-deps.sh"
cmake -S "$root" -B "$root/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNAPKIN_WERROR=ON -DBUILD_TESTING=ON
cmake --build "$root/build" -j"$(nproc)"
cd "$root/build"
ctest --output-on-failure -j"$(nproc)" -LE gpu
