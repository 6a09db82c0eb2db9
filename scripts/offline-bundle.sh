#!/usr/bin/env bash
# offline-bundle.sh DIR
# Downloads (no install) the Debian 12 packages that a GPU node without internet access needs to build and run
# tessera next to a CUDA LibTorch it already has: Open MPI with its runtime libraries, libsentencepiece, and the
# header-only dependencies (Boost, nlohmann-json, range-v3, Catch2). Copy DIR to the node and use
# offline-activate.sh there.
# Run it on a Debian 12 machine that reaches Debian's mirrors.
set -euo pipefail
dir=${1:?usage: offline-bundle.sh DIR}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
# Named one by one rather than as the dependency closure: Debian's closure of libopenmpi-dev pulls in Fortran
# compilers, LLVM and X11 (over 350 MB). dpkg -x does not enforce dependencies; these are what the MPI C API,
# mpirun on one node and the header-only libraries need (about 20 MB).
packages=(
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev                 # Open MPI 4.1: mpirun, libmpi, mpi.h
  libevent-core-2.1-7 libevent-pthreads-2.1-7 libpmix2 libmunge2 libhwloc15  # its runtime
  libfabric1 libucx0 libibverbs1 ibverbs-providers librdmacm1 libnl-3-200 libnl-route-3-200
  libpsm2-2 libpsm-infinipath1 libnuma1 libudev1 libatomic1             # (minimal images may lack the last two)
  libboost1.81-dev nlohmann-json3-dev librange-v3-dev catch2 libstb-dev    # header-only dependencies (stb: the tests')
  libjpeg62-turbo-dev libjpeg62-turbo libpng-dev libpng16-16 zlib1g-dev    # JPEG and PNG decoding (io/image_file)
  libsentencepiece-dev libsentencepiece0                                 # SentencePiece tokenizers (tessera/text)
)
(cd "$dir" && apt-get download "${packages[@]}" >/dev/null)
echo "offline-bundle: $(ls "$dir"/*.deb | wc -l) packages, $(du -sh "$dir" | cut -f1), in $dir"
