#!/usr/bin/env bash
# Packs napkin for a lent GPU machine: a stripped build/cli/napkin and the Debian libraries it
# links that the machine's image lacks, into .devlibs/ (ignored by git; name it in the device
# call's carry). Run after building; then on the device: tools/device/bench.sh MODE.
set -eu
cd "$(dirname "$0")/../.."
rm -rf .devlibs && mkdir -p .devlibs
strip -o .devlibs/napkin build/cli/napkin
for l in $(ldd build/cli/napkin | awk '/=>/{print $3}' | grep -v -E '/lib(c|m|pthread|dl|rt)\.so'); do cp -L "$l" .devlibs/; done
du -sh .devlibs
