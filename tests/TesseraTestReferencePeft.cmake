# Cross-checks of the adapter and 8-bit/4-bit pieces against the libraries users would otherwise run, in the Python
# environment LibTorch comes from (TESSERA_TORCH_PYTHON, the project's .venv): PEFT on transformers'
# LlamaForCausalLM and OPTForCausalLM for Lora, bitsandbytes for the NF4 of QLora and for Adam8bit. Label reference.
# tests/CMakeLists.txt includes it only when that Python imports torch, and sets the model configs _gqa and _tied;
# TesseraTestReference.cmake, included before, sets the OPT config _opt_train.
execute_process(COMMAND ${TESSERA_PYTHON} -c "import peft, transformers" RESULT_VARIABLE _no_peft
                OUTPUT_QUIET ERROR_QUIET)
execute_process(COMMAND ${TESSERA_PYTHON} -c "import bitsandbytes" RESULT_VARIABLE _no_bnb OUTPUT_QUIET ERROR_QUIET)

# LoRA from a PEFT adapter dir (check_lora_against_peft.py): get_peft_model + save_pretrained make the adapter
# (lora_B non-zero) on a base that transformers' save_pretrained wrote; llama-lora-fp32 and PEFT (torch.optim.AdamW,
# dropout 0) train it on the same batches. Per-step losses; tessera's saved PEFT dir read by PEFT (config, tensors
# equal to PEFT's trained ones, logits) or, with --merge, tessera's merged dir against merge_and_unload() (weights,
# merged-in delta, logits and loss through from_pretrained); all within 1e-4 relative.
if(TESSERA_BUILD_EXAMPLES AND NOT _no_peft)
  set(_check_lora ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_lora_against_peft.py")
  set(_all_linears q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj)
  tessera_reference_case(reference.lora_from_peft_dir
    COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_gqa} --r 8 --alpha 16 --targets q_proj,v_proj
            --steps 10)
  tessera_reference_case(reference.lora_all_linears
    COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_gqa} --r 4 --alpha 6 --targets ${_all_linears}
            --accumulate 2 --steps 10)
  tessera_reference_case(reference.lora_rslora_tied_bf16
    COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_tied} --dtype BF16 --rslora --r 16 --alpha 8
            --targets q_proj,k_proj,v_proj,o_proj --steps 10)
  # lr 1e-3, not the script's 3e-3: the merged-in delta of layer 0's k_proj (the last layer backward reaches; its
  # adapters' smallest gradients come within 10x of AdamW's eps, 1e-8, where lr * g / (|g| + eps) passes on their
  # rounding) differs from PEFT's in proportion to lr: 1.06e-4 of the delta at 3e-3 (after 1 step as after 10) and
  # 4.05e-5 at 1e-3 on a Zen 4 EPYC (AVX-512), under 1e-4 at 3e-3 on a Zen 3 (AVX2); lr 0 gives 4.7e-7 (the merge's
  # own rounding), and the losses are equal at every step.
  tessera_reference_case(reference.lora_merge
    COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_gqa} --merge --r 8 --alpha 16
            --targets ${_all_linears} --steps 10 --lr 1e-3)
  # Negative control: a 1% different learning rate on tessera's side must make the comparison fail. The script's
  # --expect-mismatch exits 0 only when tessera ran and the comparison failed (a tessera that rejects the arguments
  # or crashes fails this test), so no WILL_FAIL here.
  tessera_reference_case(reference.lora_negative_control
    COMMAND ${_check_lora} $<TARGET_FILE:llama-lora-fp32> --config ${_gqa} --steps 5 --tessera-extra lr=0.00303
            --expect-mismatch)
  # OPT (opt-lora-fp32; _opt_train from TesseraTestReference.cmake): PEFT's adapter on q_proj, v_proj; and every
  # linear of the blocks (OPT's names: out_proj, fc1, fc2) merged into a dir from_pretrained reads as OPTForCausalLM.
  tessera_reference_case(reference.lora_opt_from_peft_dir
    COMMAND ${_check_lora} $<TARGET_FILE:opt-lora-fp32> --config ${_opt_train} --r 8 --alpha 16
            --targets q_proj,v_proj --steps 10)
  tessera_reference_case(reference.lora_opt_merge_all_linears
    COMMAND ${_check_lora} $<TARGET_FILE:opt-lora-fp32> --config ${_opt_train} --merge --r 4 --alpha 8
            --targets q_proj,k_proj,v_proj,out_proj,fc1,fc2 --accumulate 2 --steps 10)
elseif(TESSERA_BUILD_EXAMPLES)
  message(STATUS "tessera: ${TESSERA_PYTHON} cannot import peft; the LoRA cross-checks are not registered")
endif()

if(_no_bnb)
  message(STATUS "tessera: ${TESSERA_PYTHON} cannot import bitsandbytes; the NF4 and Adam8bit cross-checks are not "
                 "registered")
  return()
endif()

# Small programs that write what tessera's NF4 and Adam8bit compute, for the bitsandbytes checks to read.
add_executable(tessera_nf4_dump quant/nf4_dump.cpp)
target_link_libraries(tessera_nf4_dump PRIVATE tessera::tessera)
target_include_directories(tessera_nf4_dump PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
tessera_use_pch(tessera_nf4_dump)
add_executable(tessera_adam8bit_dump optim/adam8bit_dump.cpp)
target_link_libraries(tessera_adam8bit_dump PRIVATE tessera::tessera)
target_include_directories(tessera_adam8bit_dump PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
tessera_use_pch(tessera_adam8bit_dump)

# NF4 (check_nf4_against_bnb.py): tessera's codes, absmax and dequantized values against
# bitsandbytes.functional.quantize_4bit / dequantize_4bit (quant_type nf4, blocksize 64), without and with double
# quantization of the absmax, on random tensors and edge cases; codes and absmax bit-exact. The negative control
# hands bitsandbytes the tensors with one value nudged across a code boundary: the codes must then differ.
set(_check_nf4 ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_nf4_against_bnb.py")
tessera_reference_case(reference.nf4_bnb COMMAND ${_check_nf4} $<TARGET_FILE:tessera_nf4_dump>)
tessera_reference_case(reference.nf4_bnb_negative_control
  COMMAND ${_check_nf4} $<TARGET_FILE:tessera_nf4_dump> --perturb --expect-mismatch)
# Adam8bit (check_adam8bit_against_bnb.py): tessera's Adam8bit against bitsandbytes.optim.Adam8bit on the CPU, the
# same gradients for several steps, 8-bit tensors (block-wise state) and one under min_8bit_size (fp32 state);
# parameters and state within the tolerances the script prints. Negative control: a 1% different learning rate.
set(_check_adam8bit ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_adam8bit_against_bnb.py")
tessera_reference_case(reference.adam8bit_bnb COMMAND ${_check_adam8bit} $<TARGET_FILE:tessera_adam8bit_dump>)
tessera_reference_case(reference.adam8bit_bnb_negative_control
  COMMAND ${_check_adam8bit} $<TARGET_FILE:tessera_adam8bit_dump> --tessera-lr-scale 1.01 --expect-mismatch)
