# The example binaries on bad input: a clear message naming the value, the documented exit code
# (2 = bad configuration, 1 = bad file or failed run), and no partial output left behind.
if(NOT TESSERA_BUILD_EXAMPLES)
  return()
endif()
add_executable(tessera_make_fixture cli/make_fixture.cpp)
target_link_libraries(tessera_make_fixture PRIVATE tessera::tessera)
tessera_use_pch(tessera_make_fixture)

set(_expect "${CMAKE_CURRENT_SOURCE_DIR}/cli/expect.sh")
set(_fp32 $<TARGET_FILE:llama-fp32>)
set(_fixture $<TARGET_FILE:tessera_make_fixture>)
set(_model "${_fixture} model m")
set(_small batch_size=2 seq_len=16 max_steps=2 threads=1)
string(JOIN " " _small_text ${_small})

function(tessera_cli_test name rc regex setup)
  add_test(NAME cli.${name} COMMAND bash ${_expect} ${rc} "${regex}" "${setup}" -- ${ARGN})
  set_tests_properties(cli.${name} PROPERTIES LABELS cli TIMEOUT 180)
endfunction()

tessera_cli_test(unknown_key 2 "unknown key 'bach_size' \\(did you mean 'batch_size'\\?\\)" "" ${_fp32} bach_size=3)
tessera_cli_test(negative_lr 2 "lr=-1: " "" ${_fp32} lr=-1)
tessera_cli_test(negative_peak_tflops 2 "peak_tflops=-1: " "" ${_fp32} peak_tflops=-1)
# MFU on the CPU with a given peak: in the step lines, the [done] line and the metrics (report/mfu.hpp).
add_test(NAME cli.mfu_with_peak COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
   $<TARGET_FILE:llama-fp32> max_steps=2 batch_size=2 seq_len=32 threads=1 peak_tflops=1 metrics=m.jsonl > out.txt;
   grep -E -q '^step 2/2 .* tok/s \\| MFU [0-9.]+%$' out.txt; grep -E -q '^\\[done\\] .* tok/s \\| MFU [0-9.]+%$' out.txt;
   grep -q '\"mfu\":' m.jsonl; grep -q '\"flops_per_token\":' m.jsonl;
   $<TARGET_FILE:llama-fp32> max_steps=1 batch_size=2 seq_len=32 threads=1 > plain.txt; ! grep -q MFU plain.txt")
set_tests_properties(cli.mfu_with_peak PROPERTIES LABELS cli TIMEOUT 180)
tessera_cli_test(zero_batch 2 "batch_size=0: " "" ${_fp32} batch_size=0)
tessera_cli_test(not_key_value 2 "key=value" "" ${_fp32} fast)
tessera_cli_test(missing_model_dir 2 "model_dir=/nonexistent" "" ${_fp32} model_dir=/nonexistent)
# A hub id not in the hub cache (io/hub_cache.hpp; HF_HUB_CACHE=hub, relative: a cache in the test's own empty
# directory, never the user's): the id, the revision, the cache searched and the command that fetches it.
string(CONCAT _hub_miss "model_dir=no-such/model: not an existing directory. Hugging Face hub id no-such/model, "
  "revision main: not in the hub cache hub .*hf download no-such/model --cache-dir hub")
tessera_cli_test(hub_id_not_cached 2 "${_hub_miss}" "" env HF_HUB_CACHE=hub ${_fp32} model_dir=no-such/model)
tessera_cli_test(model_dir_neither_dir_nor_hub_id 2
  "model_dir=a/b/c: not an existing directory, nor a Hugging Face hub id" "" ${_fp32} model_dir=a/b/c)
tessera_cli_test(missing_data 2 "data=/nonexistent.bin" "" ${_fp32} data=/nonexistent.bin)
tessera_cli_test(unknown_preset 2 "model=llama-9t: no such preset" "" ${_fp32} model=llama-9t)
# The image data: the wrong kind of data for the family, a label beyond the model's classes, a missing or corrupt image.
set(_vit $<TARGET_FILE:vit-fp32>)
tessera_cli_test(tokens_for_images 2 "data=t.bin: image data is a directory" "${_fixture} tokens t.bin 4000"
  ${_vit} data=t.bin metrics=out.jsonl)
tessera_cli_test(images_for_tokens 2 "data=d: a directory, but this model family reads a token file" "mkdir d"
  ${_fp32} data=d metrics=out.jsonl)
tessera_cli_test(image_label_out_of_range 2 "labels.jsonl:2: label 10 is not a class of the model, which has 10"
  "mkdir d && printf '{\"image\": \"a.png\", \"label\": 1}\\n{\"image\": \"b.png\", \"label\": 10}\\n' > d/labels.jsonl"
  ${_vit} data=d metrics=out.jsonl)
tessera_cli_test(image_missing 2 "labels.jsonl row 1: .*a.png: no such image file"
  "mkdir d && printf '{\"image\": \"a.png\", \"label\": 1}\\n' > d/labels.jsonl"
  ${_vit} data=d metrics=out.jsonl)
tessera_cli_test(image_corrupt 2 "cat/a.png: not a PNG or JPEG image tessera can read"
  "mkdir -p d/cat d/dog && printf 'not an image' > d/cat/a.png && cp d/cat/a.png d/dog/b.png"
  ${_vit} data=d metrics=out.jsonl)
# The sequence-to-sequence data (T5's pairs.jsonl): a token file, a token id beyond the vocabulary, a row longer than
# seq_len, text without a tokenizer.
set(_t5 $<TARGET_FILE:t5-fp32>)
tessera_cli_test(tokens_for_pairs 2 "data=t.bin: sequence-to-sequence models read pairs.jsonl"
  "${_fixture} tokens t.bin 4000" ${_t5} data=t.bin metrics=out.jsonl)
tessera_cli_test(pairs_id_out_of_range 2 "pairs.jsonl:2: \"input_ids\"\\[1\\] is 4096"
  "mkdir d && printf '{\"input_ids\": [5, 6], \"labels\": [7]}\\n{\"input_ids\": [5, 4096], \"labels\": [7]}\\n' > d/pairs.jsonl"
  ${_t5} data=d metrics=out.jsonl)
tessera_cli_test(pairs_row_too_long 2 "pairs.jsonl:1: \"labels\" has 3 tokens, more than seq_len=2"
  "mkdir d && printf '{\"input_ids\": [5, 6], \"labels\": [7, 8, 9]}\\n' > d/pairs.jsonl"
  ${_t5} data=d seq_len=2 metrics=out.jsonl)
tessera_cli_test(pairs_text 2 "pairs.jsonl:1: a text pair .* needs the model's tokenizer"
  "mkdir d && printf '{\"input\": \"hi\", \"target\": \"ho\"}\\n' > d/pairs.jsonl"
  ${_t5} data=d metrics=out.jsonl)
# Text data for the language models (data/text_data.hpp): a bad record by file and line (and no cache left behind),
# text without a tokenizer, and two runs of each kind through the token cache.
set(_sp_tok "${CMAKE_CURRENT_SOURCE_DIR}/text/fixtures/sp_bpe")
tessera_cli_test(alpaca_bad_record 2 "a.json:3: no \"output\""
  "printf '[\\n {\"instruction\": \"a\", \"output\": \"b\"},\\n {\"instruction\": \"c\"}\\n]\\n' > a.json"
  ${_fp32} data=a.json tokenizer=${_sp_tok} metrics=out.jsonl)
tessera_cli_test(text_without_tokenizer 2 "data=g.txt: text, which needs a tokenizer" "printf '1. e4 e5\\n' > g.txt"
  ${_fp32} data=g.txt)
add_test(NAME cli.text_data_trains COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/text_data_run.sh $<TARGET_FILE:llama-fp32>
  ${_sp_tok})
set_tests_properties(cli.text_data_trains PROPERTIES LABELS cli TIMEOUT 300)
# BLIP-2: captions.jsonl refusals (a text caption, a missing image, the image token in a caption), freeze= naming no
# module, freeze= under LoRA's frozen base.
set(_blip2 $<TARGET_FILE:blip2-opt-fp32>)
tessera_cli_test(captions_text 2 "captions.jsonl:1: .*tokenizer"
  "mkdir d && printf '{\"image\": \"a.png\", \"text\": \"a cat\"}\\n' > d/captions.jsonl"
  ${_blip2} data=d metrics=out.jsonl)
tessera_cli_test(captions_missing_image 2 "captions.jsonl:1: .*a.png: no such image file"
  "mkdir d && printf '{\"image\": \"a.png\", \"input_ids\": [5, 6]}\\n' > d/captions.jsonl"
  ${_blip2} data=d metrics=out.jsonl)
tessera_cli_test(freeze_unknown 2 "freeze=vision: 'vision' is no module of blip2-opt" "" ${_blip2} freeze=vision
  metrics=out.jsonl)
tessera_cli_test(freeze_everything 2 "freeze=.* nothing would train" ""
  ${_blip2} freeze=vision_model,query_tokens,qformer,language_projection,language_model metrics=out.jsonl)
tessera_cli_test(bad_lr_scaling 2 "lr_scaling=sqrt: must be one of none, linear" "" ${_fp32} lr_scaling=sqrt)
tessera_cli_test(wrap_without_fsdp 2 "wrap_blocks=none: FSDP units exist under ShardGradOp, FullShard and HybridShard only"
  "" ${_fp32} wrap_blocks=none metrics=out.jsonl)
tessera_cli_test(wrap_unknown_block 2 "wrap_blocks=GPT2Block: 'GPT2Block' is no block type or module of llama"
  "" $<TARGET_FILE:llama-fsdp-fp32> wrap_blocks=GPT2Block metrics=out.jsonl)
tessera_cli_test(checkpoint_blocks_unknown 2 "checkpoint_blocks=OPTDecoderLayer: 'OPTDecoderLayer' is no block type of llama"
  "" $<TARGET_FILE:llama-fp32-ckpt> checkpoint_blocks=OPTDecoderLayer metrics=out.jsonl)
if(NOT TESSERA_WITH_CUDA)
  tessera_cli_test(cuda_absent 2 "device=cuda" "" ${_fp32} device=cuda)
endif()
tessera_cli_test(tokens_too_short 2 "one micro-step needs" "${_model} && ${_fixture} tokens t.bin 20"
  ${_fp32} model_dir=m data=t.bin batch_size=2 seq_len=16 metrics=out.jsonl)
tessera_cli_test(token_beyond_vocab 2 "vocab_size is 256" "${_model} && head -c 4000 /dev/zero | tr '\\0' '\\377' > t.bin"
  ${_fp32} model_dir=m data=t.bin batch_size=2 seq_len=16 metrics=out.jsonl)
tessera_cli_test(truncated_checkpoint 1 "model.safetensors"
  "${_model} && truncate -s 5000 m/model.safetensors && ${_fixture} tokens t.bin 4000"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl save_dir=saved)
tessera_cli_test(corrupt_header 1 "model.safetensors"
  "${_model} && printf 'XXXXXXXX' | dd of=m/model.safetensors bs=1 seek=8 conv=notrunc 2>/dev/null && ${_fixture} tokens t.bin 4000"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)
tessera_cli_test(missing_weights 1 "model.safetensors"
  "${_model} && rm m/model.safetensors && ${_fixture} tokens t.bin 4000"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)
tessera_cli_test(config_mismatch 1 "hidden_size|shape"
  "${_model} && sed -i 's/\"intermediate_size\": 64/\"intermediate_size\": 96/' m/config.json && ${_fixture} tokens t.bin 4000"
  ${_fp32} model_dir=m data=t.bin ${_small} metrics=out.jsonl)
tessera_cli_test(save_dir_not_empty 2 "save_dir=saved: exists"
  "${_model} && ${_fixture} tokens t.bin 4000 && mkdir saved && touch saved/keep"
  ${_fp32} model_dir=m data=t.bin ${_small} save_dir=saved)

# A good run writes its metrics and weights; the written directory loads again.
add_test(NAME cli.train_save_reload COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_fixture} model m; ${_fixture} tokens t.bin 4000;
   ${_fp32} model_dir=m data=t.bin ${_small_text} metrics=a.jsonl save_dir=s1 >/dev/null;
   test -f a.jsonl && test -f s1/config.json && test -f s1/model.safetensors;
   grep -q '\"event\":\"done\"' a.jsonl;
   ${_fp32} model_dir=s1 data=t.bin ${_small_text} save_dir=s2 >/dev/null; test -f s2/model.safetensors")
set_tests_properties(cli.train_save_reload PROPERTIES LABELS cli TIMEOUT 180)
# A hub id in a hub cache laid out as huggingface_hub writes one (snapshots/HASH/ files linked into blobs/,
# refs/main naming HASH): the run trains from the snapshot, which its table shows as model_dir, and saves.
add_test(NAME cli.train_from_hub_id COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_fixture} model m; ${_fixture} tokens t.bin 4000;
   h=hub/models--org--tiny; c=0123456789abcdef0123456789abcdef01234567; mkdir -p $h/blobs $h/refs $h/snapshots/$c;
   for f in m/*; do b=$(sha1sum $f | cut -c1-40); mv $f $h/blobs/$b;
     ln -s ../../blobs/$b $h/snapshots/$c/$(basename $f); done; printf %s $c > $h/refs/main;
   HF_HUB_CACHE=hub ${_fp32} model_dir=org/tiny data=t.bin ${_small_text} save_dir=s1 > out.txt;
   grep -q \"model_dir .*/hub/models--org--tiny/snapshots/$c\" out.txt; test -f s1/model.safetensors")
