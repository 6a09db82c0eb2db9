# Finds what tessera builds against and sets TESSERA_TORCH_TARGETS (LibTorch and what must precede it on the link
# line) and TESSERA_WITH_CUDA.
# Shared by the build tree and the installed package (tesseraConfig.cmake includes it too).
include(GNUInstallDirs)
include(CMakeFindDependencyMacro)

# Torch: the torch wheel of a Python environment, TESSERA_TORCH_PYTHON (scripts/install-deps.sh makes the
# project's .venv/ from scripts/requirements.txt; the top-level CMakeLists.txt defaults to it, and an installed
# tessera remembers the one it was built with). Its TorchConfig.cmake is found through
# torch.utils.cmake_prefix_path, with the wheel's own directory first so that its lib/ wins over any system
# LibTorch. The wheel is a CUDA build, and its config enables CUDA to configure at all: the nvidia-* wheels of the
# same environment (site-packages/nvidia/cu13: nvcc, runtime headers and libraries, CCCL) are that toolkit, and
# site-packages/nvidia/nccl is NCCL. Without TESSERA_TORCH_PYTHON, a LibTorch is found through CMAKE_PREFIX_PATH.
if(TESSERA_TORCH_PYTHON)
  execute_process(
    COMMAND "${TESSERA_TORCH_PYTHON}" -c
            "import os, sysconfig, torch; print(torch.utils.cmake_prefix_path); print(os.path.dirname(torch.__file__)); print(sysconfig.get_paths()['purelib'])"
    OUTPUT_VARIABLE _tessera_torch_paths RESULT_VARIABLE _tessera_torch_rc ERROR_VARIABLE _tessera_torch_error
    OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(NOT _tessera_torch_rc EQUAL 0)
    message(FATAL_ERROR "TESSERA_TORCH_PYTHON=${TESSERA_TORCH_PYTHON} cannot import torch:\n${_tessera_torch_error}"
                        "Run scripts/install-deps.sh (it makes .venv/ from scripts/requirements.txt), or point "
                        "TESSERA_TORCH_PYTHON at a Python environment with torch.")
  endif()
  string(REPLACE "\n" ";" _tessera_torch_paths "${_tessera_torch_paths}")
  list(GET _tessera_torch_paths 0 _tessera_torch_cmake)
  list(GET _tessera_torch_paths 1 _tessera_torch_root)
  list(GET _tessera_torch_paths 2 _tessera_site_packages)
  # By their real paths: the project's .venv is usually a link to an environment shared by the checkouts
  # (scripts/install-deps.sh), and the compilations then name its headers the same way in every build of this source
  # tree -- this checkout's, a clone's, the Conan package's in build/ -- so ccache hits across them.
  foreach(_tessera_path _tessera_torch_cmake _tessera_torch_root _tessera_site_packages)
    file(REAL_PATH "${${_tessera_path}}" ${_tessera_path})
  endforeach()
  list(PREPEND CMAKE_PREFIX_PATH "${_tessera_torch_root}" "${_tessera_torch_cmake}")
  set(_tessera_cuda_root "${_tessera_site_packages}/nvidia/cu13")
  if(EXISTS "${_tessera_cuda_root}/bin/nvcc")
    set(CUDA_TOOLKIT_ROOT_DIR "${_tessera_cuda_root}" CACHE PATH "CUDA toolkit of the Python environment's wheels" FORCE)
    set(CUDAToolkit_ROOT "${_tessera_cuda_root}")
    if(NOT CMAKE_CUDA_COMPILER)
      set(CMAKE_CUDA_COMPILER "${_tessera_cuda_root}/bin/nvcc" CACHE FILEPATH "nvcc of the Python environment's CUDA wheels")
    endif()
  endif()
  if(NOT NCCL_ROOT AND EXISTS "${_tessera_site_packages}/nvidia/nccl/include/nccl.h")
    set(NCCL_ROOT "${_tessera_site_packages}/nvidia/nccl")
  endif()
  # GPUs the labs use (A100, H100); torch's config would otherwise compile CUDA code for eleven architectures.
  if(NOT DEFINED ENV{TORCH_CUDA_ARCH_LIST} AND NOT TORCH_CUDA_ARCH_LIST)
    set(TORCH_CUDA_ARCH_LIST "8.0;9.0")
  endif()
endif()
find_dependency(Torch)
find_dependency(nlohmann_json 3.9)
find_dependency(Boost 1.75)

# SentencePiece (text/sentencepiece.hpp: Llama's and T5's tokenizer.model): Debian's libsentencepiece-dev, a shared
# library whose header only src/text/sentencepiece.cpp includes. An imported target of tessera's own, so that the
# installed package (this file runs in tesseraConfig.cmake) and the Conan package give users of the static library
# the same link dependency.
if(NOT TARGET tessera::sentencepiece)
  find_path(TESSERA_SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
  find_library(TESSERA_SENTENCEPIECE_LIBRARY sentencepiece)
  if(NOT TESSERA_SENTENCEPIECE_INCLUDE_DIR OR NOT TESSERA_SENTENCEPIECE_LIBRARY)
    message(FATAL_ERROR "tessera: libsentencepiece not found (sentencepiece_processor.h: "
                        "${TESSERA_SENTENCEPIECE_INCLUDE_DIR}; library: ${TESSERA_SENTENCEPIECE_LIBRARY}); install "
                        "Debian's libsentencepiece-dev (scripts/install-deps.sh does), or add the prefix holding "
                        "include/sentencepiece_processor.h and lib/libsentencepiece.so to CMAKE_PREFIX_PATH")
  endif()
  add_library(tessera::sentencepiece UNKNOWN IMPORTED)
  # dladdr/dlsym: src/text/sentencepiece.cpp checks the load order described at TESSERA_TORCH_TARGETS below.
  set_target_properties(tessera::sentencepiece PROPERTIES IMPORTED_LOCATION "${TESSERA_SENTENCEPIECE_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${TESSERA_SENTENCEPIECE_INCLUDE_DIR}"
                        INTERFACE_LINK_LIBRARIES "${CMAKE_DL_LIBS}")
endif()

# Apache Arrow C++ and Parquet (data/table_source.hpp: `datasets` directories and Parquet files), when
# TESSERA_WITH_ARROW: the pyarrow wheel of the same Python environment, as LibTorch is the torch wheel's (its
# include/ and its libarrow.so.N / libparquet.so.N, N the wheel's so_version; scripts/requirements-build.txt pins
# it). Without a Python environment, an Arrow C++ install found by CMake (ArrowConfig.cmake, ParquetConfig.cmake).
# Two imported targets of tessera's own, linked privately: Arrow's headers reach only src/data/table_*.cpp, and the
# installed package (this file runs in tesseraConfig.cmake) gives users of the static library the same libraries.
if(TESSERA_WITH_ARROW AND NOT TARGET tessera::arrow)
  if(TESSERA_TORCH_PYTHON)
    execute_process(
      COMMAND "${TESSERA_TORCH_PYTHON}" -c
              "import pyarrow as pa; print(pa.get_include()); print(pa.get_library_dirs()[0]); print(pa.cpp_build_info.so_version)"
      OUTPUT_VARIABLE _tessera_arrow RESULT_VARIABLE _tessera_arrow_rc ERROR_VARIABLE _tessera_arrow_error
      OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(NOT _tessera_arrow_rc EQUAL 0)
      message(FATAL_ERROR "tessera: TESSERA_TORCH_PYTHON=${TESSERA_TORCH_PYTHON} cannot import pyarrow (Apache Arrow "
                          "C++ and Parquet come from its wheel):\n${_tessera_arrow_error}Run scripts/install-deps.sh "
                          "(it installs the pinned pyarrow), or configure with -DTESSERA_ARROW=OFF (no datasets "
                          "directories or Parquet files as data=)")
    endif()
    string(REPLACE "\n" ";" _tessera_arrow "${_tessera_arrow}")
    list(GET _tessera_arrow 0 _tessera_arrow_include)
    list(GET _tessera_arrow 1 _tessera_arrow_libdir)
    list(GET _tessera_arrow 2 _tessera_arrow_so)
    file(REAL_PATH "${_tessera_arrow_include}" _tessera_arrow_include)  # as the torch paths above
    file(REAL_PATH "${_tessera_arrow_libdir}" _tessera_arrow_libdir)
    foreach(name arrow parquet)
      set(_library "${_tessera_arrow_libdir}/lib${name}.so.${_tessera_arrow_so}")
      if(NOT EXISTS "${_library}")
        message(FATAL_ERROR "tessera: the pyarrow wheel of ${TESSERA_TORCH_PYTHON} has no ${_library}; reinstall "
                            "the pinned pyarrow (scripts/install-deps.sh build)")
      endif()
      add_library(tessera::${name} SHARED IMPORTED)
      set_target_properties(tessera::${name} PROPERTIES IMPORTED_LOCATION "${_library}"
                            INTERFACE_INCLUDE_DIRECTORIES "${_tessera_arrow_include}")
    endforeach()
    set_target_properties(tessera::parquet PROPERTIES INTERFACE_LINK_LIBRARIES tessera::arrow)
  else()
    find_dependency(Arrow)
    find_dependency(Parquet)
    add_library(tessera::arrow INTERFACE IMPORTED)
    set_target_properties(tessera::arrow PROPERTIES INTERFACE_LINK_LIBRARIES Arrow::arrow_shared)
    add_library(tessera::parquet INTERFACE IMPORTED)
    set_target_properties(tessera::parquet PROPERTIES INTERFACE_LINK_LIBRARIES Parquet::parquet_shared)
  endif()
endif()

# LibTorch is linked as tessera::torch: torch's usage requirements (headers, definitions, flags) and its CPU library,
# but not libtorch_cuda.so, whose loading (its kernels' registration: ~0.3 s and ~350 MB resident in every process)
# a machine without a GPU never uses and no tessera code calls into. libtessera loads it before main() where a CUDA
# driver is installed (src/core/cuda_kernels.cpp, core/cuda_kernels.hpp): the link option below pulls that loader
# into every program that links tessera::tessera.
if(NOT TARGET tessera::torch)
  add_library(tessera::torch INTERFACE IMPORTED)
  set(_tessera_torch_links torch_cpu_library)
  if(TARGET torch_cuda)
    # torch_cuda_library's usage requirements without the forced link of libtorch_cuda.so itself.
    add_library(tessera::torch_cuda_usage INTERFACE IMPORTED)
    foreach(_tessera_property COMPILE_DEFINITIONS COMPILE_OPTIONS INCLUDE_DIRECTORIES SYSTEM_INCLUDE_DIRECTORIES
                              LINK_LIBRARIES)
      set_property(TARGET tessera::torch_cuda_usage PROPERTY INTERFACE_${_tessera_property}
                   "$<TARGET_PROPERTY:torch_cuda,INTERFACE_${_tessera_property}>")
    endforeach()
    list(APPEND _tessera_torch_links tessera::torch_cuda_usage)
    set_property(TARGET tessera::torch PROPERTY INTERFACE_LINK_OPTIONS "LINKER:--undefined=tessera_cuda_kernels_loader")
  endif()
  foreach(_tessera_property COMPILE_DEFINITIONS COMPILE_OPTIONS INCLUDE_DIRECTORIES SYSTEM_INCLUDE_DIRECTORIES)
    get_target_property(_tessera_value torch INTERFACE_${_tessera_property})
    if(_tessera_value)
      set_property(TARGET tessera::torch PROPERTY INTERFACE_${_tessera_property} "${_tessera_value}")
    endif()
  endforeach()
  set_property(TARGET tessera::torch PROPERTY INTERFACE_LINK_LIBRARIES ${_tessera_torch_links})
endif()

# The torch wheel's libraries export their own copy of std::filesystem (built by another GCC), which is broken
# when our code calls it (a null call inside std::filesystem::remove_all). Binding those symbols to the system
# libstdc++ needs it ahead of LibTorch in the dynamic loader's search order: first on the link line.
# libsentencepiece must come before LibTorch too: it and c10 both export a global FLAGS_minloglevel (sentencepiece's a
# 32-byte flag object, c10's a 4-byte int), and both libraries bind to whichever is loaded first. With c10's first,
# sentencepiece's static constructor writes its object over c10's variable and the bytes after it
# (FLAGS_caffe2_use_fatal_for_enforce among them) before main(); with its own first, each is intact (c10 only writes
# the flag when parsing --minloglevel, which tessera never does). SentencePiece::from_model_bytes checks the order.
set(TESSERA_TORCH_TARGETS stdc++ tessera::sentencepiece tessera::torch)

# Imported targets are visible only in the directory that found them; when tessera is added with
# add_subdirectory(), the parent project links tessera::tessera and must see torch, torch_cpu, c10, ... too.
if(NOT PROJECT_IS_TOP_LEVEL)
  get_property(_tessera_imported DIRECTORY PROPERTY IMPORTED_TARGETS)
  foreach(target ${_tessera_imported})
    get_target_property(_global ${target} IMPORTED_GLOBAL)
    if(NOT _global)
      set_target_properties(${target} PROPERTIES IMPORTED_GLOBAL TRUE)
    endif()
  endforeach()
endif()

if(TORCH_CUDA_LIBRARIES)
  set(TESSERA_WITH_CUDA ON)
else()
  set(TESSERA_WITH_CUDA OFF)
endif()
