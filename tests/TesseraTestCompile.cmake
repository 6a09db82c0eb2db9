# 1. Misuse must not compile: each tests/compile_fail/*.cpp is built on its own and must FAIL with the
#    fix-it message its first line names (`// expect: <regex>`).
# 2. Every public header compiles on its own (no PCH, no other include first).
get_target_property(_torch_includes torch INTERFACE_INCLUDE_DIRECTORIES)
set(_compile_flags -std=c++20 -fsyntax-only -D_GLIBCXX_USE_CXX11_ABI=1 -I${PROJECT_SOURCE_DIR}/include)
foreach(dir ${_torch_includes})
  list(APPEND _compile_flags -I${dir})
endforeach()
if(TESSERA_WITH_MPI)
  foreach(dir ${MPI_CXX_INCLUDE_DIRS})
    list(APPEND _compile_flags -I${dir})
  endforeach()
endif()

# With GCC they start from the build's precompiled LibTorch headers (cmake/TesseraPch.cmake), given with the flags it
# was built with (a response file: its definitions, the build type's flags): a case then parses only tessera's
# headers, ~6 s instead of ~16 s on a 2-core machine. A failure still has to come from the case's own misuse.
set(_compile_fail_flags ${_compile_flags})
if(TARGET tessera_pch AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  string(TOUPPER "${CMAKE_BUILD_TYPE}" _build_type)
  separate_arguments(_type_flags UNIX_COMMAND "${CMAKE_CXX_FLAGS} ${CMAKE_CXX_FLAGS_${_build_type}}")
  set(_pch_definitions "$<TARGET_PROPERTY:tessera_pch,COMPILE_DEFINITIONS>")
  list(JOIN _type_flags "\n" _type_flags)
  file(GENERATE OUTPUT "${CMAKE_CURRENT_BINARY_DIR}/compile_fail.rsp" CONTENT
"$<$<BOOL:${_pch_definitions}>:-D$<JOIN:${_pch_definitions},\n-D>\n>${_type_flags}
-Winvalid-pch
-include
${PROJECT_BINARY_DIR}/CMakeFiles/tessera_pch.dir/cmake_pch.hxx
")
  list(REMOVE_ITEM _compile_fail_flags -D_GLIBCXX_USE_CXX11_ABI=1)  # the libstdc++ default, as the header was built
  list(PREPEND _compile_fail_flags "@${CMAKE_CURRENT_BINARY_DIR}/compile_fail.rsp")
endif()
file(GLOB _compile_fail_cases "${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/*.cpp")
foreach(case ${_compile_fail_cases})
  get_filename_component(name "${case}" NAME_WE)
  file(STRINGS "${case}" first_line LIMIT_COUNT 1)
  string(REGEX REPLACE "^// expect: " "" expected "${first_line}")
  add_test(NAME compile_fail.${name} COMMAND ${CMAKE_CXX_COMPILER} ${_compile_fail_flags} "${case}")
  set_tests_properties(compile_fail.${name} PROPERTIES LABELS compile WILL_FAIL FALSE
    PASS_REGULAR_EXPRESSION "${expected}")
endforeach()

# Each header is compiled to an object through the build's compiler launcher (ccache where found): a header that no
# longer compiles alone fails as before, and one compiled before on this machine (any clone) is a cache hit, so a
# warm suite spends no time re-parsing LibTorch's headers 140 times.
list(REMOVE_ITEM _compile_flags -fsyntax-only)
file(GLOB_RECURSE _public_headers RELATIVE "${PROJECT_SOURCE_DIR}/include" "${PROJECT_SOURCE_DIR}/include/tessera/*.hpp")
if(NOT TESSERA_WITH_MPI)
  list(FILTER _public_headers EXCLUDE REGEX "^tessera/dist/")
endif()
set(_alone_dir "${CMAKE_CURRENT_BINARY_DIR}/header_alone")
foreach(header ${_public_headers})
  string(MAKE_C_IDENTIFIER "${header}" id)
  file(CONFIGURE OUTPUT "${_alone_dir}/${id}.cpp" CONTENT "#include <${header}>\n" @ONLY)
  add_test(NAME header_alone.${id}
    COMMAND ${CMAKE_CXX_COMPILER_LAUNCHER} ${CMAKE_CXX_COMPILER} ${_compile_flags} -Werror
            -c "${_alone_dir}/${id}.cpp" -o "${_alone_dir}/${id}.o" -MD -MF "${_alone_dir}/${id}.d")
  set_tests_properties(header_alone.${id} PROPERTIES LABELS compile)
endforeach()

# 3. tessera's CUDA kernels (Adam8bit's, the rotary embedding's) compile where nvcc is found but CUDA LibTorch is
#    not (they are built into tessera otherwise).
if(NOT TESSERA_WITH_CUDA)
  find_program(TESSERA_NVCC nvcc HINTS ENV CUDACXX PATHS /usr/local/cuda/bin)
  if(TESSERA_NVCC)
    foreach(cu ${TESSERA_CUDA_SOURCES})
      get_filename_component(name "${cu}" NAME_WE)
      add_test(NAME compile_cuda.${name}
        COMMAND ${TESSERA_NVCC} -std=c++17 -Werror all-warnings -c "${cu}" -o "${CMAKE_CURRENT_BINARY_DIR}/${name}.o")
      set_tests_properties(compile_cuda.${name} PROPERTIES LABELS compile)
    endforeach()
  endif()
endif()
