# The sharding policies against the single-process reference (tests/sharding/, ctest label `sharding`).
# With MPI: tessera_sharding_tests (Catch2, with tests/dist/main.cpp's World) as jobs of 1, 2 and 4 ranks
# under mpiexec (sharding.np1/np2/np4); every rank compares its run with a NoShard run on world_size x the
# rows that it computes itself. Without MPI: the same tests as one plain process (a job of one).
file(GLOB _sharding_test_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/sharding/test_*.cpp")
if(TESSERA_WITH_MPI)
  add_executable(tessera_sharding_tests dist/main.cpp ${_sharding_test_sources})
else()
  add_executable(tessera_sharding_tests main.cpp ${_sharding_test_sources})
endif()
target_link_libraries(tessera_sharding_tests PRIVATE tessera::tessera Catch2::Catch2)
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
