# NCCL for tessera/dist's NcclCommunicator (nccl_communicator.hpp, src/dist_nccl/). Included by the top-level
# CMakeLists.txt after TesseraMpi.cmake (NCCL's unique id travels over MPI). Sets the variable TESSERA_WITH_NCCL
# (ON/OFF); with NCCL, tessera compiles src/dist_nccl/, links NCCL and the CUDA runtime, and defines
# TESSERA_WITH_NCCL for itself and its users.
#
# The cache variable TESSERA_WITH_NCCL picks: AUTO (default) builds it when LibTorch has CUDA (TESSERA_WITH_CUDA),
# MPI is there (TESSERA_WITH_MPI) and nccl.h and libnccl are found; ON insists (a configure error names what is
# missing); OFF leaves it out. NCCL is looked for under NCCL_ROOT (CMake or environment variable: an NCCL tarball,
# or a pip wheel's .../site-packages/nvidia/nccl), in the CUDA toolkit, /usr/local/cuda and the system paths.
#
# Without NCCL built in, but with nccl.h and cuda_runtime_api.h found (a CPU machine with the CUDA toolkit's
# headers), the target tessera_nccl_compile_check (EXCLUDE_FROM_ALL) compiles src/dist_nccl/ against them alone:
# ctest's compile.nccl_communicator (tests/TesseraTestNccl.cmake) builds it, so the GPU code is compiled on
# every machine that has the headers.

