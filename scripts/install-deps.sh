#!/usr/bin/env bash
# install-deps.sh [build|all]: installs what tessera needs on Debian 12. Safe to run again: apt-get and pip run only
# when something is missing or the pinned requirements changed.
#   build  what building tessera and running its examples and the demo need (scripts/demo.sh):
#     from Debian:
#       cmake ninja-build g++ ccache      the build
#       nlohmann-json3-dev libboost1.81-dev
#       libjpeg62-turbo-dev libpng-dev    JPEG and PNG decoding for the image data, the pixels Pillow gives
#       libsentencepiece-dev              SentencePiece: Llama's and T5's tokenizer.model (tessera/text)
#       libopenmpi-dev openmpi-bin        Open MPI 4.1: rank bootstrap and the MPI communicator (tessera/dist)
#       python3-venv                      the project's Python environment
#     from PyPI, into .venv/ (scripts/requirements-build.txt, pinned): torch 2.11 (LibTorch: its headers, libraries
#     and CMake config; CMake asks .venv/bin/python for it) with the CUDA 13.0 toolkit wheels its config needs (nvcc,
#     runtime, CCCL, NCCL).
#   all (the default; scripts/test.sh)  that, and what the test suite needs:
#     from Debian:
#       catch2                            the unit tests
#       libstb-dev                        stb_image_write: the tests' PNG fixtures
#       chromium                          headless rendering of tessera-report pages (tests/report)
#       clang libclang-rt-14-dev          libFuzzer, ASan and UBSan: the fuzz targets and sanitized tests (tests/fuzz)
#     from PyPI (scripts/requirements.txt, pinned): the libraries tessera is checked and benchmarked against
#     (transformers, peft, lightning, safetensors, bitsandbytes, deepspeed), and the Conan client (tests/consumers:
#     conan create of conanfile.py); and, without their dependencies (scripts/requirements-nodeps.txt), litgpt
#     0.5.7, whose Alpaca rows tests/reference/check_text_data.py reads.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
case "$what" in
  build|all) ;;
  *) echo "install-deps.sh: '$what' is no set; say build (the build and the demo) or all (also the tests)" >&2; exit 2 ;;
esac

packages=(cmake ninja-build g++ ccache nlohmann-json3-dev libboost1.81-dev libopenmpi-dev openmpi-bin python3-venv
          libjpeg62-turbo-dev libpng-dev libsentencepiece-dev)
[ "$what" = all ] && packages+=(catch2 libstb-dev chromium clang libclang-rt-14-dev)
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

# One stamp per set: the full set's stamp also stands for the build set it contains.
venv=.venv
build_want=$(sha256sum < scripts/requirements-build.txt | cut -d' ' -f1)
all_want=$(cat scripts/requirements-build.txt scripts/requirements.txt scripts/requirements-nodeps.txt | sha256sum |
           cut -d' ' -f1)
have() { [ -x "$venv/bin/python" ] && [ "$(cat "$venv/.requirements-$1.sha256" 2>/dev/null)" = "$2" ]; }
if have all "$all_want" || { [ "$what" = build ] && have build "$build_want"; }; then
  exit 0
fi
# A clone without its own .venv shares one with the other clones of this user that pin the same requirements: .venv
# is then a link to $TESSERA_VENV_CACHE/<hash of the three requirement files> (default ~/.cache/tessera/venvs), so a
# second checkout neither downloads nor stores the ~6 GB again. TESSERA_VENV_CACHE= (empty) keeps a private .venv.
fresh=0  # this run makes .venv (a link or a directory): a failure before pip removes what it made
cache=${TESSERA_VENV_CACHE-${XDG_CACHE_HOME:-$HOME/.cache}/tessera/venvs}
[ -z "$cache" ] || cache=$(realpath -m "$cache")
# A link made here before, to the environment of other pins (the requirements changed since) or to one since deleted,
# is pointed at this checkout's.
if [ -L "$venv" ] && [ "$(dirname "$(readlink "$venv")")" = "$cache" ]; then
  rm "$venv"
fi
[ -e "$venv" ] || [ -L "$venv" ] || fresh=1
if [ -n "$cache" ] && [ ! -e "$venv" ] && [ ! -L "$venv" ]; then
  mkdir -p "$cache/$all_want"
  ln -s "$cache/$all_want" "$venv"
  echo "install-deps.sh: .venv is $cache/$all_want, shared by the checkouts that pin the same requirements" \
       "(TESSERA_VENV_CACHE= for a private one)"
fi
# One install at a time into one environment (two checkouts sharing it, or two scripts of one checkout).
mkdir -p "$venv"
exec 9> "$venv/.install.lock"
flock 9
if have all "$all_want" || { [ "$what" = build ] && have build "$build_want"; }; then
  exit 0  # another process installed it while this one waited
fi
# The torch and CUDA wheels take ~6 GB installed, and pip unpacks each wheel beside it first.
need_gb=10
free_gb=$(df -Pk "$venv/" | awk 'NR == 2 { print int($4 / 1048576) }')
if [ ! -x "$venv/bin/python" ] && [ "$free_gb" -lt "$need_gb" ]; then
  echo "install-deps.sh: $(readlink -f "$venv") is on a file system with $free_gb GB free; the Python environment" \
       "needs about $need_gb GB (torch and its CUDA wheels): free some space there, or set TESSERA_VENV_CACHE to a" \
       "directory on a larger disk" >&2
  if [ "$fresh" = 1 ]; then
    target=$(readlink -f "$venv")
    rm -f "$target/.install.lock"
    rmdir "$target" 2>/dev/null || true
    [ -L "$venv" ] && rm -f "$venv"
  fi
  exit 1
fi
# Created at its real path, so that its scripts (pip, conan) name that path and outlive the checkout that made it.
[ -x "$venv/bin/python" ] || /usr/bin/python3 -m venv "$(readlink -f "$venv")"
pip=("$venv/bin/pip" install -q --disable-pip-version-check)
if [ "$what" = build ]; then
  echo "installing the build's Python environment $venv (scripts/requirements-build.txt: torch and CUDA wheels, ~4 GB)"
  "${pip[@]}" -r scripts/requirements-build.txt
else
  echo "installing the Python environment $venv (scripts/requirements.txt; torch and its CUDA wheels are ~4 GB)"
  "${pip[@]}" -r scripts/requirements.txt
  "${pip[@]}" --no-deps -r scripts/requirements-nodeps.txt
fi
# The CUDA wheels ship versioned libraries only (libcudart.so.13) and no lib64/, which CMake's CUDA detection and
# nvcc's own link step look for: add the unversioned names and lib64 beside them.
cuda=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/nvidia/cu13
for lib in "$cuda"/lib/*.so.*; do
  base="${lib%%.so.*}.so"
  [ -e "$base" ] || ln -s "$(basename "$lib")" "$base"
done
[ -e "$cuda/lib64" ] || ln -s lib "$cuda/lib64"
echo "$build_want" > "$venv/.requirements-build.sha256"
[ "$what" = all ] && echo "$all_want" > "$venv/.requirements-all.sha256"
exit 0
