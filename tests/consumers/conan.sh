#!/usr/bin/env bash
# conan.sh TESSERA_SOURCE WORK TORCH_PYTHON GENERATOR
# Creates tessera's Conan package (conanfile.py) and runs its test_package, offline: a private CONAN_HOME under
# WORK with no remotes, LibTorch from TORCH_PYTHON's environment, MPI, Boost and nlohmann-json from the system.
# Exits 77 (skipped) when there is no Conan client.
set -euo pipefail
source=$1 work=$2 python=$3 generator=$4
conan=$(dirname "$python")/conan
if [ ! -x "$conan" ]; then
  conan=$(command -v conan || true)
fi
if [ -z "$conan" ]; then
  echo "SKIP: no Conan 2 client beside $python or on PATH;" \
       "run bash scripts/install-deps.sh (it installs conan into .venv/)"
  exit 77
fi
# A fresh cache each run: nothing from the last run (its build folder alone is ~0.5 GB of precompiled header) is
# reused, and the profile is the detected one.
export CONAN_HOME="$work/home"
rm -rf "$CONAN_HOME"
mkdir -p "$CONAN_HOME"
"$conan" profile detect >/dev/null 2>&1
# test_package builds in its own folder: a copy keeps the source tree clean.
rm -rf "$work/test_package"
cp -r "$source/test_package" "$work/test_package"
# --no-remote: everything comes from the recipe, the system and TORCH_PYTHON's environment. The detected profile
# says C++17 (the compiler's default); tessera is C++20. ccache's base_dir is the checkout (CONAN_HOME lies inside
# it): the package's compilations name its sources relative to their build folder, which sits directly below them as
# the checkout's build/ does (conanfile.py's layout), and the Python environment's headers by their real paths, with
# the flags of the checkout's build (no -m64): the package compiles from the ccache entries the main build just made.
set +e
"$conan" create "$source" --no-remote --test-folder "$work/test_package" \
  -s compiler.cppstd=20 \
  -c user.tessera:torch_python="$python" \
  -c tools.cmake.cmaketoolchain:generator="$generator" \
  -c "tools.cmake.cmaketoolchain:extra_variables={'TESSERA_CCACHE_BASEDIR': '$source'}" >"$work/create.log" 2>&1
status=$?
set -e
if [ "$status" -ne 0 ]; then
  tail -n 60 "$work/create.log"
  echo "conan create failed (exit $status); the whole log: $work/create.log"
  exit "$status"
fi
grep -E "^(tessera/[^ ]*: Package '|\[done\])" "$work/create.log"