# src/**/*.cpp went into tessera (CMakeLists.txt): src/dist_nccl/ comes back below only with NCCL.
get_target_property(_tessera_sources tessera SOURCES)
list(FILTER _tessera_sources EXCLUDE REGEX "/src/dist_nccl/")
set_property(TARGET tessera PROPERTY SOURCES ${_tessera_sources})
file(GLOB TESSERA_NCCL_SOURCES CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/src/dist_nccl/*.cpp")

set(TESSERA_WITH_NCCL AUTO CACHE STRING
  "Build tessera's NcclCommunicator: AUTO (when LibTorch has CUDA and MPI, nccl.h and libnccl are found), ON, OFF")
set_property(CACHE TESSERA_WITH_NCCL PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${TESSERA_WITH_NCCL}" _tessera_nccl_mode)

find_package(CUDAToolkit QUIET)
find_path(TESSERA_NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda
  PATH_SUFFIXES include nvidia/nccl/include
  DOC "Directory of NCCL's nccl.h")
find_library(TESSERA_NCCL_LIBRARY NAMES nccl libnccl.so.2  # a pip wheel ships only libnccl.so.2
  HINTS ${NCCL_ROOT} ENV NCCL_ROOT ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda
  PATH_SUFFIXES lib lib64 nvidia/nccl/lib
  DOC "NCCL's shared library")
find_path(TESSERA_CUDA_RUNTIME_INCLUDE_DIR cuda_runtime_api.h
  HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda
  PATH_SUFFIXES include
  DOC "Directory of the CUDA runtime's cuda_runtime_api.h")
mark_as_advanced(TESSERA_NCCL_INCLUDE_DIR TESSERA_NCCL_LIBRARY TESSERA_CUDA_RUNTIME_INCLUDE_DIR)

set(_tessera_nccl_missing)
if(NOT TESSERA_WITH_CUDA)
  list(APPEND _tessera_nccl_missing "a LibTorch built with CUDA (this one is CPU-only)")
endif()
if(NOT TESSERA_WITH_MPI)
  list(APPEND _tessera_nccl_missing "MPI (libopenmpi-dev: NCCL's unique id is sent over MPI)")
endif()
if(NOT TESSERA_NCCL_INCLUDE_DIR OR NOT TESSERA_NCCL_LIBRARY)
  list(APPEND _tessera_nccl_missing "NCCL's nccl.h and libnccl (set NCCL_ROOT to its install or pip wheel directory)")
endif()
if(NOT TARGET CUDA::cudart OR NOT TESSERA_CUDA_RUNTIME_INCLUDE_DIR)
  list(APPEND _tessera_nccl_missing "the CUDA runtime of a CUDA toolkit (set CUDAToolkit_ROOT)")
endif()
string(JOIN "; " _tessera_nccl_missing_text ${_tessera_nccl_missing})

if(_tessera_nccl_mode STREQUAL "AUTO")
  if(_tessera_nccl_missing)
    set(TESSERA_WITH_NCCL OFF)
    message(STATUS "tessera: building without NcclCommunicator; it needs ${_tessera_nccl_missing_text}")
  else()
    set(TESSERA_WITH_NCCL ON)
  endif()
elseif(_tessera_nccl_mode)  # ON, TRUE, 1, ...
  if(_tessera_nccl_missing)
    message(FATAL_ERROR "tessera: TESSERA_WITH_NCCL is ON, but NcclCommunicator needs ${_tessera_nccl_missing_text}; "
                        "provide them or configure with -DTESSERA_WITH_NCCL=AUTO or OFF")
  endif()
  set(TESSERA_WITH_NCCL ON)
else()
  set(TESSERA_WITH_NCCL OFF)
endif()

if(TESSERA_WITH_NCCL)
  message(STATUS "tessera: NcclCommunicator with ${TESSERA_NCCL_LIBRARY}")
  target_sources(tessera PRIVATE ${TESSERA_NCCL_SOURCES})
  # An install may not point into the source tree (the project's .venv holds these headers): there the installed
  # package finds them again itself (tesseraConfig.cmake).
  foreach(dir ${TESSERA_NCCL_INCLUDE_DIR} ${TESSERA_CUDA_RUNTIME_INCLUDE_DIR})
    cmake_path(IS_PREFIX PROJECT_SOURCE_DIR "${dir}" _tessera_in_source)
    target_include_directories(tessera SYSTEM PUBLIC "$<BUILD_INTERFACE:${dir}>")
    if(NOT _tessera_in_source)
      target_include_directories(tessera SYSTEM PUBLIC "$<INSTALL_INTERFACE:${dir}>")
    endif()
  endforeach()
  # The installed package has no find_dependency(CUDAToolkit): it gets cudart's file, the build tree the target.
  target_link_libraries(tessera PUBLIC ${TESSERA_NCCL_LIBRARY}
    "$<BUILD_INTERFACE:CUDA::cudart>" "$<INSTALL_INTERFACE:${CUDA_cudart_LIBRARY}>")
  target_compile_definitions(tessera PUBLIC TESSERA_WITH_NCCL)
  # As for Torch and MPI: a parent project that add_subdirectory()s tessera must see CUDA::cudart.
  if(NOT PROJECT_IS_TOP_LEVEL)
    foreach(target CUDA::cudart CUDA::toolkit)
      if(TARGET ${target})
        set_target_properties(${target} PROPERTIES IMPORTED_GLOBAL TRUE)
      endif()
    endforeach()
  endif()
elseif(TESSERA_WITH_MPI AND TESSERA_NCCL_INCLUDE_DIR AND TESSERA_CUDA_RUNTIME_INCLUDE_DIR AND TESSERA_NCCL_SOURCES)
  # Compiled, never linked: proves src/dist_nccl/ builds against these NCCL and CUDA headers.
  add_library(tessera_nccl_compile_check OBJECT EXCLUDE_FROM_ALL ${TESSERA_NCCL_SOURCES})
  target_include_directories(tessera_nccl_compile_check PRIVATE "${PROJECT_SOURCE_DIR}/include")
  target_include_directories(tessera_nccl_compile_check SYSTEM PRIVATE
    ${TESSERA_NCCL_INCLUDE_DIR} ${TESSERA_CUDA_RUNTIME_INCLUDE_DIR})
  target_link_libraries(tessera_nccl_compile_check PRIVATE ${TESSERA_TORCH_TARGETS} MPI::MPI_CXX)
  target_compile_features(tessera_nccl_compile_check PRIVATE cxx_std_20)
  target_compile_options(tessera_nccl_compile_check PRIVATE -Wall -Wextra -Werror)
endif()
