#!/usr/bin/env bash
# Installs what tessera builds, runs and tests with on Debian 12. Safe to run again: apt-get and pip run only
# when something is missing or scripts/requirements.txt changed.
#   From Debian:
#     cmake ninja-build g++ ccache      the build
#     nlohmann-json3-dev libboost1.81-dev catch2
#     libstb-dev                        stb_image: PNG and JPEG decoding for the image data
#     libsentencepiece-dev              SentencePiece: Llama's and T5's tokenizer.model (tessera/text)
#     libopenmpi-dev openmpi-bin        Open MPI 4.1: rank bootstrap and the MPI communicator (tessera/dist)
#     python3-venv                      the project's Python environment
#     chromium                          headless rendering of tessera-report pages (tests/report)
#     clang libclang-rt-14-dev          libFuzzer, ASan and UBSan: the fuzz targets and sanitized tests (tests/fuzz)
#   From PyPI, into .venv/ (scripts/requirements.txt, pinned):
#     torch 2.11 (LibTorch: its headers, libraries and CMake config; CMake asks .venv/bin/python for it) with the
#     CUDA 13.0 toolkit wheels its config needs (nvcc, runtime, CCCL, NCCL), and the libraries tessera is
#     checked and benchmarked against (transformers, peft, lightning, safetensors, bitsandbytes, deepspeed), and the
#     Conan client (tests/consumers: conan create of conanfile.py); and, without their dependencies
#     (scripts/requirements-nodeps.txt), litgpt 0.5.7, whose Alpaca rows tests/reference/check_text_data.py reads.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(cmake ninja-build g++ ccache nlohmann-json3-dev libboost1.81-dev catch2 libopenmpi-dev openmpi-bin python3-venv libstb-dev libsentencepiece-dev chromium clang libclang-rt-14-dev)
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

venv=.venv
stamp="$venv/.requirements.sha256"
want=$(cat scripts/requirements.txt scripts/requirements-nodeps.txt | sha256sum | cut -d' ' -f1)
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "installing the Python environment $venv (scripts/requirements.txt; torch and its CUDA wheels are ~4 GB)"
  [ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/requirements.txt
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r scripts/requirements-nodeps.txt
  # The CUDA wheels ship versioned libraries only (libcudart.so.13) and no lib64/, which CMake's CUDA detection
  # and nvcc's own link step look for: add the unversioned names and lib64 beside them.
  cuda=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13
  for lib in "$cuda"/lib/*.so.*; do
    base="${lib%%.so.*}.so"
    [ -e "$base" ] || ln -s "$(basename "$lib")" "$base"
  done
  [ -e "$cuda/lib64" ] || ln -s lib "$cuda/lib64"
  echo "$want" > "$stamp"
fi
