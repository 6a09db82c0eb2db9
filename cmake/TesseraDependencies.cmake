# Finds what tessera builds against and sets TESSERA_TORCH_TARGETS and TESSERA_WITH_CUDA.
# Shared by the build tree and the installed package (tesseraConfig.cmake includes it too).
include(GNUInstallDirs)
include(CMakeFindDependencyMacro)

# Torch: Debian's libtorch-dev ships TorchConfig.cmake under /usr/lib/<triplet>/cmake/Torch; a pip or
# tarball LibTorch is found through CMAKE_PREFIX_PATH (python3 -c 'import torch;print(torch.utils.cmake_prefix_path)').
find_dependency(Torch)
find_dependency(nlohmann_json 3.9)
find_dependency(Boost 1.75)

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
