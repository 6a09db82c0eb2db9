#!/usr/bin/env bash
# run.sh find_package|add_subdirectory TESSERA_SOURCE TESSERA_BUILD WORK GENERATOR [PREFIX_PATH]
# Builds the consumer project of that name against tessera and runs one training step with it.
set -euo pipefail
kind=$1 source=$2 build=$3 work=$4 generator=$5 prefix_path=${6:-}
rm -rf "$work"
mkdir -p "$work"
args=(-S "$source/tests/consumers/$kind" -B "$work/build" -G "$generator" -DCMAKE_BUILD_TYPE=Release)
if [ "$kind" = find_package ]; then
  cmake --install "$build" --prefix "$work/prefix" >/dev/null
  export CMAKE_PREFIX_PATH="$work/prefix${prefix_path:+:$prefix_path}"
else
  # tessera's sources are compiled once, in the main build: the consumer links that archive (TESSERA_LIBRARY), so
  # this case tests add_subdirectory()'s configuration, targets and usage requirements, not a second compilation
  # (the Conan case, conan.sh, compiles the package from its sources).
  args+=(-DTESSERA_SOURCE_DIR="$source" -DTESSERA_LIBRARY="$build/libtessera.a")
fi
# The consumer's own compile through ccache where it is installed, as a project of its own would set it: a run that
# compiled the same consumer before (this machine, any clone: CCACHE_BASEDIR) answers from the cache, and the
# configuration, targets, usage requirements, link and run are tested every time.
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER="env;CCACHE_BASEDIR=$source;ccache")
fi
cmake "${args[@]}" >/dev/null
cmake --build "$work/build" >/dev/null
"$work/build/consumer-experiment" max_steps=1 batch_size=1 seq_len=16 threads=1 | tee "$work/out.txt" | grep '^\[done\]'
