# MPI for tessera/dist (World, MpiCommunicator): found here and linked to the tessera target when present.
# Included by the top-level CMakeLists.txt once the tessera target exists. Sets the variable TESSERA_WITH_MPI
# (ON/OFF), and with MPI defines TESSERA_WITH_MPI for tessera and its users (code that uses tessera/dist only
# when it is there).
#
# Without MPI, tessera still builds, minus src/dist/ (single-process training needs no MPI); a program that
# includes a tessera/dist header then stops at an #error saying to install MPI.
set(MPI_CXX_SKIP_MPICXX TRUE)  # tessera calls MPI's C API; skip the MPI-2 C++ bindings (gone since MPI-3)
find_package(MPI COMPONENTS CXX)
if(MPI_CXX_FOUND)
  set(TESSERA_WITH_MPI ON)
  target_link_libraries(tessera PUBLIC MPI::MPI_CXX)
  target_compile_definitions(tessera PUBLIC TESSERA_WITH_MPI)
  # As for Torch (TesseraDependencies.cmake): a parent project that add_subdirectory()s tessera must see it.
  if(NOT PROJECT_IS_TOP_LEVEL)
    set_target_properties(MPI::MPI_CXX PROPERTIES IMPORTED_GLOBAL TRUE)
  endif()
else()
  set(TESSERA_WITH_MPI OFF)
  get_target_property(_tessera_sources tessera SOURCES)
  list(FILTER _tessera_sources EXCLUDE REGEX "/src/dist/")
  set_property(TARGET tessera PROPERTY SOURCES ${_tessera_sources})
  message(STATUS "tessera: MPI not found, building without tessera/dist (multi-process runs); "
                 "install libopenmpi-dev and openmpi-bin to have it")
endif()
