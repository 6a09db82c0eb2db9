# The predictor (predict/dry_run.hpp): its accuracy over every example binary at 1, 2 and 4 ranks, the sweep's
# negative control, and --dry-run on the seeds' full-size steps and on bad input.
# The sweep's runs in three interleaved parts (predict.sweep_1of3 ...), so that no one test takes minutes.
foreach(part 1 2 3)
  add_test(NAME predict.sweep_${part}of3
    COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/predict/predict_sweep.py ${PROJECT_BINARY_DIR}/examples
            ${MPIEXEC_EXECUTABLE} --tolerance 0.05 --part ${part}/3)
  set_tests_properties(predict.sweep_${part}of3 PROPERTIES LABELS predict TIMEOUT 1200)
endforeach()
add_test(NAME predict.sweep_negative
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/predict/predict_sweep.py ${PROJECT_BINARY_DIR}/examples ${MPIEXEC_EXECUTABLE}
          --negative)
set_tests_properties(predict.sweep_negative PROPERTIES LABELS predict TIMEOUT 300)

# --dry-run: the exit code (0 fits, 3 does not), the verdict's words, and no output files.
function(tessera_dry_run name code expected binary)
  string(REPLACE ";" " " args "${ARGN}")
  add_test(NAME predict.${name} COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
     $<TARGET_FILE:${binary}> --dry-run ${args} metrics=m.jsonl save_dir=out > out.txt 2>&1; rc=$?; cat out.txt;
     [ $rc -eq ${code} ] && grep -q -F -- '${expected}' out.txt && [ ! -e m.jsonl ] && [ ! -e out ]")
  set_tests_properties(predict.${name} PROPERTIES LABELS predict TIMEOUT 300)
endfunction()
# Seed 002 on one 80 GB GPU: the baseline's H100 batch (64) fits step 0 and runs out once AdamW's state exists, as the
# seed describes its A100 run (batch 32); tessera's batch 32 fits (the lab's stack runs out there: bench/memory_vs_hf.py);
# the reduced batch (16) fits.
tessera_dry_run(seed002_baseline_80GB 3 "DOES NOT FIT: after the optimizer step of step 0: its optimizer state (27.90 GiB)"
  seed002-baseline device=cuda device_memory=80GiB)
tessera_dry_run(seed002_baseline_batch32_80GB 0 "FITS: rank 0 peaks at" seed002-baseline
  device=cuda device_memory=80GiB batch_size=32)
tessera_dry_run(seed002_reduced_batch_80GB 0 "FITS: rank 0 peaks at" seed002-reduced-batch device=cuda device_memory=80GiB)
tessera_dry_run(seed001_fsdp_4_ranks 0 "[predict] rank 0 of 4 on a CUDA device" seed001-llama7b-fsdp
  device=cuda device_memory=80GiB devices=4)
tessera_dry_run(tiny_on_cpu 0 "FITS" llama-fp32 batch_size=2 seq_len=64)
tessera_dry_run(zero_devices 2 "devices=0: --dry-run predicts for this many ranks" llama-fp32 devices=0)
tessera_dry_run(bad_device_memory 2 "device_memory=lots: must be a size with a unit" llama-fp32 device_memory=lots)
tessera_dry_run(bad_peak_holders 2 "peak_holders=-1: must be from 0 (none) to 1000" llama-fp32 peak_holders=-1)
# peak_holders=N: the N largest holders of the peak and what set it; the tiny Llama's peak is in its loss's backward.
# The largest holder of seed002-bf16-true's peak is the OPT layers' state (96 storages of 150.06 MiB: parameters and
# two AdamW moments of 32 layers in bf16).
tessera_dry_run(peak_holders_tiny 0 "the peak was reached allocating in" llama-fp32 batch_size=2 seq_len=64
  peak_holders=4)
tessera_dry_run(peak_holders_seed002 0 "14.07  aten::empty                                              96 x 150.06 MiB"
  seed002-bf16-true device=cuda device_memory=80GiB peak_holders=3)
tessera_dry_run(small_device 3 "DOES NOT FIT: before the forward pass of step 0" llama-fp32 device_memory=1MiB)

# max_memory= (CPU): the run stops at the allocation that would exceed it with where it was, the breakdown, the predicted
# need and the changes that fit, exits 1 and leaves no metrics file; in a job every rank ends within seconds.
add_test(NAME predict.out_of_memory COMMAND bash -c
  "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
   $<TARGET_FILE:llama-fp32> batch_size=8 seq_len=128 threads=1 max_steps=2 max_memory=100MiB metrics=m.jsonl > out.txt 2>&1;
   rc=$?; cat out.txt; [ $rc -eq 1 ] && [ ! -e m.jsonl ] && [ -z \"$(ls -d m.jsonl.partial* 2>/dev/null)\" ] &&
   grep -q 'error: out of memory on rank 0 in the ' out.txt && grep -q 'held when it stopped: Params ' out.txt &&
   grep -q 'predicted need: a peak of ' out.txt && grep -q -E '^    batch_size=[0-9]+ accumulate_grad_batches=[0-9]+ .*GiB$' out.txt")
set_tests_properties(predict.out_of_memory PROPERTIES LABELS predict TIMEOUT 120)
add_test(NAME predict.out_of_memory_two_ranks COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/predict/oom_ranks.sh
  ${MPIEXEC_EXECUTABLE} $<TARGET_FILE:llama-fsdp-fp32>)
set_tests_properties(predict.out_of_memory_two_ranks PROPERTIES LABELS predict TIMEOUT 180)
tessera_dry_run(bad_max_memory 2 "max_memory=lots: must be a size with a unit" llama-fp32 max_memory=lots)
