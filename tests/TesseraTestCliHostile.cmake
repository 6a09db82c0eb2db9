# Hostile input: paths, outputs, files and numbers that once crashed, hung or lost a finished run. Each test
# fails on the code before its fix (see the comment above it) and passes after. Variables from
# TesseraTestCli.cmake (_fp32, _lora, _fixture, _model, _small, _small_text).
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()
set(_tokens "${_fixture} tokens t.bin 4000")

# save_dir with a trailing separator (the README's own spelling) saves; it once staged the temporary
# directory inside the target and then failed to move it ("could not move the written weights into place").
add_test(NAME cli.save_dir_trailing_slash COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_model}; ${_tokens};
   ${_fp32} model_dir=m data=t.bin ${_small_text} save_dir=out/ >/dev/null;
   test -f out/config.json && test -f out/model.safetensors;
   ${_lora} model_dir=m data=t.bin ${_small_text} save_dir=ad/ >/dev/null;
   test -f ad/adapter_config.json && test -f ad/adapter_model.safetensors;
   mkdir empty; ${_fp32} model_dir=m data=t.bin ${_small_text} save_dir=empty/// >/dev/null; test -f empty/config.json;
   test -z \"$(ls -d *.partial-* 2>/dev/null)\"")
set_tests_properties(cli.save_dir_trailing_slash PROPERTIES LABELS cli TIMEOUT 180)

