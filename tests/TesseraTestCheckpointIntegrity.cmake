# Resumable checkpoints verified before they are trusted, and a checkpoint_dir held by one run
# (engine/train_state.hpp, engine/checkpoint_dir_lock.hpp, the token cache of data/text_data.hpp). Each test
# fails on the code before the change (the comment above it says how) and passes after. Variables (_fp32, _expect,
# _model, _fixture, _sp_tok) from TesseraTestCli.cmake; tests/cli/edit_checkpoint.py damages the files.
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()
set(_edit "python3 ${CMAKE_CURRENT_SOURCE_DIR}/cli/edit_checkpoint.py")
# The fixture's model (a 420 KB checkpoint) on synthetic tokens: each run well under a second.
set(_ckpt_args model_dir=m batch_size=2 seq_len=16 threads=1 predict=false)
string(JOIN " " _ckpt_args_text ${_ckpt_args})
set(_step2 "${_model} && ${_fp32} ${_ckpt_args_text} max_steps=2 checkpoint_dir=c >/dev/null && ")

# tessera_cli_test's form (expect.sh: exit code RC, stderr matching REGEX, no file left behind) named
# checkpoint_integrity.NAME.
function(tessera_integrity_test name rc regex setup)
  add_test(NAME checkpoint_integrity.${name} COMMAND bash ${_expect} ${rc} "${regex}" "${setup}" -- ${ARGN})
  set_tests_properties(checkpoint_integrity.${name} PROPERTIES LABELS "cli;train_state" TIMEOUT 180)
endfunction()

# A 2-step checkpoint damaged by EDIT, resumed for 2 more steps with save_dir=sv: refused with exit 1 and REGEX, and
# neither save_dir nor metrics left behind. Once each trained on: zeroed weights, lost optimizer state, or a raw
# JSON exception.
function(tessera_checkpoint_damaged name regex edit)
  tessera_integrity_test(${name} 1 "${regex}" "${_step2}${edit}"
                         ${_fp32} ${_ckpt_args} max_steps=4 resume=c/step-00000002 save_dir=sv metrics=m.jsonl)
endfunction()
set(_damaged "; this checkpoint is damaged: resume from an older one \\(resume=checkpoint_dir/step-N\\)")
# Once: loss stuck at ln(vocab), sv all zeros.
tessera_checkpoint_damaged(no_files "manifest.json: \"files\" must be a non-empty array .*, got an array \\[\\]${_damaged}"
  "${_edit} manifest c/step-00000002 'm[\"files\"] = []'")
tessera_checkpoint_damaged(tensor_placed_elsewhere
  "resume=c/step-00000002: c/step-00000002: has no tensor '0.param' \\([0-9]+ elements\\), which this run needs${_damaged}"
  "${_edit} placement c/step-00000002 rank-00000.safetensors 0.param 'local 0'")
# Once: accepted, no checksum.
tessera_checkpoint_damaged(rank_file_flipped_byte
  "rank-00000.safetensors: its CRC-32C is [0-9a-f]{8} and the manifest says [0-9a-f]{8} \\(a byte changed since it was written"
  "${_edit} flip c/step-00000002/rank-00000.safetensors -5")
tessera_checkpoint_damaged(rank_header_flipped_byte "rank-00000.safetensors: its CRC-32C is [0-9a-f]{8} and the manifest says"
  "${_edit} flip c/step-00000002/rank-00000.safetensors 30")
# Once: read as int, 2^32+1 passed as version 1.
tessera_checkpoint_damaged(version_beyond_int
  "manifest.json: checkpoint format version 4294967297, and this tessera reads version 2; resume with the tessera"
  "${_edit} manifest c/step-00000002 'm[\"version\"] = 2**32 + 1'")
# Once: accepted, and AdamW started over from zero moments.
tessera_checkpoint_damaged(has_state_false
  "rank-00000.safetensors: holds the optimizer's state '0.exp_avg' and the manifest's \"optimizer.has_state\" is false"
  "${_edit} manifest c/step-00000002 'm[\"optimizer\"][\"has_state\"] = False'")
# Once: [json.exception.type_error.302] type must be boolean, but is string.
tessera_checkpoint_damaged(has_state_string "manifest.json: \"optimizer.has_state\" must be true or false, got a string \"yes\""
  "${_edit} manifest c/step-00000002 'm[\"optimizer\"][\"has_state\"] = \"yes\"'")
# Once: [json.exception.out_of_range.403] key 'optimizer' not found.
tessera_checkpoint_damaged(no_optimizer "manifest.json: \"optimizer\" must be an object, is missing${_damaged}"
  "${_edit} manifest c/step-00000002 'del m[\"optimizer\"]'")
# Once: cpu_adamw_step: hyper.step is -4, after the resume was announced.
tessera_checkpoint_damaged(optimizer_steps_negative
  "manifest.json: \"optimizer.steps\" must be a whole number from 0 to the checkpoint's step, 2, got a number -5"
  "${_edit} manifest c/step-00000002 'm[\"optimizer\"][\"steps\"] = -5'")

# The token cache of text data: a flipped byte (once: read as is) and a header claiming 2^62 rows (once:
# vector::_M_default_append), refused naming the cache and saying to delete it. (_sp_tok: TesseraTestCli.cmake.)
set(_games "seq 1 60 | sed 's/.*/1. e4 e5 2. Nf3 Nc6 game &/' > g.txt && ${_fp32} data=g.txt tokenizer=${_sp_tok} batch_size=2 seq_len=16 max_steps=1 threads=1 predict=false > /dev/null && ")
function(tessera_token_cache_damaged name regex edit)
  tessera_integrity_test(${name} 1 "${regex}" "${_games}${edit}"
                         ${_fp32} data=g.txt tokenizer=${_sp_tok} batch_size=2 seq_len=16 max_steps=1 threads=1 predict=false)
