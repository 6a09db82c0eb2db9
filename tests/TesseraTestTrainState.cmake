# Training-state checkpoints, preemption, the collective watchdog and a full disk (engine/train_state.hpp,
# dist/watchdog.hpp): real runs of the example binaries checked by tests/engine/check_resume.py and check_stop.py.
set(_state_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MPIEXEC=${MPIEXEC_EXECUTABLE})
set(_state_py ${CMAKE_CURRENT_SOURCE_DIR}/engine)

# 6 steps equal 3 steps plus 3 resumed, bit for bit: losses, save_dir and the final checkpoint.
function(tessera_resume_test name binary ranks)
  if(ranks GREATER 1 AND NOT TESSERA_WITH_MPI)
    return()
  endif()
  add_test(NAME train_state.resume_${name}
    COMMAND python3 ${_state_py}/check_resume.py equal ${PROJECT_BINARY_DIR}/examples/${binary} ${ranks} ${ARGN})
  set_tests_properties(train_state.resume_${name} PROPERTIES LABELS train_state TIMEOUT 300 ENVIRONMENT "${_state_env}")
endfunction()
tessera_resume_test(single_accumulate llama-fp32 1 accumulate_grad_batches=2)
tessera_resume_test(fp16_loss_scaling llama-fp16mixed 1 lr=0.1)  # skips steps: the scaler state matters
tessera_resume_test(adam8bit llama-adam8bit-bf16true 1)
tessera_resume_test(offload_optimizer llama-offload-bf16true 1)
tessera_resume_test(lora llama-lora-fp32 1)
tessera_resume_test(qlora llama-qlora-bf16mixed 1)
tessera_resume_test(ddp_np2 llama-ddp-fp32 2)
tessera_resume_test(zero1_np2 llama-zero1-fp32 2)
tessera_resume_test(zero2_np2_accumulate llama-zero2-fp32 2 accumulate_grad_batches=2)
tessera_resume_test(fsdp_np1 llama-fsdp-fp32 1)
tessera_resume_test(fsdp_np2 llama-fsdp-fp32 2)
tessera_resume_test(fsdp_np4 llama-fsdp-fp32 4)
tessera_resume_test(ddp_np4 llama-ddp-fp32 4)
tessera_resume_test(zero1_np4_accumulate llama-zero1-fp32 4 accumulate_grad_batches=2)
tessera_resume_test(zero2_np4 llama-zero2-fp32 4)
tessera_resume_test(hsdp_np4 llama-hsdp-fp32 4 shard_group_size=2)
tessera_resume_test(fsdp_offload_np2 llama-fsdp-offload-bf16true 2)
tessera_resume_test(fsdp_offload_params_np2 llama-fsdp-offload-params-bf16true 2)
tessera_resume_test(zero2_offload_np2 llama-zero2-offload-bf16true 2)

if(TESSERA_WITH_MPI)
  # Another number of ranks: every tensor resharded bit for bit, then training goes on.
  foreach(pair "4;2" "2;4")
    list(GET pair 0 from)
    list(GET pair 1 to)
    add_test(NAME train_state.reshard_fsdp_${from}_to_${to}
      COMMAND python3 ${_state_py}/check_resume.py reshard ${PROJECT_BINARY_DIR}/examples/llama-fsdp-fp32 ${from} ${to})
    set_tests_properties(train_state.reshard_fsdp_${from}_to_${to} PROPERTIES LABELS train_state TIMEOUT 300
                         ENVIRONMENT "${_state_env}")
  endforeach()
  add_test(NAME train_state.reshard_zero2_2_to_4
    COMMAND python3 ${_state_py}/check_resume.py reshard ${PROJECT_BINARY_DIR}/examples/llama-zero2-fp32 2 4)
  set_tests_properties(train_state.reshard_zero2_2_to_4 PROPERTIES LABELS train_state TIMEOUT 300 ENVIRONMENT "${_state_env}")

  # Preemption on one rank, a dead rank, a stuck rank.
  add_test(NAME train_state.preempt_sigusr1_np2
    COMMAND python3 ${_state_py}/check_stop.py preempt ${PROJECT_BINARY_DIR}/examples/llama-fsdp-fp32 2 USR1)
  add_test(NAME train_state.watchdog_dead_rank_np4
    COMMAND python3 ${_state_py}/check_stop.py dead ${PROJECT_BINARY_DIR}/examples/llama-fsdp-fp32 4)
  add_test(NAME train_state.watchdog_stuck_rank_np4
    COMMAND python3 ${_state_py}/check_stop.py stuck ${PROJECT_BINARY_DIR}/examples/llama-fsdp-fp32 4)
  set_tests_properties(train_state.preempt_sigusr1_np2 train_state.watchdog_dead_rank_np4
                       train_state.watchdog_stuck_rank_np4 PROPERTIES LABELS train_state TIMEOUT 300
                       ENVIRONMENT "${_state_env}")
