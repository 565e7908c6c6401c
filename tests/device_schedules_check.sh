#!/usr/bin/env bash
# Every hand-written schedule the device benchmarks time (tools/device/schedules/**/*.schedule; first
# line `# bench: DIAGRAM [--set NAME=SIZE ...]`) still parses and checks against its diagram at its
# sizes on the H100 description: a schedule that rotted would only fail on the lent GPU.
# Usage: tests/device_schedules_check.sh NAPKIN SOURCE_DIR
set -u
napkin=$1 src=$2 bad=0 n=0
while IFS= read -r f; do
  read -r -a spec <<< "$(sed -n 's/^# bench: //p' "$f" | head -1)"
  if [ ${#spec[@]} -eq 0 ]; then echo "$f: no '# bench: DIAGRAM ...' line"; bad=$((bad + 1)); continue; fi
  n=$((n + 1))
  if ! out=$("$napkin" derive "$src/diagrams/library/${spec[0]}.napkin" "${spec[@]:1}" --hw h100 --schedule "$f" 2>&1); then
    echo "$f: napkin derive --schedule failed:"; echo "$out" | head -5; bad=$((bad + 1))
  fi
done < <(find "$src/tools/device/schedules" -name '*.schedule' | sort)
echo "device schedules: $n checked, $bad failed"
[ "$n" -gt 0 ] && [ "$bad" -eq 0 ]
