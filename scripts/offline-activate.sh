#!/usr/bin/env bash
# source offline-activate.sh DIR PREFIX
# Unpacks the packages offline-bundle.sh downloaded into PREFIX (never into /: nothing is installed system-wide)
# and points this shell at them: PATH, LD_LIBRARY_PATH, CPATH, CMAKE_PREFIX_PATH, and OPAL_PREFIX, which is how
# Open MPI finds its own files after being moved. Then configure tessera as usual, e.g.
#   cmake -S . -B build -DTESSERA_TORCH_PYTHON="$(command -v python3)"
#   (CMAKE_PREFIX_PATH from the environment is searched too).
dir=${1:?usage: source offline-activate.sh DIR PREFIX}
prefix=${2:?usage: source offline-activate.sh DIR PREFIX}
mkdir -p "$prefix"
prefix=$(cd "$prefix" && pwd)
if [ ! -e "$prefix/.tessera-unpacked" ]; then
  for deb in "$dir"/*.deb; do dpkg -x "$deb" "$prefix"; done
  touch "$prefix/.tessera-unpacked"
fi
arch_lib="$prefix/usr/lib/x86_64-linux-gnu"
# Debian installs Open MPI with prefix /usr (data in usr/share/openmpi, libraries in usr/lib/<arch>/openmpi/lib);
# OPAL_PREFIX moves that whole tree to $prefix/usr.
export OPAL_PREFIX="$prefix/usr"
# dpkg -x creates no /etc/alternatives links: give the usual names to the .openmpi programs.
for tool in mpirun mpiexec mpicc mpicxx mpic++; do
  [ -e "$prefix/usr/bin/$tool" ] || ln -s "$tool.openmpi" "$prefix/usr/bin/$tool"
done
export PATH="$prefix/usr/bin:$PATH"
export LD_LIBRARY_PATH="$arch_lib:$arch_lib/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export CPATH="$prefix/usr/include:$arch_lib/openmpi/include${CPATH:+:$CPATH}"
export CMAKE_PREFIX_PATH="$prefix/usr:$arch_lib/cmake${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}"
export MPI_HOME="$prefix/usr"  # where CMake's FindMPI looks for mpicxx first
echo "offline-activate: $(mpirun --version 2>/dev/null | head -1) from $prefix"
