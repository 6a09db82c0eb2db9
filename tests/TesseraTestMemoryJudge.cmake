# The memory judge's counter (bench/memory_vs_hf.py: LiveBytes, the live-storage TorchDispatchMode that counts the
# Hugging Face stack's peak on the meta device) against hand counts and torch's own MemTracker
# (tests/reference/check_memory_judge.py): on tiny Llama, OPT and ViT configs, two optimizer steps of two
# micro-batches, the parameters, gradients and the state of AdamW (foreach and fused), SGD and 8-bit Adam equal
# formulas from the config to the byte, with the optimizer step's temporaries; the same steps on real CPU tensors
# give the counter and torch.distributed._tools.mem_tracker.MemTracker the same peak, and the meta run the CPU run's
# peak and phases, to the byte. No tessera binary is involved. The negative control keys the counter by tensor
# instead of storage and must see a mismatch (it stops after the first section that sees one). On a 2-core AMD
# EPYC (Zen 3): 36 s and 8 s.
execute_process(COMMAND ${TESSERA_PYTHON} -c "import transformers" RESULT_VARIABLE _no_transformers_judge
                OUTPUT_QUIET ERROR_QUIET)
if(_no_transformers_judge)
  message(STATUS "tessera: ${TESSERA_PYTHON} cannot import transformers; the memory judge's check is not registered")
  return()
endif()

set(_check_memory_judge ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_memory_judge.py")
tessera_reference_case(reference.memory_judge TIMEOUT 120 COMMAND ${_check_memory_judge})
tessera_reference_case(reference.memory_judge_negative_control TIMEOUT 120 COMMAND ${_check_memory_judge} --perturb --expect-mismatch)
