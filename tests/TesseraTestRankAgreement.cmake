# Ranks agree or stop (engine/run_agreement.hpp, engine/job.hpp's agree, the watchdog over MPI's start): jobs whose
# ranks were given other arguments or other files, each rank started by tests/cli/rank_args.sh. Each ends on every
# rank within seconds with exit 2 and a message naming the key and both values, and leaves nothing behind (once:
# bucket_cap_mb=25 against 1 corrupted the heap, model_dir= on one of four FullShard ranks too, --help or --dry-run
# on one rank hung the others in MPI_Comm_dup and MPI_Finalize, and other settings trained silently wrong).
# Variables from TesseraTestCli.cmake.
if(NOT TESSERA_BUILD_EXAMPLES OR NOT TESSERA_WITH_MPI)
  return()
endif()
set(_rank_args "${CMAKE_CURRENT_SOURCE_DIR}/cli/rank_args.sh")
set(_np "${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG}")
set(_agree_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
set(_agree_run model=tiny seq_len=32 threads=1 max_steps=2 predict=false collective_timeout_s=20)
string(JOIN " " _agree_run_text ${_agree_run})  # the same, in a shell command's text
set(_same_arguments "every rank of a job must run the same binary with the same arguments")

function(tessera_agreement_test name rc regex setup)
  tessera_cli_test(${name} ${rc} "${regex}" "${setup}" ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES ENVIRONMENT "${_agree_env}" TIMEOUT 120)
endfunction()

tessera_agreement_test(ranks_disagree_bucket_cap 2
  "ranks disagree on the run config: rank 1 has bucket_cap_mb=1 where rank 0 has bucket_cap_mb=25; ${_same_arguments}"
  "" ${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe ${_rank_args} 1 bucket_cap_mb=1 $<TARGET_FILE:llama-ddp-fp32> ${_agree_run})
tessera_agreement_test(ranks_disagree_model_dir_np4 2
  "ranks disagree on the run's inputs: rank 3 has model_dir=m \\(2 entries, CRC-32C [0-9a-f]{8} .*\\) where rank 0 has model_dir=\"\"; every rank must read the same files"
  "${_model} > /dev/null" ${MPIEXEC_EXECUTABLE} -np 4 --oversubscribe ${_rank_args} 3 model_dir=m
  $<TARGET_FILE:llama-fsdp-fp32> seq_len=32 threads=1 max_steps=2 predict=false collective_timeout_s=20)
# The flags that end a program early, on one rank: refused on all before any rank acts on them.
tessera_agreement_test(ranks_disagree_help 2
  "ranks disagree on what to run: rank 1 has --help where rank 0 has no --help"
  "" ${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe ${_rank_args} 1 --help $<TARGET_FILE:llama-ddp-fp32> ${_agree_run})
tessera_agreement_test(ranks_disagree_dry_run 2
  "ranks disagree on what to run: rank 1 has --dry-run where rank 0 has no --dry-run"
  "" ${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe ${_rank_args} 1 --dry-run $<TARGET_FILE:llama-ddp-fp32> ${_agree_run})
# The same data under another name agrees (copies on each node); other bytes do not.
tessera_agreement_test(ranks_disagree_data_bytes 2
  "ranks disagree on the run's inputs: rank 1 has data=b.bin \\(8002 bytes, CRC-32C [0-9a-f]{8} of its first and last 64 KiB\\) where rank 0 has data=a.bin \\(8000 bytes"
  "${_fixture} tokens a.bin 4000 > /dev/null && ${_fixture} tokens b.bin 4001 > /dev/null"
  ${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe ${_rank_args} 1 data=b.bin ${_rank_args} 0 data=a.bin
  $<TARGET_FILE:llama-ddp-fp32> ${_agree_run})
add_test(NAME cli.ranks_agree_on_copies COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_fixture} tokens a.bin 4000 > /dev/null; cp a.bin c.bin;
   run=\"${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe ${_rank_args} 1 data=c.bin ${_rank_args} 0 data=a.bin\";
   $run $<TARGET_FILE:llama-ddp-fp32> ${_agree_run_text} > out.txt; grep -q '^\\[done\\]' out.txt")
set_tests_properties(cli.ranks_agree_on_copies PROPERTIES LABELS cli TIMEOUT 120 ENVIRONMENT "${_agree_env}")
# Each setting the probe found trained silently wrong, given to rank 1 alone.
add_test(NAME cli.ranks_disagree_settings COMMAND bash -c
  "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
   for kv in batch_size=4 seq_len=16 lr=0.5 seed=7 reduce_dtype=fp32 accumulate_grad_batches=2; do
     run=\"timeout 60 ${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe ${_rank_args} 1 $kv\";
     $run $<TARGET_FILE:llama-ddp-fp32> model=tiny threads=1 max_steps=2 predict=false > out.txt 2>&1; rc=$?;
     grep -q \"ranks disagree on the run config: rank 1 has $kv where rank 0 has \" out.txt && [ $rc = 2 ] ||
       { echo \"FAIL: $kv on rank 1: exit $rc\"; cat out.txt; exit 1; };
   done; echo PASS")
set_tests_properties(cli.ranks_disagree_settings PROPERTIES LABELS cli TIMEOUT 300 ENVIRONMENT "${_agree_env}")
# A rank that never joins the job (asleep before it starts): the others' watchdog covers MPI's start and ends the job
# after collective_timeout_s (once: nothing watched before the first step).
tessera_agreement_test(rank_never_joins 124
  "collective watchdog: \\[rank 0/2\\] MPI start \\(MPI_Init_thread and the World's communicators\\) had waited 3.0 s"
  "" ${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe ${_rank_args} 1 sleep:60 $<TARGET_FILE:llama-ddp-fp32> model=tiny
  max_steps=2 predict=false collective_timeout_s=3)
