# Cross-checks against an independent PyTorch implementation (tests/reference/llama_reference.py), run
# where Debian's python3-torch is installed: per-step losses and final weights within 1e-4 relative.
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()
find_program(TESSERA_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(TESSERA_PYTHON)
  execute_process(COMMAND ${TESSERA_PYTHON} -c "import torch" RESULT_VARIABLE _no_torch OUTPUT_QUIET ERROR_QUIET)
endif()
if(NOT TESSERA_PYTHON OR _no_torch)
  message(STATUS "tessera: python3 with torch not found; reference cross-checks are not registered")
  return()
endif()

set(_check ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_against_reference.py")
set(_gqa "{\"vocab_size\":512,\"hidden_size\":64,\"intermediate_size\":172,\"num_hidden_layers\":3,\"num_attention_heads\":4,\"num_key_value_heads\":2,\"rms_norm_eps\":1e-5,\"rope_theta\":10000.0}")
set(_tied "{\"vocab_size\":300,\"hidden_size\":48,\"intermediate_size\":128,\"num_hidden_layers\":2,\"num_attention_heads\":6,\"num_key_value_heads\":6,\"rms_norm_eps\":1e-6,\"rope_theta\":500000.0,\"tie_word_embeddings\":true}")

add_test(NAME reference.fp32_gqa_accumulate_llmc
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --accumulate 2 --llmc --steps 20)
add_test(NAME reference.fp32_tied_bf16_checkpoint
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_tied} --dtype BF16 --steps 20)
add_test(NAME reference.fp32_checkpointing
  COMMAND ${_check} $<TARGET_FILE:llama-fp32-ckpt> --config ${_gqa} --steps 10)
add_test(NAME reference.sgd
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_gqa} --optimizer sgd --lr 0.05 --steps 10)
# Negative control: a 1% different learning rate on tessera's side must make the check fail.
add_test(NAME reference.negative_control
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --steps 5 --tessera-extra lr=0.00303)
set_tests_properties(reference.negative_control PROPERTIES LABELS reference WILL_FAIL TRUE TIMEOUT 300)
set_tests_properties(reference.fp32_gqa_accumulate_llmc reference.fp32_tied_bf16_checkpoint
  reference.fp32_checkpointing reference.sgd PROPERTIES LABELS reference TIMEOUT 300)
