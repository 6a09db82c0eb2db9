# Faults a hostile-input probe found: tessera-report on hostile metrics files and outputs, temporary files planted
# as links, readers given FIFOs, image headers that claim more than their files hold, outputs that are inputs by
# another spelling, and the memory a long one-line text takes to tokenize.
# Each test fails on the code before its fix (the comment above it says how) and passes after, in a few seconds; a
# command that once hung runs under a short timeout, so that it fails fast. Variables from TesseraTestCli.cmake.
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()
set(_report $<TARGET_FILE:tessera-report>)
set(_done "{\"event\":\"done\",\"peak\":1,\"train_s\":1.0")
set(_memory "{\"event\":\"memory\",\"step\":1,\"micro\":0,\"phase\":\"after_fwd\",\"params\":1,\"grads\":0,\"optim\":0,\"acts\":0,\"allocated\":1,\"peak\":1,\"reserved\":1")

# tessera-report: counts bounded with file, line and field (once: world_size 10^12 drew bars without end, rank 10^9
# allocated until std::bad_alloc).
tessera_cli_test(report_world_size_beyond_bound 1
  "a.jsonl:1: \"world_size\" is 1000000000000. a world size is 1 to 4096 \\(a report draws at most 4096 ranks\\)"
  "printf '%s\\n' '${_done},\"world_size\":1000000000000}' > a.jsonl" timeout 10 ${_report} -o r.html a.jsonl)
tessera_cli_test(report_rank_beyond_bound 1 "a.jsonl:1: \"rank\" is 1000000000. a rank is 0 to 4095"
  "printf '%s\\n' '${_memory},\"rank\":1000000000}' '${_done}}' > a.jsonl" timeout 10 ${_report} -o r.html a.jsonl)
