# NcclCommunicator (cmake/TesseraNccl.cmake):
#   compile.nccl_communicator   (label compile) without NCCL built in, but with nccl.h and cuda_runtime_api.h
#                               found: builds tessera_nccl_compile_check, src/dist_nccl/ compiled against those
#                               headers with -Wall -Wextra -Werror (a CPU machine with the CUDA toolkit's headers).
#   header_alone.tessera_dist_nccl_communicator_hpp (TesseraTestCompile.cmake) is given the NCCL and CUDA include
#                               directories (CPLUS_INCLUDE_PATH: system directories to GCC and Clang); without them
#                               it passes when the header stops at its #error saying what to install.
#   dist.nccl.np1               (labels dist, gpu) with TESSERA_WITH_NCCL: tessera_nccl_tests (Catch2,
#                               tests/dist/nccl/, its own main that makes the World) as a job of one rank. NCCL
#                               refuses two ranks of one communicator on the same GPU, so one GPU runs one rank.
if(TARGET tessera_nccl_compile_check)
  add_test(NAME compile.nccl_communicator
    COMMAND ${CMAKE_COMMAND} --build ${CMAKE_BINARY_DIR} --config $<CONFIG> --target tessera_nccl_compile_check)
  set_tests_properties(compile.nccl_communicator PROPERTIES LABELS compile TIMEOUT 600)
endif()

set(_nccl_header_test header_alone.tessera_dist_nccl_communicator_hpp)
if(TEST ${_nccl_header_test})
  if(TESSERA_NCCL_INCLUDE_DIR AND TESSERA_CUDA_RUNTIME_INCLUDE_DIR)
    set(_nccl_header_dirs ${TESSERA_NCCL_INCLUDE_DIR} ${TESSERA_CUDA_RUNTIME_INCLUDE_DIR})
    list(REMOVE_DUPLICATES _nccl_header_dirs)
    set(_nccl_header_env)
    foreach(dir ${_nccl_header_dirs})
      list(APPEND _nccl_header_env "CPLUS_INCLUDE_PATH=path_list_prepend:${dir}")
    endforeach()
    set_tests_properties(${_nccl_header_test} PROPERTIES ENVIRONMENT_MODIFICATION "${_nccl_header_env}")
  else()
    set_tests_properties(${_nccl_header_test} PROPERTIES PASS_REGULAR_EXPRESSION "install NCCL / CUDA toolkit")
  endif()
endif()

if(NOT TESSERA_WITH_NCCL)
  return()
endif()
add_executable(tessera_nccl_tests dist/nccl/main.cpp dist/nccl/test_nccl_communicator.cpp)
target_link_libraries(tessera_nccl_tests PRIVATE tessera::tessera tessera_catch_session)
target_include_directories(tessera_nccl_tests PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
tessera_use_pch(tessera_nccl_tests)

add_test(NAME dist.nccl.np1
  COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 1 ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:tessera_nccl_tests> ${MPIEXEC_POSTFLAGS})
set_tests_properties(dist.nccl.np1 PROPERTIES
  ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" LABELS "dist;gpu" TIMEOUT 300
  SKIP_RETURN_CODE 77)  # no GPU on this machine
