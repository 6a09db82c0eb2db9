# Cross-checks against the libraries tessera's users would otherwise run, in the Python environment LibTorch comes
# from (TESSERA_TORCH_PYTHON: the project's .venv with torch 2.11 and transformers 5.17). check_against_transformers.py:
# Hugging Face LlamaForCausalLM under torch.optim on a directory written by save_pretrained; per-step losses and
# the final weights (tessera's save_dir read by from_pretrained) within 1e-4 relative. The LoRA checks still use
# the independent PyTorch code of tests/reference/llama_reference.py.
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()
set(TESSERA_PYTHON "${TESSERA_TORCH_PYTHON}")
if(TESSERA_PYTHON)
  execute_process(COMMAND ${TESSERA_PYTHON} -c "import torch" RESULT_VARIABLE _no_torch OUTPUT_QUIET ERROR_QUIET)
endif()
if(NOT TESSERA_PYTHON OR _no_torch)
  message(STATUS "tessera: no TESSERA_TORCH_PYTHON with torch; reference cross-checks are not registered")
  return()
endif()

set(_check ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_against_transformers.py")
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
# torch's fused AdamW orders its arithmetic differently from the for-loop one that tessera's update follows: losses
# still agree within 1e-7, and the weights after 20 steps within 1e-3 (Adam's sign-like update of near-zero
# gradients amplifies the last bit; the for-loop AdamW above agrees within 1e-4).
add_test(NAME reference.adamw_fused
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --optimizer adamw-fused --accumulate 2 --steps 20
          --weight-tol 1e-3)
add_test(NAME reference.sharded_save_pretrained
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --shard-size 200KB --steps 5)
# Negative control: a 1% different learning rate on tessera's side must make the check fail.
add_test(NAME reference.negative_control
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --steps 5 --tessera-extra lr=0.00303 --expect-mismatch)
set_tests_properties(reference.negative_control PROPERTIES LABELS reference TIMEOUT 300)
set_tests_properties(reference.fp32_gqa_accumulate_llmc reference.fp32_tied_bf16_checkpoint
  reference.fp32_checkpointing reference.sgd reference.sharded_save_pretrained reference.adamw_fused PROPERTIES LABELS reference TIMEOUT 300)

# LoRA from a PEFT adapter dir (check_lora_against_reference.py): the same random adapter_config.json +
# adapter_model.safetensors (lora_B non-zero) trained by llama-lora-fp32 and by the reference's LoraLlama with
# dropout 0; per-step losses, the saved PEFT dir (config keys, tensor names, shapes, values) or, with --merge,
# the merged Hugging Face dir, within 1e-4 relative.
set(_check_lora ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_lora_against_reference.py")
set(_all_linears q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj)
add_test(NAME reference.lora_from_peft_dir
  COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_gqa} --r 8 --alpha 16 --targets q_proj,v_proj
          --steps 10)
add_test(NAME reference.lora_all_linears
  COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_gqa} --r 4 --alpha 6 --targets ${_all_linears}
          --accumulate 2 --steps 10)
add_test(NAME reference.lora_rslora_tied_bf16
  COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_tied} --dtype BF16 --rslora --r 16 --alpha 8
          --targets q_proj,k_proj,v_proj,o_proj --steps 10)
add_test(NAME reference.lora_merge
  COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_gqa} --merge --r 8 --alpha 16
          --targets ${_all_linears} --steps 10)
# Negative control: a 1% different learning rate on tessera's side must make the comparison fail. The script's
# --expect-mismatch exits 0 only when tessera ran and the comparison failed (a tessera that rejects the arguments
# or crashes fails this test), so no WILL_FAIL here.
add_test(NAME reference.lora_negative_control
  COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_gqa} --steps 5 --tessera-extra lr=0.00303
          --expect-mismatch)
set_tests_properties(reference.lora_from_peft_dir reference.lora_all_linears reference.lora_rslora_tied_bf16
  reference.lora_merge reference.lora_negative_control PROPERTIES LABELS reference TIMEOUT 300)
