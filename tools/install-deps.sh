#!/usr/bin/env bash
# Installs napkin's build and test dependencies from Debian 12's packages, if any are missing
# (python3-torch, torch 1.13: napkin_torch's CPU gradient tests, python.cpu; the compile test
# needs torch 2.4 and reports itself skipped there).
# Usage: tools/install-deps.sh        (needs root or sudo; does nothing when all are present)
set -euo pipefail
pkgs=(build-essential cmake pkg-config libboost-graph-dev libgraphviz-dev catch2 libcli11-dev
      libfmt-dev nlohmann-json3-dev libtomlplusplus-dev clang libclang-rt-14-dev librsvg2-bin python3
      python3-torch)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "napkin: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