endfunction()
set(_cache "g.txt.sentencepiece-[0-9a-f]{8}.tokens: a damaged token cache \\(")
tessera_token_cache_damaged(token_cache_flipped_byte
  "${_cache}its CRC-32C is [0-9a-f]{8} and its header says [0-9a-f]{8}: a byte changed since it was written\\); delete it"
  "${_edit} flip g.txt.sentencepiece-*.tokens -3")
tessera_token_cache_damaged(token_cache_impossible_rows
  "${_cache}its header says 4611686018427387904 rows and [0-9]+ tokens, and its body holds [0-9]+ bytes, 12 per row"
  "${_edit} cache_rows g.txt.sentencepiece-*.tokens 4611686018427387904")

# checkpoint_dir that cannot be written: refused before step 1 (once: 20 steps trained, then exit 1 with no save_dir
# and no metrics). A symbolic-link loop here; a read-only mount and an immutable directory in the script.
tessera_integrity_test(checkpoint_dir_symlink_loop 2
  "checkpoint_dir=loop: cannot reach the directory \\(Too many levels of symbolic links\\)"
  "${_model} && ln -s loop loop" ${_fp32} ${_ckpt_args} max_steps=20 checkpoint_dir=loop metrics=m.jsonl save_dir=sv)
add_test(NAME checkpoint_integrity.checkpoint_dir_unwritable
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/checkpoint_dir_unwritable.sh ${_fp32} ${_fixture})
set_tests_properties(checkpoint_integrity.checkpoint_dir_unwritable PROPERTIES LABELS "cli;train_state" TIMEOUT 180
                     SKIP_RETURN_CODE 77)

# One run per checkpoint_dir (once: not locked out, and the first run died). A lock held by flock(1), whose child
# is the second run; then two real runs: the second refused naming the first's pid, the first goes on to a checkpoint.
tessera_integrity_test(checkpoint_dir_locked 2
  "checkpoint_dir=c: another run is using this directory \\(.* holds c/.tessera-lock\\); two runs writing one checkpoint_dir"
  "${_model} && mkdir c && touch c/.tessera-lock" flock c/.tessera-lock ${_fp32} ${_ckpt_args} max_steps=2 checkpoint_dir=c)
add_test(NAME checkpoint_integrity.two_runs_one_dir COMMAND bash -c
  "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_model};
   ${_fp32} ${_ckpt_args_text} max_steps=100000 checkpoint_dir=c > a.txt 2>&1 & a=$!;
   for i in $(seq 1 300); do grep -q '^step 1/' a.txt && break; sleep 0.1; done;
   ${_fp32} ${_ckpt_args_text} max_steps=2 checkpoint_dir=c > b.txt 2>&1; rc=$?; cat b.txt; kill -TERM $a; wait $a; ra=$?;
   [ $rc -eq 2 ] && grep -q \"^error: checkpoint_dir=c: another run is using this directory (pid $a on host \" b.txt &&
   [ $ra -eq 0 ] && grep -q 'stopped by a signal after step' a.txt && ls c/step-*/manifest.json > /dev/null &&
   [ ! -e c/.tessera-lock ] || { cat a.txt; exit 1; }")
set_tests_properties(checkpoint_integrity.two_runs_one_dir PROPERTIES LABELS "cli;train_state" TIMEOUT 180)
if(TESSERA_WITH_MPI)
  # Under mpirun every rank stops with rank 0's reason, none hangs; the ranks of one run do not lock each other out.
  add_test(NAME checkpoint_integrity.checkpoint_dir_locked_np2 COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_model}; mkdir c; touch c/.tessera-lock;
     run='${MPIEXEC_EXECUTABLE} -np 2 --oversubscribe $<TARGET_FILE:llama-ddp-fp32> ${_ckpt_args_text} max_steps=2';
     timeout 120 flock c/.tessera-lock $run checkpoint_dir=c > out.txt 2>&1; rc=$?; cat out.txt;
     [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q 'checkpoint_dir=c: another run is using this directory' out.txt &&
     timeout 120 $run checkpoint_dir=c > ok.txt 2>&1 && test -f c/step-00000002/manifest.json && [ ! -e c/.tessera-lock ]")
  set_tests_properties(checkpoint_integrity.checkpoint_dir_locked_np2 PROPERTIES LABELS "cli;train_state" TIMEOUT 180
                       ENVIRONMENT "OMPI_ALLOW_RUN_AS_ROOT=1;OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
endif()

# keep_last by the manifests' steps: a directory named ahead of its manifest (step 2 renamed step-00000009) once
# kept that one and deleted the checkpoint just written, so every rerun restarted from step 2.
add_test(NAME checkpoint_integrity.keep_last_by_manifest_step COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_model}; run='${_fp32} ${_ckpt_args_text} checkpoint_dir=c keep_last=1';
   $run max_steps=2 > /dev/null; mv c/step-00000002 c/step-00000009;
   $run max_steps=4 resume=auto > a.txt; grep -q 'resumed from c/step-00000009 at step 2' a.txt;
   test -f c/step-00000004/manifest.json; test ! -e c/step-00000009;
   $run max_steps=6 resume=auto > b.txt; grep -q 'resumed from c/step-00000004 at step 4' b.txt;
   test \"$(ls c)\" = step-00000006")
set_tests_properties(checkpoint_integrity.keep_last_by_manifest_step PROPERTIES LABELS "cli;train_state" TIMEOUT 180)
