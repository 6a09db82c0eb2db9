# The reference checks run in groups: every case of one check script is a case of one ctest test,
# reference.<script> (check_lora_against_peft.py -> reference.lora_against_peft; a RUN_SERIAL case goes to
# reference.<script>.serial), run by tests/reference/run_cases.py in one Python process, so torch, transformers and the
# other judges are imported once per script instead of once per case. Every case still runs, prints its name,
# status and time, and fails the group; `ctest -R reference.family_forward --output-on-failure` shows which.
#
#   tessera_reference_case(<case name> [TIMEOUT <s>] [RUN_SERIAL] COMMAND <python> <script> [args...])
# registers one case (TIMEOUT: that case's share of its group's limit, default 300 s); tessera_reference_groups()
# (tests/CMakeLists.txt, after every file that registers cases) adds the groups as ctest tests, label `reference`.
function(tessera_reference_case name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "RUN_SERIAL" "TIMEOUT" "COMMAND")
  if(arg_UNPARSED_ARGUMENTS OR NOT arg_COMMAND)
    message(FATAL_ERROR "tessera_reference_case(${name}): say [TIMEOUT s] [RUN_SERIAL] COMMAND python script args...; "
                        "got ${arg_UNPARSED_ARGUMENTS}")
  endif()
  list(POP_FRONT arg_COMMAND python script)
  if(NOT python STREQUAL TESSERA_PYTHON OR NOT script MATCHES "\\.py$")
    message(FATAL_ERROR "tessera_reference_case(${name}): the command must start with \${TESSERA_PYTHON} and a check "
                        "script, got '${python}' '${script}'")
  endif()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 300)
  endif()
  get_filename_component(stem "${script}" NAME_WE)
  string(REGEX REPLACE "^check_" "" stem "${stem}")
  set(group reference.${stem})
  if(arg_RUN_SERIAL)
    set(group ${group}.serial)
    set_property(GLOBAL PROPERTY TESSERA_REFERENCE_SERIAL_${group} TRUE)
  endif()
  get_property(groups GLOBAL PROPERTY TESSERA_REFERENCE_GROUPS)
  if(NOT group IN_LIST groups)
    set_property(GLOBAL APPEND PROPERTY TESSERA_REFERENCE_GROUPS ${group})
  endif()
  get_property(names GLOBAL PROPERTY TESSERA_REFERENCE_NAMES)
  if(name IN_LIST names)
    message(FATAL_ERROR "tessera_reference_case: two cases are named ${name}")
  endif()
  set_property(GLOBAL APPEND PROPERTY TESSERA_REFERENCE_NAMES ${name})
  set_property(GLOBAL APPEND PROPERTY TESSERA_REFERENCE_CASES_${group} --case ${name} ${script} ${arg_COMMAND})
  get_property(timeout GLOBAL PROPERTY TESSERA_REFERENCE_TIMEOUT_${group})
  if(NOT timeout)
    set(timeout 0)
  endif()
  math(EXPR timeout "${timeout} + ${arg_TIMEOUT}")
  set_property(GLOBAL PROPERTY TESSERA_REFERENCE_TIMEOUT_${group} ${timeout})
endfunction()

function(tessera_reference_groups)
  get_property(groups GLOBAL PROPERTY TESSERA_REFERENCE_GROUPS)
  foreach(group ${groups})
    get_property(cases GLOBAL PROPERTY TESSERA_REFERENCE_CASES_${group})
    get_property(timeout GLOBAL PROPERTY TESSERA_REFERENCE_TIMEOUT_${group})
    get_property(serial GLOBAL PROPERTY TESSERA_REFERENCE_SERIAL_${group})
    add_test(NAME ${group} COMMAND ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/run_cases.py" ${cases})
    set_tests_properties(${group} PROPERTIES LABELS reference TIMEOUT ${timeout})
    if(serial)
      set_tests_properties(${group} PROPERTIES RUN_SERIAL TRUE)
    endif()
  endforeach()
endfunction()

# The runner's own check: every case runs whatever the others did, with its own arguments and globals, and any
# case that exits non-zero or raises fails its group.
add_test(NAME reference.run_cases_runner COMMAND ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/test_run_cases.py")
set_tests_properties(reference.run_cases_runner PROPERTIES LABELS reference TIMEOUT 60)
