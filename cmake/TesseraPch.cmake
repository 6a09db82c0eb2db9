# tessera_use_pch(<target>): every target of the build tree shares a precompiled header of LibTorch and the other
# heavy third-party headers, built once (each LibTorch-heavy TU drops from ~10 s to ~2 s). The library's own sources
# (target `tessera`) use that one; every other target, whose sources instantiate tessera's templates (experiments,
# catalogue programs, tests, the bench), uses a second one that also holds <tessera/tessera.hpp>: parsing tessera's
# headers took ~3.5 s of each such compile, and they change together anyway (a header edit rebuilds all of them). The
# library keeps the first, so that an edit of one tessera header rebuilds only the library sources that include it.
function(tessera_use_pch target)
  if(NOT TESSERA_PCH)
    return()
  endif()
  set(third_party <ATen/ATen.h> <torch/csrc/autograd/autograd.h> <torch/csrc/autograd/custom_function.h>
                  <nlohmann/json.hpp> <filesystem> <string> <vector> <span>)
  if(target STREQUAL "tessera")
    set(pch tessera_pch)
    if(NOT TARGET tessera_pch)
      add_library(tessera_pch OBJECT "${PROJECT_SOURCE_DIR}/cmake/pch.cpp")
      target_link_libraries(tessera_pch PRIVATE ${TESSERA_TORCH_TARGETS} nlohmann_json::nlohmann_json Boost::headers)
      target_precompile_headers(tessera_pch PRIVATE ${third_party})
    endif()
  else()
    set(pch tessera_instance_pch)
    if(NOT TARGET tessera_instance_pch)
      add_library(tessera_instance_pch OBJECT "${PROJECT_SOURCE_DIR}/cmake/pch.cpp")
      target_link_libraries(tessera_instance_pch PRIVATE tessera::tessera)
      target_precompile_headers(tessera_instance_pch PRIVATE ${third_party} <tessera/tessera.hpp>)
    endif()
  endif()
  target_precompile_headers(${target} REUSE_FROM ${pch})
  # GCC: the preprocessed source names the precompiled header instead of inlining it, which is how ccache caches
  # (and hits) a compilation that uses one.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-fpch-preprocess>)
  endif()
endfunction()
