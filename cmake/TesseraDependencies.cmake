# Finds what tessera builds against and sets TESSERA_TORCH_TARGETS and TESSERA_WITH_CUDA.
# Shared by the build tree and the installed package (tesseraConfig.cmake includes it too).
include(GNUInstallDirs)
include(CMakeFindDependencyMacro)

# Torch: Debian's libtorch-dev ships TorchConfig.cmake under /usr/lib/<triplet>/cmake/Torch; a pip or
# tarball LibTorch is found through CMAKE_PREFIX_PATH (python3 -c 'import torch;print(torch.utils.cmake_prefix_path)').
find_dependency(Torch)
find_dependency(nlohmann_json 3.9)
find_dependency(Boost 1.75)

# Debian's TorchConfig gives the `torch` target but not the C++ frontend include dir.
set(TESSERA_TORCH_TARGETS torch)
foreach(dir /usr/include/torch/csrc/api/include)
  if(EXISTS "${dir}/torch/version.h")
    set_property(TARGET torch APPEND PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${dir}")
  endif()
endforeach()

if(TORCH_CUDA_LIBRARIES)
  set(TESSERA_WITH_CUDA ON)
else()
  set(TESSERA_WITH_CUDA OFF)
endif()
