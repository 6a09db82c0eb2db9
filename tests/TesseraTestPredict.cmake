# The predictor (predict/dry_run.hpp): its accuracy over every example binary at 1, 2 and 4 ranks, the sweep's
# negative control, and --dry-run on the seeds' full-size steps and on bad input.
add_test(NAME predict.sweep
  COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/predict/predict_sweep.py ${PROJECT_BINARY_DIR}/examples ${MPIEXEC_EXECUTABLE}
          --tolerance 0.05)
set_tests_properties(predict.sweep PROPERTIES LABELS predict TIMEOUT 2400)
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
# Seed 002: the baseline does not fit one 80 GB GPU once AdamW's state exists; the smaller batch fits.
tessera_dry_run(seed002_baseline_80GB 3 "DOES NOT FIT: in the optimizer step of step 0" seed002-baseline
  device=cuda device_memory=80GB)
tessera_dry_run(seed002_reduced_batch_80GB 0 "FITS: rank 0 peaks at" seed002-reduced-batch device=cuda device_memory=80GB)
tessera_dry_run(seed001_fsdp_4_ranks 0 "[predict] rank 0 of 4 on a CUDA device" seed001-llama7b-fsdp
  device=cuda device_memory=80GB devices=4)
tessera_dry_run(tiny_on_cpu 0 "FITS" llama-fp32 batch_size=2 seq_len=64)
tessera_dry_run(zero_devices 2 "devices=0: --dry-run predicts for this many ranks" llama-fp32 devices=0)
tessera_dry_run(bad_device_memory 2 "device_memory=lots: must be a size with a unit" llama-fp32 device_memory=lots)
tessera_dry_run(small_device 3 "DOES NOT FIT: before the forward pass of step 0" llama-fp32 device_memory=1MiB)
