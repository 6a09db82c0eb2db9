# The seed catalogue (examples/catalogue/, cmake/TesseraCatalogue.cmake), ctest label `catalogue`:
#   catalogue.run.<binary>   every entry trains two steps of its tiny variant on the CPU (entries of several ranks
#                            as a job of 2 under mpiexec) and prints the seeds' printout (tests/cli/catalogue_run.sh)
#   catalogue.list, catalogue.help, catalogue.*   the table, an entry's help, and the seeds' keys on the command line
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()
get_property(_entries GLOBAL PROPERTY TESSERA_CATALOGUE_ENTRIES)
set(_run "${CMAKE_CURRENT_SOURCE_DIR}/cli/catalogue_run.sh")
foreach(entry ${_entries})
  get_property(_ranks GLOBAL PROPERTY TESSERA_CATALOGUE_RANKS_${entry})
  get_property(_tiny GLOBAL PROPERTY TESSERA_CATALOGUE_TINY_${entry})
  separate_arguments(_tiny UNIX_COMMAND "${_tiny}")
  set(_n 1)
  if(_ranks GREATER 1)
    set(_n 2)
  endif()
  add_test(NAME catalogue.run.${entry} COMMAND bash ${_run} ${_n} $<TARGET_FILE:${entry}> ${_tiny} max_steps=2)
  set_tests_properties(catalogue.run.${entry} PROPERTIES LABELS catalogue TIMEOUT 900)
endforeach()

# The table lists every entry, the same from tessera-catalogue and from an entry's --list.
list(LENGTH _entries _count)
string(JOIN " " _names ${_entries})
add_test(NAME catalogue.list COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; $<TARGET_FILE:tessera-catalogue> > a.txt; $<TARGET_FILE:seed002-baseline> --list > b.txt; cmp a.txt b.txt;
   for e in ${_names}; do grep -q \" | $e \" a.txt || { echo \"missing $e\"; exit 1; }; done;
   test $(grep -c ' | seed' a.txt) -eq ${_count};
   grep -q 'seed002-baseline .*batch_size=32' a.txt; grep -q 'Experiment<Blip2T5, ShardGradOp, Bf16True, OffloadOptimizer>' a.txt")
set_tests_properties(catalogue.list PROPERTIES LABELS catalogue)
tessera_cli_test(catalogue_unknown_binary 2 "'seed009-nothing' is not a catalogue binary" ""
  $<TARGET_FILE:tessera-catalogue> seed009-nothing)
# --help: the entry's banner and its defaults as the defaults of the keys.
add_test(NAME catalogue.help COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; $<TARGET_FILE:seed002-larger-model> --help > h.txt;
   grep -q '^\\[cfg\\] seed 002, step larger-model' h.txt; grep -q 'A100 variant: batch_size=16 accumulate_grad_batches=4' h.txt;
   grep -E -q '^  model +blip2-opt-6.7b ' h.txt; grep -E -q '^  batch_size +32 ' h.txt; grep -q '  precision=bf16-true' h.txt")
set_tests_properties(catalogue.help PROPERTIES LABELS catalogue)

# The seeds' keys: what a binary fixes must match (exit 2 naming the binary's value), batch_size_per_device is
# batch_size, and global_batch_size sets the accumulation or is refused when it does not divide.
set(_baseline $<TARGET_FILE:seed002-baseline>)
tessera_cli_test(seed_key_precision 2 "precision=bf16-true: this binary is precision=32-true" ""
  ${_baseline} precision=bf16-true)
tessera_cli_test(seed_key_two 2 "strategy=ddp: this binary is strategy=auto, fixed when it was compiled" ""
  ${_baseline} act_ckpt=True strategy=ddp)
tessera_cli_test(seed_key_devices 2 "devices=4: this binary is devices=1 .*mpirun -np 4" "" ${_baseline} devices=4)
tessera_cli_test(seed_key_twice 2 "key 'batch_size' was already given" "" ${_baseline} batch_size=2 batch_size_per_device=4)
tessera_cli_test(global_batch_not_dividing 2
  "global_batch_size=6: not a multiple of batch_size \\(4\\) x ranks \\(1\\) = 4 rows per micro-step" ""
  $<TARGET_FILE:seed003-codellama7b-no-fsdp> model=tiny batch_size=4 global_batch_size=6)
tessera_cli_test(global_batch_and_accumulate 2 "accumulate_grad_batches=2: is set by global_batch_size=64" ""
  $<TARGET_FILE:seed003-codellama7b-no-fsdp> model=tiny accumulate_grad_batches=2)
add_test(NAME catalogue.seed_keys_accepted COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; $<TARGET_FILE:seed002-cpu-offload> model=tiny max_steps=1 precision=bf16-true optim=deepspeed_cpu act_ckpt=False \
     strategy=deepspeed_stage_2_offload devices=1 use_lora=false batch_size_per_device=3 threads=1 > o.txt;
   grep -E -q '^  batch_size +\\| 3$' o.txt; grep -E -q '^  strategy +\\| deepspeed_stage_2_offload \\(this binary\\)$' o.txt;
   grep -E -q 'after_opt\\] Params .* Optim device 0.00 GiB \\| Optim CPU ' o.txt")
set_tests_properties(catalogue.seed_keys_accepted PROPERTIES LABELS catalogue TIMEOUT 300)
# global_batch_size=16 over 2 ranks of batch 2: 4 micro-steps, 16 rows of 512 tokens per step.
add_test(NAME catalogue.global_batch_two_ranks COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 ${MPIEXEC_EXECUTABLE} -n 2 --oversubscribe \
     $<TARGET_FILE:seed003-codellama7b-fsdp> model=tiny batch_size_per_device=2 global_batch_size=16 max_steps=1 seq_len=64 > o.txt;
   grep -E -q '^  accumulate_grad_batches +\\| 4$' o.txt; grep -q ', 1024 tokens per step)' o.txt")
set_tests_properties(catalogue.global_batch_two_ranks PROPERTIES LABELS catalogue TIMEOUT 300)
