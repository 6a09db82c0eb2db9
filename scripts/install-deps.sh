#!/usr/bin/env bash
# Installs what tessera builds, runs and tests with on Debian 12, from Debian's own packages.
# Safe to run again: it only calls apt-get when something is missing.
#   libtorch-dev          LibTorch 1.13 (CPU) with its CMake package
#   libopenblas0-pthread  a multi-threaded BLAS for LibTorch's CPU GEMMs (the default reference BLAS is ~20x slower)
#   libopenmpi-dev        Open MPI 4.1: rank bootstrap and the MPI communicator (tessera/dist)
#   python3-torch         PyTorch 1.13 for the cross-checks against an independent implementation and the benchmark
set -euo pipefail
packages=(cmake ninja-build g++ ccache libtorch-dev libopenblas0-pthread nlohmann-json3-dev libboost1.81-dev catch2
          libopenmpi-dev openmpi-bin
          python3-torch)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