endif()
add_test(NAME train_state.preempt_sigterm
  COMMAND python3 ${_state_py}/check_stop.py preempt ${PROJECT_BINARY_DIR}/examples/llama-fp32 1 TERM)
add_test(NAME train_state.full_disk COMMAND python3 ${_state_py}/check_stop.py disk ${PROJECT_BINARY_DIR}/examples/llama-fp32)
set_tests_properties(train_state.preempt_sigterm train_state.full_disk PROPERTIES LABELS train_state TIMEOUT 300
                     ENVIRONMENT "${_state_env}")

# Refusals: exit code, the message naming the value and the fix, and no checkpoint or partial dir left.
function(tessera_resume_refused name binary expected setup)
  string(REPLACE ";" " " args "${ARGN}")
  set(run "${PROJECT_BINARY_DIR}/examples/llama-fp32 model=tiny seq_len=32 batch_size=2 predict=false")
  add_test(NAME train_state.refuses_${name} COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
     ${run} max_steps=2 checkpoint_dir=a > /dev/null 2>&1 || exit 1; ${setup}
     ${PROJECT_BINARY_DIR}/examples/${binary} model=tiny batch_size=2 predict=false ${args} > out.txt 2>&1;
     rc=$?; cat out.txt; [ $rc -ne 0 ] && grep -q -F -- '${expected}' out.txt && [ ! -e b ]")
  set_tests_properties(train_state.refuses_${name} PROPERTIES LABELS train_state TIMEOUT 120)
endfunction()
tessera_resume_refused(other_precision llama-bf16mixed "precision: the checkpoint has \"32-true\", this run has \"bf16-mixed\"" ""
  seq_len=32 max_steps=4 resume=a/step-00000002 checkpoint_dir=b)
tessera_resume_refused(other_sharding llama-ddp-fp32 "sharding: the checkpoint has \"none\", this run has \"ddp\"" ""
  seq_len=32 max_steps=4 resume=a/step-00000002 checkpoint_dir=b)
tessera_resume_refused(other_seq_len llama-fp32 "seq_len: the checkpoint has 32, this run has 64" ""
  seq_len=64 max_steps=4 resume=a/step-00000002 checkpoint_dir=b)
tessera_resume_refused(past_max_steps llama-fp32 "the checkpoint is at step 2, past this run" ""
  seq_len=32 max_steps=1 resume=a/step-00000002 checkpoint_dir=b)
tessera_resume_refused(no_manifest llama-fp32 "resume=a/step-00000002: has no manifest.json" "rm a/step-00000002/manifest.json;"
  seq_len=32 max_steps=4 resume=a/step-00000002 checkpoint_dir=b)
tessera_resume_refused(truncated llama-fp32 "rank-00000.safetensors: holds 1000 bytes and the manifest says"
  "truncate -s 1000 a/step-00000002/rank-00000.safetensors;" seq_len=32 max_steps=4 resume=a/step-00000002 checkpoint_dir=b)
tessera_resume_refused(corrupt_manifest llama-fp32 "manifest.json" "printf '{\"format\": 1' > a/step-00000002/manifest.json;"
  seq_len=32 max_steps=4 resume=a/step-00000002 checkpoint_dir=b)
tessera_resume_refused(auto_without_dir llama-fp32 "and needs checkpoint_dir; e.g. checkpoint_dir=ckpt resume=auto"
  "" seq_len=32 max_steps=4 resume=auto)
tessera_resume_refused(every_without_dir llama-fp32 "checkpoint_every=2: needs checkpoint_dir" "" seq_len=32 checkpoint_every=2)
if(TESSERA_WITH_MPI)
  # One rank's file damaged: every rank stops with the reason, none hangs.
  add_test(NAME train_state.refuses_damaged_rank_file_np2 COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; run='${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe ${PROJECT_BINARY_DIR}/examples/llama-fsdp-fp32 model=tiny seq_len=32 batch_size=2 predict=false';
     $run max_steps=2 checkpoint_dir=a > /dev/null 2>&1 || exit 1; truncate -s 5000 a/step-00000002/rank-00001.safetensors;
     timeout 120 $run max_steps=4 resume=a/step-00000002 > out.txt 2>&1; rc=$?; cat out.txt;
     [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q -F 'rank-00001.safetensors: holds 5000 bytes and the manifest says' out.txt")
  set_tests_properties(train_state.refuses_damaged_rank_file_np2 PROPERTIES LABELS train_state TIMEOUT 180 ENVIRONMENT "${_state_env}")
endif()