# Losses of 1e20 and 1e20 + 16384 draw a page (once: the tick loop added 5000 to 1e20, which stayed 1e20, forever).
add_test(NAME cli.report_loss_beyond_resolution COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
   s='{\"event\":\"step\",\"step_ms\":3,\"tokens\":8,\"step\"';
   printf '%s\\n' \"$s:0,\\\"loss\\\":100000000000000000000}\" \"$s:1,\\\"loss\\\":100000000000000016384}\" '${_done}}' > m.jsonl;
   timeout 10 ${_report} -o r.html m.jsonl; grep -q 'class=\"loss-line\"' r.html")
set_tests_properties(cli.report_loss_beyond_resolution PROPERTIES LABELS cli TIMEOUT 60)
# -o naming an input (here a hard link to it) or a FIFO: refused, the file left as it was (once: the input became the
# page; the FIFO a plain file).
tessera_cli_test(report_out_is_input 2 "-o h.jsonl: is the metrics file m.jsonl given to read"
  "printf '%s\\n' '${_done}}' > m.jsonl && ln m.jsonl h.jsonl" ${_report} -o h.jsonl m.jsonl)
tessera_cli_test(report_out_is_fifo 2 "-o f.html: is a FIFO, not a regular file"
  "printf '%s\\n' '${_done}}' > m.jsonl && mkfifo f.html" ${_report} -o f.html m.jsonl)
# A FIFO given as a metrics file: refused at once (once: blocked in open()).
tessera_cli_test(report_input_is_fifo 1 "p.jsonl: cannot be read \\(is a FIFO, not a regular file\\)" "mkfifo p.jsonl"
  timeout 10 ${_report} -o r.html p.jsonl)

# Temporary files are created new, never opened through a link already there: links planted under the old name
# (<out>.partial) and under the first new one (<out>.partial-<pid>: the pid of the process that exec's the binary)
# leave their target alone (once: "ln -s t.bin m.jsonl.partial" turned the data file into the run's metrics).
add_test(NAME cli.partial_files_not_through_links COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_model} > /dev/null; ${_fixture} tokens t.bin 4000 > /dev/null;
   cp t.bin t.orig; ln -s t.bin m.jsonl.partial; ln -s t.bin tr.json.partial;
   bash -c 'ln -s t.bin m.jsonl.partial-$$ && ln -s t.bin tr.json.partial-$$ && exec \"$0\" \"$@\"'
     ${_fp32} model_dir=m data=t.bin ${_small_text} metrics=m.jsonl trace=tr.json predict=false > /dev/null;
   cmp t.bin t.orig; grep -q '\"event\":\"done\"' m.jsonl; grep -q traceEvents tr.json;
   cp m.jsonl m.orig; ln -s m.jsonl r.html.partial;
   bash -c 'ln -s m.jsonl r.html.partial-$$ && exec \"$0\" \"$@\"' ${_report} -o r.html m.jsonl > /dev/null;
   cmp m.jsonl m.orig; grep -q '<!DOCTYPE html>' r.html; test -L m.jsonl.partial; test -L r.html.partial")
set_tests_properties(cli.partial_files_not_through_links PROPERTIES LABELS cli TIMEOUT 120)

# Readers refuse FIFOs as the JSON reader does (once: each blocked in open()).
tessera_cli_test(labels_is_fifo 2 "d/labels.jsonl: is a FIFO, not a regular file" "mkdir d && mkfifo d/labels.jsonl"
  timeout 20 ${_vit} data=d metrics=out.jsonl)
tessera_cli_test(pairs_is_fifo 2 "d/pairs.jsonl: is a FIFO, not a regular file" "mkdir d && mkfifo d/pairs.jsonl"
  timeout 20 ${_t5} data=d metrics=out.jsonl)
tessera_cli_test(captions_is_fifo 2 "d/captions.jsonl: is a FIFO, not a regular file" "mkdir d && mkfifo d/captions.jsonl"
  timeout 30 ${_blip2} data=d metrics=out.jsonl)
# A FIFO in the token cache's place is no cache: the run tokenizes and trains (once: it blocked reading the cache).
add_test(NAME cli.token_cache_is_fifo COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
   for i in $(seq 1 40); do echo \"1. e4 e5 2. Nf3 Nc6 game $i\"; done > g.txt;
   ${_fp32} data=g.txt tokenizer=${_sp_tok} ${_small_text} > /dev/null; cache=$(ls g.txt.*.tokens);
   rm $cache; mkfifo $cache; timeout 30 ${_fp32} data=g.txt tokenizer=${_sp_tok} ${_small_text} > out.txt;
   grep -q '^\\[done\\]' out.txt; test -p $cache")
set_tests_properties(cli.token_cache_is_fifo PROPERTIES LABELS cli TIMEOUT 120)

# A 160-byte JPEG claiming 4000x4000 pixels (a Huffman-coded file holds at most 512 pixels a byte): refused from its
# header before training, with the file, its size and the limit (once: decoded from made-up zeros on every read).
set(_false_jpeg "ffd8ffe000104a46494600010100000100010000ffdb0043000302020302020303030304030304050805050404050a070706080c0a0c0c0b0a0b0b0d0e12100d0e110e0b0b1016101113141515150c0f171816141812141514ffc0000b080fa00fa001011100ffc40014000100000000000000000000000000000008ffc40014100100000000000000000000000000000000ffda0008010100003f003bbfffd9")
tessera_cli_test(image_header_claims_more 2
  "cat/a.jpg: JPEG of 4000x4000 pixels in a file of 160 bytes, which cannot hold them \\(each 8x8 block takes at least one bit, so at most 81920 pixels\\)"
  "mkdir -p d/cat && python3 -c \"open('d/cat/a.jpg', 'wb').write(bytes.fromhex('${_false_jpeg}'))\""
  ${_vit} data=d batch_size=1 max_steps=1 threads=1 metrics=out.jsonl)
# A label of 2^64-1 is named as written (once: "label -1").
tessera_cli_test(image_label_beyond_int64 2
  "labels.jsonl:1: label 18446744073709551615 is not a class of the model, which has 10"
  "mkdir d && printf '{\"image\": \"a.png\", \"label\": 18446744073709551615}\\n' > d/labels.jsonl"
  ${_vit} data=d metrics=out.jsonl)

# Outputs against each other and the run's inputs, by file identity (once: another spelling passed, and the run
# trained, then lost its metrics at the rename or overwrote its input).
tessera_cli_test(trace_spelled_as_metrics 2 "trace=./x.jsonl: is also metrics=x.jsonl" "${_model} && ${_fixture} tokens t.bin 4000"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=x.jsonl trace=./x.jsonl)
tessera_cli_test(metrics_spelled_as_save_dir 2 "metrics=out: is also save_dir" "${_model} && ${_fixture} tokens t.bin 4000"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out save_dir=./out)
tessera_cli_test(metrics_in_data_dir 2 "metrics=d/labels.jsonl: is inside data=d, an input of this run"
  "mkdir d && printf '{\"image\": \"a.png\", \"label\": 1}\\n' > d/labels.jsonl" ${_vit} data=d metrics=d/labels.jsonl)
tessera_cli_test(trace_is_training_image 2 "trace=d/cat/a.png: is inside data=d, an input of this run"
  "mkdir -p d/cat && printf x > d/cat/a.png" ${_vit} data=d trace=d/cat/a.png)
tessera_cli_test(metrics_is_tokenizer 2 "metrics=tok/tokenizer.model: is the tokenizer file of this run"
  "cp -r ${_sp_tok} tok && printf '1. e4 e5\\n' > g.txt" ${_fp32} data=g.txt tokenizer=tok/tokenizer.model
  metrics=tok/tokenizer.model)
tessera_cli_test(metrics_is_resumed_manifest 2
  "metrics=ck/step-00000002/manifest.json: is inside resume=ck/step-00000002, an input of this run"
  "mkdir -p ck/step-00000002 && printf '{}' > ck/step-00000002/manifest.json"
  ${_fp32} ${_small} resume=ck/step-00000002 metrics=ck/step-00000002/manifest.json)

# An 8 MB one-line .txt tokenized with a SentencePiece BPE: peak RSS at most 250 MiB above a run on a 2 KB line
# (tests/cli/long_line_memory.sh; once: about 1,040 MiB above it, the whole line in libsentencepiece at once).
add_test(NAME cli.long_line_tokenized_in_chunks
  COMMAND bash "${CMAKE_CURRENT_SOURCE_DIR}/cli/long_line_memory.sh" ${_fp32} ${_sp_tok})
set_tests_properties(cli.long_line_tokenized_in_chunks PROPERTIES LABELS cli TIMEOUT 120)
