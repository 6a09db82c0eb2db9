# The sharding policies against the single-process reference (tests/sharding/, ctest label `sharding`).
# With MPI: tessera_sharding_tests (Catch2, with tests/dist/main.cpp's World) as jobs of 1, 2 and 4 ranks
# under mpiexec (sharding.np1/np2/np4, each in two halves); every rank compares its run with a NoShard run on world_size x the
# rows that rank 0 computes alone and broadcasts (tests/sharding/parity.hpp). Without MPI: the same tests as one plain process (a job of one).
# The offload policies' parity tests (tests/offload/) run in the same jobs: they compare against the same
# experiment without offload on 1, 2 and 4 ranks.
file(GLOB _sharding_test_sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/sharding/test_*.cpp"
                                                   "${CMAKE_CURRENT_SOURCE_DIR}/offload/test_*.cpp")
if(TESSERA_WITH_MPI)
  add_executable(tessera_sharding_tests dist/main.cpp ${_sharding_test_sources})
else()
  add_executable(tessera_sharding_tests main.cpp ${_sharding_test_sources})
endif()
target_link_libraries(tessera_sharding_tests PRIVATE tessera::tessera tessera_catch_session)
target_include_directories(tessera_sharding_tests PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
tessera_use_pch(tessera_sharding_tests)

if(NOT TESSERA_WITH_MPI)
  add_test(NAME sharding.np1 COMMAND tessera_sharding_tests)
  set_tests_properties(sharding.np1 PROPERTIES LABELS sharding TIMEOUT 600)
  return()
endif()
set(_sharding_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
# Each job size in two halves by test file (Catch2's -# file tags), so that no job takes minutes on a 2-core machine
# (the whole suite at 4 ranks took ~160-180 s there): sharding.np<n>.policies runs the Llama parity tests of every
# policy, sharding.np<n>.families those of the other families and of the offload policies. Together they run every
# case of tessera_sharding_tests; a test file in neither list fails the configuration.
set(_sharding_half_policies test_ddp test_zero1 test_shard_grad_op test_full_shard test_hybrid_shard test_opt)
set(_sharding_half_families test_blip2 test_t5 test_vit test_offload)
foreach(source ${_sharding_test_sources})
  get_filename_component(stem "${source}" NAME_WE)
  if(NOT stem IN_LIST _sharding_half_policies AND NOT stem IN_LIST _sharding_half_families)
    message(FATAL_ERROR "${source}: add ${stem} to _sharding_half_policies or _sharding_half_families "
                        "(tests/TesseraTestSharding.cmake)")
  endif()
endforeach()
foreach(n 1 2 4)
  foreach(half policies families)
    string(REGEX REPLACE "([^;]+)" "[#\\1]" filter "${_sharding_half_${half}}")  # Catch2: [#test_ddp],[#test_zero1],...
    string(REPLACE ";" "," filter "${filter}")
    add_test(NAME sharding.np${n}.${half}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${n} --oversubscribe ${MPIEXEC_PREFLAGS}
              $<TARGET_FILE:tessera_sharding_tests> ${MPIEXEC_POSTFLAGS} "-#" "${filter}" --warn NoTests)
    set_tests_properties(sharding.np${n}.${half} PROPERTIES ENVIRONMENT "${_sharding_env}" LABELS sharding TIMEOUT 900)
  endforeach()
endforeach()

# The issue's acceptance run, with the example binaries: 4 ranks of FullShard (and of the other policies) with
# batch_size 2 against one rank of NoShard with batch_size 8, same model dir and token file; losses from the
# metrics files and the saved weights compared by tests/sharding/compare_runs.py (1e-5 relative, lr 1e-4 as in
# parity.hpp). The 4-rank metrics file must hold memory records of all 4 ranks.
if(TESSERA_BUILD_EXAMPLES AND TESSERA_PYTHON)
  set(_compare "${CMAKE_CURRENT_SOURCE_DIR}/sharding/compare_runs.py")
  set(_run_args "data=t.bin seq_len=16 max_steps=3 lr=1e-4 threads=1")
  foreach(example llama-fsdp-fp32 llama-ddp-fp32 llama-zero1-fp32 llama-zero2-fp32 llama-hsdp-fp32)
    add_test(NAME sharding.cli.${example}.np4_vs_np1
      COMMAND bash -c
      "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d
       $<TARGET_FILE:tessera_make_fixture> model m; $<TARGET_FILE:tessera_make_fixture> tokens t.bin 20000
       ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 4 --oversubscribe $<TARGET_FILE:${example}> model_dir=m ${_run_args} batch_size=2 shard_group_size=2 metrics=a.jsonl save_dir=a >/dev/null
       $<TARGET_FILE:llama-fp32> model_dir=m ${_run_args} batch_size=8 metrics=b.jsonl save_dir=b >/dev/null
       ${TESSERA_PYTHON} ${_compare} a.jsonl a b.jsonl b 1e-5 --ranks 4")
    set_tests_properties(sharding.cli.${example}.np4_vs_np1 PROPERTIES
      ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" LABELS "sharding;cli" TIMEOUT 300)
  endforeach()
endif()

# The memory lines a lab prints, when asked: every rank's line (memory_ranks=all, seed 001) and every micro-step's
# phases (memory_micro=all, seed 002); by default neither (one line of maxima, micro-step 0 only).
if(TESSERA_BUILD_EXAMPLES)
  add_test(NAME sharding.cli.memory_lines
    COMMAND bash -c
    "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d
     run() { ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:llama-ddp-fp32> model=tiny seq_len=16 batch_size=1 accumulate_grad_batches=2 max_steps=1 threads=1 \"$@\"; }
     run > plain.txt; run memory_ranks=all memory_micro=all > all.txt
     grep -q 'step 0 micro 1 \\[before_fwd\\]' all.txt; grep -q 'step 0 micro 0 rank 1 \\[after_bwd\\]' all.txt
     grep -q 'step 0 micro 1 rank 0 \\[after_fwd\\]' all.txt
     ! grep -q 'micro 1 \\[before_fwd\\]' plain.txt || exit 1; ! grep -q ' rank 1 \\[' plain.txt || exit 1
     grep -q 'step 0 micro 0 \\[after_bwd\\]' plain.txt")
  set_tests_properties(sharding.cli.memory_lines PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" LABELS "sharding;cli" TIMEOUT 120)
endif()

# DDP holds what one rank holds: gradients are views of the buckets, reduced in their own dtype (reduce_dtype=param,
# as torch DDP), so seed 001's 7B DDP step predicts the one-GPU step's peak (at most one 25 MiB bucket more), where
# reduce_dtype=fp32 under bf16-true costs a copy of at most two buckets (more than one bucket, less than 2 GiB).
if(TARGET seed001-llama7b-ddp AND TARGET seed001-llama7b-1gpu)
  add_test(NAME sharding.ddp_memory_is_one_rank
    COMMAND bash -c
    "set -e; peak() { \"$@\" --dry-run device=cuda device_memory=80GiB 2>&1 | sed -n 's/^  peak \\([0-9.]*\\) GiB.*/\\1/p' | head -1; }
     one=$(peak $<TARGET_FILE:seed001-llama7b-1gpu>); ddp=$(peak $<TARGET_FILE:seed001-llama7b-ddp> devices=4)
     fp32=$(peak $<TARGET_FILE:seed001-llama7b-ddp> devices=4 reduce_dtype=fp32)
     echo \"one rank $one GiB, DDP of 4 $ddp GiB, DDP reduce_dtype=fp32 $fp32 GiB\"
     awk -v a=$one -v b=$ddp -v c=$fp32 'BEGIN { exit !(a > 0 && b <= a + 25/1024 && c > a + 25/1024 && c < a + 2) }'")
  set_tests_properties(sharding.ddp_memory_is_one_rank PROPERTIES LABELS "sharding;predict" TIMEOUT 60)
endif()

# FSDP under mixed precision reduces each unit's full gradients in the compute dtype (reduce_dtype=auto, as FSDP's
# MixedPrecision in Lightning and FSDP2): seed 003's CodeLlama FSDP step predicts the peak of reduce_dtype=bf16, below
# that of reduce_dtype=fp32 (the fp32 gradients' own dtype). ZeRO-2 with the optimizer in host memory streams each
# micro-step's gradients to the host: seed 002's offload step keeps no gradients on the device in any phase.
if(TARGET seed003-codellama7b-fsdp AND TARGET seed002-cpu-offload)
  add_test(NAME sharding.fsdp_and_offload_memory
    COMMAND bash -c
    "set -e; peak() { \"$@\" --dry-run device=cuda device_memory=80GiB 2>&1 | sed -n 's/^  peak \\([0-9.]*\\) GiB.*/\\1/p' | head -1; }
     f=$<TARGET_FILE:seed003-codellama7b-fsdp>
     auto=$(peak $f devices=4); bf16=$(peak $f devices=4 reduce_dtype=bf16); fp32=$(peak $f devices=4 reduce_dtype=fp32)
     echo \"FSDP bf16-mixed: auto $auto GiB, bf16 $bf16 GiB, fp32 $fp32 GiB\"
     awk -v a=$auto -v b=$bf16 -v c=$fp32 'BEGIN { exit !(a > 0 && a == b && c > a + 0.5) }'
     o=$($<TARGET_FILE:seed002-cpu-offload> --dry-run device=cuda device_memory=80GiB 2>&1); echo \"$o\"
     rows=$(echo \"$o\" | grep -E '^  (before forward|after forward|after backward) ')
     test $(echo \"$rows\" | wc -l) = 3
     test -z \"$(echo \"$rows\" | awk '$(NF-4) != \"0.00\"')\"")
  set_tests_properties(sharding.fsdp_and_offload_memory PROPERTIES LABELS "sharding;predict" TIMEOUT 60)
endif()

# optimizer_in_backward=true updates each unit during backward and frees its gradient: the same numbers as the
# update after backward (losses and saved weights bit for bit), under one rank and under each sharding policy at 2
# ranks (where the gradient becomes final at another place: at once, after the bucket all-reduce, after the
# reduce-scatter, after the replica all-reduce); fp16 loss scaling refuses it.
if(TESSERA_BUILD_EXAMPLES AND TESSERA_PYTHON)
  set(_in_backward_runs "")
  foreach(example llama-fp32 llama-bf16true)
    string(APPEND _in_backward_runs
      "$<TARGET_FILE:${example}> model_dir=m ${_run_args} batch_size=4 metrics=a.jsonl save_dir=a >/dev/null
       $<TARGET_FILE:${example}> model_dir=m ${_run_args} batch_size=4 optimizer_in_backward=true metrics=b.jsonl save_dir=b >/dev/null
       ${TESSERA_PYTHON} ${_compare} a.jsonl a b.jsonl b 0; rm -rf a b a.jsonl b.jsonl\n")
  endforeach()
  foreach(example llama-ddp-fp32 llama-zero1-fp32 llama-zero2-fp32 llama-fsdp-fp32 llama-hsdp-fp32)
    set(_np2 "${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 2 --oversubscribe $<TARGET_FILE:${example}> model_dir=m ${_run_args} batch_size=2 shard_group_size=1")
    string(APPEND _in_backward_runs
      "${_np2} metrics=a.jsonl save_dir=a >/dev/null; ${_np2} optimizer_in_backward=true metrics=b.jsonl save_dir=b >/dev/null
       ${TESSERA_PYTHON} ${_compare} a.jsonl a b.jsonl b 0; rm -rf a b a.jsonl b.jsonl\n")
  endforeach()
  add_test(NAME sharding.cli.optimizer_in_backward
    COMMAND bash -c
    "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d
     $<TARGET_FILE:tessera_make_fixture> model m; $<TARGET_FILE:tessera_make_fixture> tokens t.bin 20000
     ${_in_backward_runs}")
  set_tests_properties(sharding.cli.optimizer_in_backward PROPERTIES
    ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1" LABELS "sharding;cli" TIMEOUT 300)
  add_test(NAME cli.optimizer_in_backward_loss_scaling
    COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh" 2
            "optimizer_in_backward=true: this experiment's precision \\(16-mixed\\) scales the loss" ""
            -- $<TARGET_FILE:llama-fp16mixed> max_steps=1 batch_size=2 seq_len=16 threads=1 optimizer_in_backward=true)
  set_tests_properties(cli.optimizer_in_backward_loss_scaling PROPERTIES LABELS cli TIMEOUT 60)
endif()

# What it saves at full size: seed 001's one-GPU 7B step no longer peaks with every gradient alive (12.55 GiB) beside
# the weights and AdamW's state, but at the end of forward: predicted at least 4 GiB under (50.96 -> 46.62 GiB).
if(TARGET seed001-llama7b-1gpu)
  add_test(NAME predict.optimizer_in_backward_memory
    COMMAND bash -c
    "set -e; peak() { \"$@\" --dry-run device=cuda device_memory=80GiB 2>&1 | sed -n 's/^  peak \\([0-9.]*\\) GiB.*/\\1/p' | head -1; }
     after=$(peak $<TARGET_FILE:seed001-llama7b-1gpu>); during=$(peak $<TARGET_FILE:seed001-llama7b-1gpu> optimizer_in_backward=true)
     echo \"update after backward $after GiB, during backward $during GiB\"
     awk -v a=$after -v b=$during 'BEGIN { exit !(b > 0 && b < a - 4) }'")
  set_tests_properties(predict.optimizer_in_backward_memory PROPERTIES LABELS predict TIMEOUT 60)
endif()
