# tessera_add_experiment(<name> TYPE "<C++ type>" [HEADERS <header>...])
# Builds one executable whose whole program is tessera::main<TYPE>: the way tessera turns one template
# instantiation into one experiment binary. HEADERS are included after <tessera/tessera.hpp> (your own
# policies); the target is an ordinary executable, so add include directories to it as usual. Example:
#   tessera_add_experiment(llama-bf16mixed TYPE "tessera::Experiment<tessera::models::Llama, tessera::Bf16Mixed>")
set(_TESSERA_EXPERIMENT_TEMPLATE "${CMAKE_CURRENT_LIST_DIR}/experiment_main.cpp.in")

# tessera_instance_optimization([<target>]): compiles <target>'s C++ sources (without one: every target defined in
# this directory from here on) with TESSERA_INSTANCE_OPTIMIZATION (tessera's own build: -O1) after the build type's
# flags, in a Release or RelWithDebInfo build. For translation units whose work
# is instantiating tessera's templates (Trainer<Exp>, main<Exp>): the loops a run spends its time in are compiled into
# libtessera and LibTorch, so a lower level there costs no run time and saves about a quarter of each compile. Unset
# or empty (an installed tessera's default): the build type's level, so that an experiment whose HEADERS hold loops of
# their own (a policy of yours) keeps it unless you ask.
function(tessera_instance_optimization)
  if(NOT TESSERA_INSTANCE_OPTIMIZATION)
    return()
  endif()
  set(options "$<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Release,RelWithDebInfo>>:${TESSERA_INSTANCE_OPTIMIZATION}>")
  if(ARGC GREATER 0)
    target_compile_options(${ARGV0} PRIVATE "${options}")
  else()
    add_compile_options("${options}")
  endif()
endfunction()

function(tessera_add_experiment name)
  cmake_parse_arguments(ARG "" "TYPE" "HEADERS" ${ARGN})
  if(NOT ARG_TYPE)
    message(FATAL_ERROR "tessera_add_experiment(${name}): give the experiment type, e.g. TYPE \"tessera::Experiment<tessera::models::Llama>\"")
  endif()
  set(TESSERA_EXPERIMENT_NAME "${name}")
  set(TESSERA_EXPERIMENT_TYPE "${ARG_TYPE}")
  set(TESSERA_EXPERIMENT_INCLUDES "")
  foreach(header ${ARG_HEADERS})
    string(APPEND TESSERA_EXPERIMENT_INCLUDES "#include <${header}>\n")
  endforeach()
  string(MAKE_C_IDENTIFIER "${name}" id)
  set(source "${CMAKE_CURRENT_BINARY_DIR}/experiments/${id}.cpp")
  configure_file("${_TESSERA_EXPERIMENT_TEMPLATE}" "${source}" @ONLY)
  add_executable(${name} "${source}")
  target_link_libraries(${name} PRIVATE tessera::tessera)
  if(COMMAND tessera_use_pch)
    tessera_use_pch(${name})
  endif()
  tessera_instance_optimization(${name})
endfunction()
