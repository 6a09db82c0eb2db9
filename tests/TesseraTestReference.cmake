# Cross-checks against the libraries tessera's users would otherwise run, in the Python environment LibTorch comes
# from (TESSERA_TORCH_PYTHON: the project's .venv with torch 2.11 and transformers 5.17). check_against_transformers.py:
# Hugging Face LlamaForCausalLM under torch.optim on a directory written by save_pretrained; per-step losses and
# the final weights (tessera's save_dir read by from_pretrained) within 1e-4 relative, and one step's gradients.
# PEFT's checks are in TesseraTestReferencePeft.cmake, torch DDP/FSDP2's in TesseraTestReferenceSharding.cmake.
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()

set(_check ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_against_transformers.py")

add_test(NAME reference.fp32_gqa_accumulate_llmc
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --accumulate 2 --llmc --steps 20)
add_test(NAME reference.fp32_tied_bf16_checkpoint
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_tied} --dtype BF16 --steps 20)
add_test(NAME reference.fp32_checkpointing
  COMMAND ${_check} $<TARGET_FILE:llama-fp32-ckpt> --config ${_gqa} --steps 10)
add_test(NAME reference.sgd
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_gqa} --optimizer sgd --lr 0.05 --steps 10)
# torch's fused AdamW orders its arithmetic differently from the for-loop one that tessera's update follows: losses
# still agree within 1e-7, and the weights after 20 steps within 1e-3 (Adam's sign-like update of near-zero
# gradients amplifies the last bit; the for-loop AdamW above agrees within 1e-4).
add_test(NAME reference.adamw_fused
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --optimizer adamw-fused --accumulate 2 --steps 20
          --weight-tol 1e-3)
add_test(NAME reference.sharded_save_pretrained
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --shard-size 200KB --steps 5)
# One step's loss and gradients (--gradients: tessera's gradient is W0 - W1 of one SGD step at lr 1), from the
# save_pretrained dir and then from the dir tessera saved, within 1e-5.
add_test(NAME reference.gradients_gqa_accumulate
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_gqa} --gradients --accumulate 2 --tol 1e-5)
add_test(NAME reference.gradients_tied_bf16
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_tied} --dtype BF16 --gradients --tol 1e-5)
# Its negative control: gradients 0.1% too large (lr 1.001) must be seen.
add_test(NAME reference.gradients_negative_control
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_gqa} --gradients --tol 1e-5
          --tessera-extra lr=1.001 --expect-mismatch)
set_tests_properties(reference.gradients_gqa_accumulate reference.gradients_tied_bf16
  reference.gradients_negative_control PROPERTIES LABELS reference TIMEOUT 300)
# Negative control: a 1% different learning rate on tessera's side must make the check fail.
add_test(NAME reference.negative_control
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --steps 5 --tessera-extra lr=0.00303 --expect-mismatch)
set_tests_properties(reference.negative_control PROPERTIES LABELS reference TIMEOUT 300)
set_tests_properties(reference.fp32_gqa_accumulate_llmc reference.fp32_tied_bf16_checkpoint
  reference.fp32_checkpointing reference.sgd reference.sharded_save_pretrained reference.adamw_fused PROPERTIES LABELS reference TIMEOUT 300)
