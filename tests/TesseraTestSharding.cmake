# The sharding policies against the single-process reference (tests/sharding/, ctest label `sharding`).
# With MPI: tessera_sharding_tests (Catch2, with tests/dist/main.cpp's World) as jobs of 1, 2 and 4 ranks
# under mpiexec (sharding.np1/np2/np4); every rank compares its run with a NoShard run on world_size x the
# rows that it computes itself. Without MPI: the same tests as one plain process (a job of one).
# The offload policies' parity tests (tests/offload/) run in the same jobs: they compare against the same
# experiment without offload on 1, 2 and 4 ranks.
file(GLOB _sharding_test_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/sharding/test_*.cpp"
                                                   "${CMAKE_CURRENT_SOURCE_DIR}/offload/test_*.cpp")
if(TESSERA_WITH_MPI)
  add_executable(tessera_sharding_tests dist/main.cpp ${_sharding_test_sources})
else()
  add_executable(tessera_sharding_tests main.cpp ${_sharding_test_sources})
endif()
target_link_libraries(tessera_sharding_tests PRIVATE tessera::tessera tessera_catch_session)
target_include_directories(tessera_sharding_tests PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
tessera_use_pch(tessera_sharding_tests)

if(NOT TESSERA_WITH_MPI)
  add_test(NAME sharding.np1 COMMAND tessera_sharding_tests)
  set_tests_properties(sharding.np1 PROPERTIES LABELS sharding TIMEOUT 600)
  return()
endif()
set(_sharding_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
foreach(n 1 2 4)
  add_test(NAME sharding.np${n}
    COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} --oversubscribe ${MPIEXEC_PREFLAGS}
            $<TARGET_FILE:tessera_sharding_tests> ${MPIEXEC_POSTFLAGS})
  set_tests_properties(sharding.np${n} PROPERTIES ENVIRONMENT "${_sharding_env}" LABELS sharding TIMEOUT 900)
endforeach()

# The issue's acceptance run, with the example binaries: 4 ranks of FullShard (and of the other policies) with
# batch_size 2 against one rank of NoShard with batch_size 8, same model dir and token file; losses from the
# metrics files and the saved weights compared by tests/sharding/compare_runs.py (1e-5 relative, lr 1e-4 as in
# parity.hpp). The 4-rank metrics file must hold memory records of all 4 ranks.
if(TESSERA_BUILD_EXAMPLES AND TESSERA_PYTHON)
  set(_compare "${CMAKE_CURRENT_SOURCE_DIR}/sharding/compare_runs.py")
  set(_run_args "data=t.bin seq_len=16 max_steps=3 lr=1e-4 threads=1")
  foreach(example llama-fsdp-fp32 llama-ddp-fp32 llama-zero1-fp32 llama-zero2-fp32 llama-hsdp-fp32)
    add_test(NAME sharding.cli.${example}.np4_vs_np1
      COMMAND bash -c
      "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d
       $<TARGET_FILE:tessera_make_fixture> model m; $<TARGET_FILE:tessera_make_fixture> tokens t.bin 20000
       ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 --oversubscribe $<TARGET_FILE:${example}> model_dir=m ${_run_args} batch_size=2 shard_group_size=2 metrics=a.jsonl save_dir=a >/dev/null
       $<TARGET_FILE:llama-fp32> model_dir=m ${_run_args} batch_size=8 metrics=b.jsonl save_dir=b >/dev/null
       ${TESSERA_PYTHON} ${_compare} a.jsonl a b.jsonl b 1e-5 --ranks 4")
    set_tests_properties(sharding.cli.${example}.np4_vs_np1 PROPERTIES
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" LABELS "sharding;cli" TIMEOUT 300)
  endforeach()
endif()
