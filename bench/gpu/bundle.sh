#!/usr/bin/env bash
# bench/gpu/bundle.sh BUILD
# Makes .bundle/ (git-ignored) for bench/gpu/run.sh on a GPU machine without a package registry: .bundle/debs, the
# Debian packages of scripts/offline-bundle.sh (Open MPI, SentencePiece, the header-only dependencies), and
# .bundle/bin.tar.xz, the binaries run.sh runs, from BUILD (a Release build against the project's CUDA torch wheel).
set -euo pipefail
build=${1:?usage: bundle.sh BUILD}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$root/.bundle"
[ -n "$(ls "$root/.bundle/debs"/*.deb 2>/dev/null)" ] || "$root/scripts/offline-bundle.sh" "$root/.bundle/debs"
binaries=$(awk '!/^#/ && NF {print "examples/" $4}' "$root/bench/gpu/cases.txt" | sort -u)
# shellcheck disable=SC2086
tar cJf "$root/.bundle/bin.tar.xz" -C "$build" $binaries tests/tessera_tests tests/tessera_nccl_tests
du -sh "$root/.bundle"/*
