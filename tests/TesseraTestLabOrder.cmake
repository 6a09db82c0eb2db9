# The labs' row orders (data/lab_order.hpp) against the libraries themselves (tests/reference/check_lab_order.py):
# numpy 2.3.5's default_rng(seed).permutation(n) for many (seed, n) pairs (n from 0 to ~100,000, near powers of two,
# seeds around the 2^32 boundary and up to 2^64-1), datasets 5.2.0's Dataset.shuffle and train_test_split, torch's
# randperm, a shuffled DataLoader's epochs 0..3 and DistributedSampler for 1..4 ranks; lab_order_dump is tessera's
# side. The negative control hands the comparison one wrong row and must see a mismatch.
add_executable(lab_order_dump data/lab_order_dump.cpp)
target_link_libraries(lab_order_dump PRIVATE tessera::tessera)

set(_check_lab_order ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_lab_order.py"
    $<TARGET_FILE:lab_order_dump>)
tessera_reference_case(reference.lab_order TIMEOUT 120 COMMAND ${_check_lab_order})
tessera_reference_case(reference.lab_order_negative_control TIMEOUT 120 COMMAND ${_check_lab_order} --quick --perturb --expect-mismatch)
