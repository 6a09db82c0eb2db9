# tessera used the two ways a project takes it in: find_package() against an install tree (with a policy
# defined outside tessera), and add_subdirectory() of the source tree. Each consumer builds one experiment
# and runs one step (tests/consumers/run.sh).
string(JOIN ":" _prefix_path ${CMAKE_PREFIX_PATH})
foreach(kind find_package add_subdirectory)
  add_test(NAME consumer.${kind}
    COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/consumers/run.sh" ${kind} "${PROJECT_SOURCE_DIR}" "${PROJECT_BINARY_DIR}"
            "${CMAKE_CURRENT_BINARY_DIR}/consumers/${kind}" "${CMAKE_GENERATOR}" "${_prefix_path}")
  set_tests_properties(consumer.${kind} PROPERTIES LABELS consumer TIMEOUT 1200)
endforeach()
