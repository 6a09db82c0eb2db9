# tessera used the two ways a project takes it in: find_package() against an install tree, and
# add_subdirectory() of the source tree. Each consumer builds one experiment and runs one step.
set(_consumers "${CMAKE_CURRENT_SOURCE_DIR}/consumers")
set(_work "${CMAKE_CURRENT_BINARY_DIR}/consumers")
string(JOIN ";" _prefix_path ${CMAKE_PREFIX_PATH})

add_test(NAME consumer.find_package COMMAND bash -c
  "set -e; rm -rf '${_work}/fp'; mkdir -p '${_work}/fp';
   '${CMAKE_COMMAND}' --install '${PROJECT_BINARY_DIR}' --prefix '${_work}/fp/prefix' >/dev/null;
   '${CMAKE_COMMAND}' -S '${_consumers}/find_package' -B '${_work}/fp/build' -G '${CMAKE_GENERATOR}'
     -DCMAKE_BUILD_TYPE=Release '-DCMAKE_PREFIX_PATH=${_work}/fp/prefix;${_prefix_path}' >/dev/null;
   '${CMAKE_COMMAND}' --build '${_work}/fp/build' >/dev/null;
   '${_work}/fp/build/consumer-experiment' max_steps=1 batch_size=1 seq_len=16 threads=1 | grep -q '^done:'")
set_tests_properties(consumer.find_package PROPERTIES LABELS consumer TIMEOUT 900)

add_test(NAME consumer.add_subdirectory COMMAND bash -c
  "set -e; rm -rf '${_work}/as'; mkdir -p '${_work}/as';
   '${CMAKE_COMMAND}' -S '${_consumers}/add_subdirectory' -B '${_work}/as/build' -G '${CMAKE_GENERATOR}'
     -DCMAKE_BUILD_TYPE=Release -DTESSERA_SOURCE_DIR='${PROJECT_SOURCE_DIR}' >/dev/null;
   '${CMAKE_COMMAND}' --build '${_work}/as/build' >/dev/null;
   '${_work}/as/build/consumer-experiment' max_steps=1 batch_size=1 seq_len=16 threads=1 | grep -q '^done:'")
set_tests_properties(consumer.add_subdirectory PROPERTIES LABELS consumer TIMEOUT 900)