set_tests_properties(cli.train_from_hub_id PROPERTIES LABELS cli TIMEOUT 180)

# The memory savers' examples: each runs, and its phase table shows what it saves (offload: host figures).
foreach(example llama-sgd-bf16true llama-adam8bit-bf16true llama-adam8bit-bf16true-ckpt llama-lora-fp32
                llama-qlora-fp32 llama-qlora-bf16mixed)
  add_test(NAME cli.runs.${example} COMMAND bash -c
    "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_fixture} model m; ${_fixture} tokens t.bin 4000;
     $<TARGET_FILE:${example}> model_dir=m data=t.bin ${_small_text} metrics=a.jsonl > out.txt;
     grep -q 'after_opt\\] Params' out.txt; grep -q '\"event\":\"done\"' a.jsonl")
  set_tests_properties(cli.runs.${example} PROPERTIES LABELS cli TIMEOUT 180)
endforeach()
foreach(example llama-offload-bf16true llama-zero2-offload-bf16true llama-fsdp-offload-bf16true
                llama-fsdp-offload-params-bf16true)
  add_test(NAME cli.runs.${example} COMMAND bash -c
    "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_fixture} model m; ${_fixture} tokens t.bin 4000;
     $<TARGET_FILE:${example}> model_dir=m data=t.bin ${_small_text} metrics=a.jsonl > out.txt;
     grep -q 'after_opt\\] Params .* Optim device 0.00 GiB | Optim CPU 0.00 GiB' out.txt; grep -q '\"optim_cpu\":[1-9]' a.jsonl")
  set_tests_properties(cli.runs.${example} PROPERTIES LABELS cli TIMEOUT 180)
endforeach()

set(_lora $<TARGET_FILE:llama-lora-fp32>)
tessera_cli_test(lora_bad_rank 2 "lora_r=0: " "" ${_lora} lora_r=0)
tessera_cli_test(lora_bad_dropout 2 "lora_dropout=1: " "" ${_lora} lora_dropout=1)
tessera_cli_test(lora_unknown_target 2 "lora_targets: 'qkv' names no linear" "" ${_lora} ${_small} lora_targets=q_proj,qkv)
tessera_cli_test(lora_missing_adapter 2 "adapter=/nonexistent: not a PEFT adapter dir" "" ${_lora} adapter=/nonexistent)
tessera_cli_test(lora_adapter_not_lora 1 "only LORA adapters"
  "mkdir ad && echo '{\"peft_type\":\"IA3\"}' > ad/adapter_config.json" ${_lora} ${_small} adapter=ad)
tessera_cli_test(lora_adapter_contradicted 2 "lora_r=4: contradicts adapter=ad"
  "mkdir ad && echo '{\"peft_type\":\"LORA\",\"r\":8,\"lora_alpha\":16,\"target_modules\":[\"q_proj\"]}' > ad/adapter_config.json"
  ${_lora} ${_small} adapter=ad lora_r=4)
tessera_cli_test(lora_adapter_truncated 1 "adapter_model.safetensors"
  "${_model} && ${_fixture} tokens t.bin 4000 && ${_lora} model_dir=m data=t.bin ${_small_text} save_dir=ad >/dev/null && truncate -s 100 ad/adapter_model.safetensors"
  ${_lora} model_dir=m data=t.bin ${_small} adapter=ad save_dir=out)

# LoRA: save the adapters, resume from them, merge them into a model directory that llama-fp32 loads.
add_test(NAME cli.lora_save_resume_merge COMMAND bash -c
  "set -e; d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${_fixture} model m; ${_fixture} tokens t.bin 4000;
   ${_lora} model_dir=m data=t.bin ${_small_text} lora_r=4 save_dir=a1 >/dev/null;
   test -f a1/adapter_config.json && test -f a1/adapter_model.safetensors;
   ${_lora} model_dir=m data=t.bin ${_small_text} adapter=a1 save_dir=a2 > out.txt; grep -q 'from a1' out.txt;
   ${_lora} model_dir=m data=t.bin ${_small_text} adapter=a2 merge_adapter=true save_dir=merged >/dev/null;
   test -f merged/config.json && test -f merged/model.safetensors;
   ${_fp32} model_dir=merged data=t.bin ${_small_text} >/dev/null")
set_tests_properties(cli.lora_save_resume_merge PROPERTIES LABELS cli TIMEOUT 180)
