# tessera/dist under mpiexec (ctest label `dist`):
#   dist.np1/np2/np4        tessera_dist_tests (Catch2, tests/dist/test_*.cpp, with its own main that makes the
#                           World) as a job of 1, 2 and 4 ranks; --oversubscribe lets 4 ranks share 2 cores.
#   dist.no_launcher        the same binary started plainly, without mpiexec: a job of one rank.
#   dist.abort_on_one_rank  a 3-rank job whose rank 1 calls World::abort ends at once, non-zero, and prints
#                           the message once (tests/dist/expect_fail_once.sh).
# OMPI_ALLOW_RUN_AS_ROOT*: Open MPI refuses to run as root (CI containers) without them.
if(NOT TESSERA_WITH_MPI)
  return()
endif()
file(GLOB _dist_test_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/dist/test_*.cpp")
add_executable(tessera_dist_tests dist/main.cpp ${_dist_test_sources})
target_link_libraries(tessera_dist_tests PRIVATE tessera::tessera tessera_catch_session)
target_include_directories(tessera_dist_tests PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
tessera_use_pch(tessera_dist_tests)

add_executable(tessera_abort_probe dist/abort_probe.cpp)
target_link_libraries(tessera_abort_probe PRIVATE tessera::tessera)
tessera_use_pch(tessera_abort_probe)

set(_dist_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
foreach(n 1 2 4)
  add_test(NAME dist.np${n}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} --oversubscribe ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:tessera_dist_tests> ${MPIEXEC_POSTFLAGS})
  set_tests_properties(dist.np${n} PROPERTIES ENVIRONMENT "${_dist_env}" LABELS dist TIMEOUT 120)
endforeach()

add_test(NAME dist.no_launcher COMMAND tessera_dist_tests)
set_tests_properties(dist.no_launcher PROPERTIES LABELS dist TIMEOUT 120)

set(_abort_message "abort_probe: rank 1 gives up on purpose")
add_test(NAME dist.abort_on_one_rank
  COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/dist/expect_fail_once.sh" 30 "[rank 1/3] ${_abort_message}" --
          ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 3 --oversubscribe ${MPIEXEC_PREFLAGS}
          $<TARGET_FILE:tessera_abort_probe> ${MPIEXEC_POSTFLAGS} ${_abort_message})
set_tests_properties(dist.abort_on_one_rank PROPERTIES ENVIRONMENT "${_dist_env}" LABELS dist TIMEOUT 60)

# Failures through the engine and bad job shapes: printed once, every rank ends, non-zero, nothing left behind.
add_executable(tessera_fail_probe dist/fail_probe.cpp)
target_link_libraries(tessera_fail_probe PRIVATE tessera::tessera)
tessera_use_pch(tessera_fail_probe)
set(_fail_once "${CMAKE_CURRENT_SOURCE_DIR}/dist/expect_fail_once.sh")
set(_mpi2 ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe ${MPIEXEC_PREFLAGS})
set(_mpi4 ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 --oversubscribe ${MPIEXEC_PREFLAGS})
set(_tiny model=tiny batch_size=2 seq_len=16 max_steps=3 threads=1 metrics=m.jsonl)
add_test(NAME dist.fail_on_rank1_in_forward
  COMMAND bash ${_fail_once} 60 "fail_probe: rank 1 fails" -- ${_mpi2} $<TARGET_FILE:tessera_fail_probe> ${_tiny})
if(TESSERA_BUILD_EXAMPLES)
  add_test(NAME dist.noshard_refuses_two_ranks
    COMMAND bash ${_fail_once} 60 "runs in one process" -- ${_mpi2} $<TARGET_FILE:llama-fp32> ${_tiny})
  add_test(NAME dist.hybrid_group_must_divide
    COMMAND bash ${_fail_once} 60 "shard_group_size=3: does not divide the 4 ranks"
            -- ${_mpi4} $<TARGET_FILE:llama-hsdp-fp32> ${_tiny} shard_group_size=3)
  add_test(NAME dist.bad_value_reported_once
    COMMAND bash ${_fail_once} 60 "lr=-1" -- ${_mpi4} $<TARGET_FILE:llama-fsdp-fp32> ${_tiny} lr=-1)
  # A FIFO in place of config.json: refused at once on every rank (it once hung them all in open()).
  string(JOIN " " _mpi2_text ${_mpi2})
  string(JOIN " " _tiny_text ${_tiny})
  add_test(NAME dist.config_fifo_no_hang COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; $<TARGET_FILE:tessera_make_fixture> model $d/m && rm $d/m/config.json &&
     mkfifo $d/m/config.json &&
     bash ${_fail_once} 60 'config.json: is not a regular file' -- ${_mpi2_text} $<TARGET_FILE:llama-fsdp-fp32> model_dir=$d/m ${_tiny_text}")
  set(_fail_tests dist.noshard_refuses_two_ranks dist.hybrid_group_must_divide dist.bad_value_reported_once
      dist.config_fifo_no_hang)
endif()
set_tests_properties(dist.fail_on_rank1_in_forward ${_fail_tests} PROPERTIES ENVIRONMENT "${_dist_env}" LABELS dist
                     TIMEOUT 90)
