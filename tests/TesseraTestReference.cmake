# Cross-checks against the libraries tessera's users would otherwise run, in the Python environment LibTorch comes
# from (TESSERA_TORCH_PYTHON: the project's .venv with torch 2.11 and transformers 5.17). check_against_transformers.py:
# Hugging Face LlamaForCausalLM or OPTForCausalLM (the config's model_type) under torch.optim on a directory written
# by save_pretrained; per-step losses and the final weights (tessera's save_dir read by from_pretrained) within 1e-4
# relative, and one step's gradients. PEFT's checks are in TesseraTestReferencePeft.cmake, torch DDP/FSDP2's in
# TesseraTestReferenceSharding.cmake.
#
# The small OPT configs the OPT checks here and in TesseraTestReferencePeft.cmake share: pre-LN with lm_head tied to
# embed_tokens (opt-125m's layout), and post-LN with project_in/project_out around a narrower embedding and no final
# layer norm (opt-350m's layout).
set(_opt_fields "\"model_type\":\"opt\",\"vocab_size\":512,\"hidden_size\":64,\"ffn_dim\":128,\"num_hidden_layers\":3,\"num_attention_heads\":4,\"max_position_embeddings\":128")
set(_opt_train "{${_opt_fields}}")
set(_opt_train_postln_proj "{${_opt_fields},\"word_embed_proj_dim\":32,\"do_layer_norm_before\":false}")
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()

set(_check ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_against_transformers.py")

# The final weights are compared in norm (check_against_transformers.py): tessera's CPU AdamW is one fused pass
# (optim/cpu_adamw.hpp) and torch's for-loop AdamW (lerp for the first moment, and on AVX-512 a square root that is
# not IEEE's) rounds some elements differently in the last bit, which Adam's sign-like update of rounding-level
# gradients (rare token rows of embed_tokens) turns into element-wise differences of up to 5.4e-4 over 20 steps (an
# AVX-512-BF16 EPYC; 2.1e-4 on an AVX-512 Xeon) while the norms differ by 1.2e-5 and the losses by 8e-8.
tessera_reference_case(reference.fp32_gqa_accumulate_llmc
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --accumulate 2 --llmc --steps 20)
tessera_reference_case(reference.fp32_tied_bf16_checkpoint
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_tied} --dtype BF16 --steps 20)
tessera_reference_case(reference.fp32_checkpointing
  COMMAND ${_check} $<TARGET_FILE:llama-fp32-ckpt> --config ${_gqa} --steps 10)
tessera_reference_case(reference.sgd
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_gqa} --optimizer sgd --lr 0.05 --steps 10)
# torch's fused AdamW orders its arithmetic differently from the for-loop one that tessera's update follows: losses
# still agree within 1e-7, and the weights after 20 steps within 1e-6 in norm (2.4e-5 element-wise).
tessera_reference_case(reference.adamw_fused
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --optimizer adamw-fused --accumulate 2 --steps 20)
tessera_reference_case(reference.sharded_save_pretrained
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --shard-size 200KB --steps 5)
# One step's loss and gradients (--gradients: tessera's gradient is W0 - W1 of one SGD step at lr 1), from the
# save_pretrained dir and then from the dir tessera saved, within 1e-5.
tessera_reference_case(reference.gradients_gqa_accumulate
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_gqa} --gradients --accumulate 2 --tol 1e-5)
tessera_reference_case(reference.gradients_tied_bf16
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_tied} --dtype BF16 --gradients --tol 1e-5)
# Its negative control: gradients 0.1% too large (lr 1.001) must be seen.
tessera_reference_case(reference.gradients_negative_control
  COMMAND ${_check} $<TARGET_FILE:llama-sgd-fp32> --config ${_gqa} --gradients --tol 1e-5
          --tessera-extra lr=1.001 --expect-mismatch)
# Negative control: a 1% different learning rate on tessera's side must make the check fail.
tessera_reference_case(reference.negative_control
  COMMAND ${_check} $<TARGET_FILE:llama-fp32> --config ${_gqa} --steps 5 --tessera-extra lr=0.00303 --expect-mismatch)

# OPT (opt-* binaries, models/opt.hpp) through the same checks. The token stream holds OPT's padding_idx (token 1)
# every 50 tokens, so the embedding row that gets no gradient from the lookup is exercised (a tessera that gave it
# one fails the gradient check by 7e-2). The training runs use lr 1e-3, not Llama's 3e-3: OPT's k_proj.bias has a
# gradient that is zero in exact arithmetic (softmax ignores one shift of every key), so AdamW steps it on rounding
# noise on both sides, and a ReLU unit whose pre-activation lies within rounding of zero for one token switches on
# one side only. At 3e-3 the final weights after 20 steps then differ by 3e-5..3e-4 over six token streams (1.4e-2
# in one post-LN run, after a switch at step 12) while the losses still agree within 2e-6; at 1e-3 by <= 4e-5 on an
# AVX-512 Xeon. On an AVX-512-BF16 EPYC (Zen 5) one fc1 unit per layer of the post-LN run switches all the same:
# its row moves by a learning-rate step on one side only, 1.2e-3 of the tensor's norm (6.4e-3 element-wise), with
# the losses within 1.6e-7; its weights are held to 2e-3 in norm (the negative control differs by 8.7e-3).
tessera_reference_case(reference.opt_fp32
  COMMAND ${_check} $<TARGET_FILE:opt-fp32> --config ${_opt_train} --accumulate 2 --lr 1e-3 --steps 20)
tessera_reference_case(reference.opt_postln_proj
  COMMAND ${_check} $<TARGET_FILE:opt-fp32> --config ${_opt_train_postln_proj} --lr 1e-3 --steps 20 --weight-tol 2e-3)
tessera_reference_case(reference.opt_gradients
  COMMAND ${_check} $<TARGET_FILE:opt-sgd-fp32> --config ${_opt_train} --gradients --accumulate 2 --tol 1e-5)
# The post-LN layout's gradients from a bf16 directory (upcast to fp32 on both sides).
tessera_reference_case(reference.opt_gradients_postln_proj_bf16
  COMMAND ${_check} $<TARGET_FILE:opt-sgd-fp32> --config ${_opt_train_postln_proj} --dtype BF16 --gradients
          --tol 1e-5)
# Negative controls as Llama's: a 1% larger learning rate; gradients 0.1% too large.
tessera_reference_case(reference.opt_negative_control
  COMMAND ${_check} $<TARGET_FILE:opt-fp32> --config ${_opt_train} --lr 1e-3 --steps 5 --tessera-extra lr=0.00101
          --expect-mismatch)
tessera_reference_case(reference.opt_gradients_negative_control
  COMMAND ${_check} $<TARGET_FILE:opt-sgd-fp32> --config ${_opt_train} --gradients --tol 1e-5
          --tessera-extra lr=1.001 --expect-mismatch)

# MFU's FLOPs (report/mfu.hpp: LlamaConfig / OptConfig::training_flops_per_token, in the done record) against
# torch.utils.flop_counter.FlopCounterMode on transformers' models, forward and backward (tests/reference/check_flops.py).
set(_check_flops ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_flops.py"
    $<TARGET_FILE:llama-fp32> $<TARGET_FILE:opt-fp32>)
tessera_reference_case(reference.flops TIMEOUT 600 COMMAND ${_check_flops})
tessera_reference_case(reference.flops_negative_control TIMEOUT 600 COMMAND ${_check_flops} --perturb --expect-mismatch)