# Outputs checked before the first step (once: after training, or never).
tessera_cli_test(metrics_is_directory 2 "metrics=d: names a directory" "${_model} && ${_tokens} && mkdir d"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=d)
tessera_cli_test(metrics_is_save_dir 2 "metrics=out: is also save_dir" "${_model} && ${_tokens}"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out save_dir=out)
tessera_cli_test(metrics_inside_save_dir 2 "metrics=out/m.jsonl: is inside save_dir=out" "${_model} && ${_tokens} && mkdir out"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out/m.jsonl save_dir=out)
add_test(NAME cli.outputs_read_only COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/cli/read_only_outputs.sh" ${_fp32} ${_fixture})
set_tests_properties(cli.outputs_read_only PROPERTIES LABELS cli TIMEOUT 180 SKIP_RETURN_CODE 77)
# A metrics file that stops growing mid-run (a full disk) stops the run at that step, naming the setting, and
# the run's save_dir is not left behind. Once: write errors ignored until the end, save_dir complete.
add_test(NAME cli.metrics_disk_full COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/cli/metrics_disk_full.sh" ${_fp32} ${_fixture})
set_tests_properties(cli.metrics_disk_full PROPERTIES LABELS cli TIMEOUT 180)

# metrics= never replaces an input of the run or a non-regular file (once: silently replaced).
tessera_cli_test(metrics_is_data 2 "metrics=t.bin: is the data file of this run" "${_model} && ${_tokens}"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=t.bin)
tessera_cli_test(metrics_in_model_dir 2 "metrics=m/model.safetensors: is inside model_dir=m" "${_model} && ${_tokens}"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=m/model.safetensors)
tessera_cli_test(metrics_is_device 2 "metrics=/dev/null: exists and is not a regular file" "${_model} && ${_tokens}"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=/dev/null)

# 100,000 nested brackets: refused with the depth named (once: SIGSEGV in the message's dump()).
tessera_cli_test(nested_safetensors_header 1 "model.safetensors: header nests deeper than 64 levels"
  "${_model} && ${_tokens} && ${_fixture} deep-json m/model.safetensors '{\"a\":' 100000 '}' safetensors"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)
tessera_cli_test(nested_index 1 "model.safetensors.index.json: is not accepted: its JSON nests deeper than 64"
  "${_model} && ${_tokens} && rm m/model.safetensors && ${_fixture} deep-json m/model.safetensors.index.json '{\"weight_map\":{\"x\":' 100000 '}}'"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)
tessera_cli_test(nested_config 1 "config.json: is not accepted: its JSON nests deeper than 64"
  "${_model} && ${_tokens} && ${_fixture} deep-json m/config.json '{\"model_type\":\"llama\",\"rope_scaling\":' 100000 '}'"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)

# Nothing blocks: a FIFO for config.json (once: every rank hung in open()) and threads far beyond the machine
# (once: minutes spent starting them).
tessera_cli_test(config_is_fifo 1 "config.json: is not a regular file" "${_model} && ${_tokens} && rm m/config.json && mkfifo m/config.json"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)
tessera_cli_test(threads_beyond_machine 2 "threads=4000: this machine runs [0-9]+ hardware threads" "${_model} && ${_tokens}"
  ${_fp32} model_dir=m data=t.bin batch_size=2 seq_len=16 max_steps=2 threads=4000)

# A config.json claiming TinyLlama-1.1B shapes over a 2-block checkpoint is refused from the weights' headers,
# under a 3 GB address-space limit (once: 4.4 GB allocated and zeroed first, so here an allocation failure).
tessera_cli_test(config_claims_larger_model 1 "has shape \\[256, 32\\] but config.json implies \\[32000, 2048\\]"
  "${_model} && ${_tokens} && sed -i -e 's/\"vocab_size\": 256/\"vocab_size\": 32000/' -e 's/\"hidden_size\": 32/\"hidden_size\": 2048/' -e 's/\"intermediate_size\": 64/\"intermediate_size\": 5632/' -e 's/\"num_hidden_layers\": 2/\"num_hidden_layers\": 22/' -e 's/\"num_attention_heads\": 4/\"num_attention_heads\": 32/' -e 's/\"num_key_value_heads\": 2/\"num_key_value_heads\": 4/' -e 's/\"head_dim\": 8/\"head_dim\": 64/' m/config.json"
  bash -c "ulimit -v 3000000 && exec ${_fp32} model_dir=m batch_size=2 seq_len=16 max_steps=1 threads=1 metrics=out.jsonl")
# (Arguments of tessera_cli_test are a CMake list: no ';' inside the shell text, hence '&&'.)
# A model that does not fit: the bytes asked for, not an allocator backtrace.
tessera_cli_test(out_of_memory_named 1 "out of memory on cpu: cannot allocate [0-9]+ bytes for unit [0-9]+ of the parameters"
  "" bash -c "ulimit -v 3000000 && exec ${_fp32} model=llama-1b batch_size=1 seq_len=8 max_steps=1 threads=1 metrics=out.jsonl")

# Numbers at the edge of 64 bits: each key refused with its bound (once: bad_alloc, "steps -256", truncation).
tessera_cli_test(seq_len_beyond_bound 2 "seq_len=4294967296: must be at most 1048576" "" ${_fp32} seq_len=4294967296)
tessera_cli_test(max_epochs_beyond_bound 2 "max_epochs=9223372036854775807: must be at most" "" ${_fp32} max_epochs=9223372036854775807)
tessera_cli_test(threads_beyond_bound 2 "threads=4294967296: must be at most 4096" "" ${_fp32} threads=4294967296)
tessera_cli_test(lora_r_beyond_bound 2 "lora_r=4294967296: must be at most 65536" "" ${_lora} lora_r=4294967296)
tessera_cli_test(bucket_cap_beyond_bound 2 "bucket_cap_mb=1e\\+13: must be at most" "" ${_fp32} bucket_cap_mb=1e13)

# config.json with the wrong JSON type, or a directory in its place: file, key, type found and wanted.
tessera_cli_test(config_wrong_type 1 "config.json: \"tie_word_embeddings\" must be a boolean \\(true or false\\), got a number 1"
  "${_model} && ${_tokens} && sed -i 's/\"tie_word_embeddings\": false/\"tie_word_embeddings\": 1/' m/config.json"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)
tessera_cli_test(config_is_directory 1 "config.json: is a directory" "${_model} && ${_tokens} && rm m/config.json && mkdir m/config.json"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)

# Non-finite numbers: NaN weights refused at load; a diverging run stops at the step, saving nothing.
tessera_cli_test(nan_weights 1 "holds 1 NaN or Inf value" "${_model} && ${_tokens} && ${_fixture} poison m"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl save_dir=s)
tessera_cli_test(loss_diverges 1 "step [0-9]+: the loss is (NaN|[+-]Inf); training diverged" "${_model} && ${_tokens}"
  ${_fp32} model_dir=m data=t.bin batch_size=2 seq_len=16 max_steps=8 threads=1 lr=1e30 metrics=out.jsonl save_dir=s)
