#!/usr/bin/env bash
# bench/gpu/bundle.sh BUILD
# Makes .bundle/ (git-ignored) for bench/gpu/run.sh on a GPU machine without a package registry: .bundle/debs, the
# Debian packages of scripts/offline-bundle.sh (Open MPI, SentencePiece, the header-only dependencies), and
# .bundle/bin.tar.xz, the binaries run.sh runs, from BUILD (a Release build against the project's CUDA torch wheel):
# the examples of cases.txt, the tests, seed 002's catalogue steps and tessera-catalogue, and lib/, the Arrow C++ and
# Parquet libraries of the pyarrow wheel the build linked (the GPU machine's Python has no pyarrow).
set -euo pipefail
build=${1:?usage: bundle.sh BUILD}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.bundle"
[ -n "$(ls "$root/.bundle/debs"/*.deb 2>/dev/null)" ] || "$root/scripts/offline-bundle.sh" "$root/.bundle/debs"
binaries=$(awk '!/^#/ && NF {print "examples/" $4}' "$root/bench/gpu/cases.txt" | sort -u)
catalogue=$(cd "$build" && ls catalogue/seed002-* catalogue/seed001-llama7b-1gpu catalogue/tessera-catalogue)
staging=$(mktemp -d)
trap 'rm -rf "$staging"' EXIT
mkdir -p "$staging/lib"
for so in libarrow libparquet; do
  path=$(ldd "$build/examples/llama-fp32" | awk -v so="$so.so" 'index($1, so) == 1 {print $3}')
  [ -n "$path" ] && cp -L "$path" "$staging/lib/"
done
# shellcheck disable=SC2086
tar cJf "$root/.bundle/bin.tar.xz" -C "$build" $binaries $catalogue tests/tessera_tests tests/tessera_nccl_tests \
  -C "$staging" lib
du -sh "$root/.bundle"/*
