# collectives: MpiCommunicator against raw MPI calls on the same buffers. Run it under MPI:
#   mpiexec -n 2 build/bench/collectives
if(TESSERA_WITH_MPI)
  add_executable(collectives collectives.cpp)
  target_link_libraries(collectives PRIVATE tessera::tessera)
  tessera_use_pch(collectives)
endif()
