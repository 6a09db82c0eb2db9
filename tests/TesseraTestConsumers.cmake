# tessera used the ways a project takes it in: find_package() against an install tree (with a policy defined
# outside tessera), add_subdirectory() of the source tree (linking this build's libtessera.a through TESSERA_LIBRARY:
# the sources are compiled once, here), and the Conan package (conanfile.py with its test_package, which compiles them
# again in Conan's cache). Each consumer builds one experiment and runs one step (tests/consumers/run.sh, conan.sh).
string(JOIN ":" _prefix_path ${CMAKE_PREFIX_PATH})
foreach(kind find_package add_subdirectory)
  add_test(NAME consumer.${kind}
    COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/consumers/run.sh" ${kind} "${PROJECT_SOURCE_DIR}" "${PROJECT_BINARY_DIR}"
            "${CMAKE_CURRENT_BINARY_DIR}/consumers/${kind}" "${CMAKE_GENERATOR}" "${_prefix_path}")
  set_tests_properties(consumer.${kind} PROPERTIES LABELS consumer TIMEOUT 1200)
endforeach()
# A TESSERA_LIBRARY that does not exist stops the configuration at once (non-zero, nothing generated), naming it
# (CMake wraps the message: compared without spaces and line breaks).
add_test(NAME consumer.add_subdirectory_missing_library
  COMMAND bash -c "d=$(mktemp -d); trap 'rm -rf $d' EXIT
    out=$(${CMAKE_COMMAND} -S '${CMAKE_CURRENT_SOURCE_DIR}/consumers/add_subdirectory' -B $d -G '${CMAKE_GENERATOR}' \
          -DTESSERA_SOURCE_DIR='${PROJECT_SOURCE_DIR}' -DTESSERA_LIBRARY=$d/no/libtessera.a 2>&1) && exit 1
    echo \"$out\"; test ! -e $d/build.ninja || exit 1
    tr -d ' \\n' <<<\"$out\" | grep -q \"TESSERA_LIBRARY=$d/no/libtessera.adoesnotexist;buildtesserathere\"")
set_tests_properties(consumer.add_subdirectory_missing_library PROPERTIES LABELS consumer TIMEOUT 120)
# Builds tessera's library inside Conan's cache, from its sources (with ccache, from the entries this build made:
# tests/consumers/conan.sh); skipped without a Conan client.
add_test(NAME consumer.conan
  COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/consumers/conan.sh" "${PROJECT_SOURCE_DIR}"
          "${CMAKE_CURRENT_BINARY_DIR}/consumers/conan" "${TESSERA_TORCH_PYTHON}" "${CMAKE_GENERATOR}")
set_tests_properties(consumer.conan PROPERTIES LABELS consumer TIMEOUT 1800 SKIP_RETURN_CODE 77)
