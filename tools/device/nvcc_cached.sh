#!/usr/bin/env bash
# nvcc with a cache of the files it writes (-o), keyed by its arguments, the content of its .cu
# inputs and of the .h/.cuh/.cu files in its -I folders (paths themselves do not count). It lets
# tools/device/bench.sh build every `napkin bench` of a mode at once and time them one at a time:
#   NVCC_CACHE_BUILD_ONLY=1 napkin bench ... --nvcc tools/device/nvcc_cached.sh   (in parallel:
#       compiles, stores, then exits 1 so that the bench stops before it runs anything)
#   napkin bench ... --nvcc tools/device/nvcc_cached.sh                            (one at a time:
#       copies the stored file, or compiles on a miss)
# Environment: NVCC_CACHE_DIR (default /tmp/napkin-nvcc-cache), NVCC_REAL (default nvcc).
set -u
real=${NVCC_REAL:-nvcc}
cache=${NVCC_CACHE_DIR:-/tmp/napkin-nvcc-cache}
mkdir -p "$cache"
args=("$@")
out=""
key_parts=()
for ((i = 0; i < ${#args[@]}; i++)); do
  a=${args[$i]}
  case $a in
    -o) out=${args[$((i + 1))]}; i=$((i + 1)) ;;
    -I*)
      for f in "${a#-I}"/*.h "${a#-I}"/*.cuh "${a#-I}"/*.cu; do
        [ -f "$f" ] && key_parts+=("$(basename "$f") $(sha256sum < "$f" | cut -c1-64)")
      done ;;
    *.cu) key_parts+=("$(basename "$a") $(sha256sum < "$a" | cut -c1-64)") ;;
    *) key_parts+=("$a") ;;
  esac
done
key=$(printf '%s\n' "${key_parts[@]}" | sha256sum | cut -c1-64)
if [ -z "$out" ]; then exec "$real" "$@"; fi
if [ -f "$cache/$key" ] && [ -z "${NVCC_CACHE_BUILD_ONLY:-}" ]; then
  cp "$cache/$key" "$out" && chmod +x "$out" && exit 0
fi
"$real" "$@" || exit $?
cp "$out" "$cache/$key.tmp$$" && mv "$cache/$key.tmp$$" "$cache/$key"
if [ -n "${NVCC_CACHE_BUILD_ONLY:-}" ]; then
  echo "nvcc_cached.sh: built and stored $(basename "$out"); NVCC_CACHE_BUILD_ONLY stops here" >&2
  exit 1
fi
