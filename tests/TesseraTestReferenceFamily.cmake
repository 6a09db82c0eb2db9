# The model families against Hugging Face transformers, one forward and backward on the same weights and tokens
# (check_family_forward.py): family_dump (models/family_dump.cpp) runs a family's program on plain tensors and
# saves its weights as a Hugging Face directory; AutoModelForCausalLM.from_pretrained loads it and must give the
# loss within 1e-5 relative and every parameter's gradient within 1e-5 of that tensor's max |gradient|. Label
# reference. tests/CMakeLists.txt includes it only when TESSERA_PYTHON imports torch, and sets the Llama config _gqa.
execute_process(COMMAND ${TESSERA_PYTHON} -c "import transformers, safetensors" RESULT_VARIABLE _no_transformers
                OUTPUT_QUIET ERROR_QUIET)
if(_no_transformers)
  message(STATUS "tessera: ${TESSERA_PYTHON} cannot import transformers; the model family cross-checks are not "
                 "registered")
  return()
endif()

add_executable(family_dump models/family_dump.cpp)
target_link_libraries(family_dump PRIVATE tessera::tessera)
target_include_directories(family_dump PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
tessera_use_pch(family_dump)

# OPT's head layouts: pre-LN tied (final_layer_norm, lm_head = embed_tokens); post-LN with project_in/project_out
# around a narrower embedding (opt-350m's shape); pre-LN untied with projections (final_layer_norm, project_out and
# lm_head); post-LN tied without projections (no head unit: the head reads embed_tokens alone).
set(_opt "\"vocab_size\":512,\"hidden_size\":64,\"ffn_dim\":172,\"num_hidden_layers\":3,\"num_attention_heads\":4,\"max_position_embeddings\":32")
set(_opt_preln "{${_opt}}")
set(_opt_postln_proj "{${_opt},\"word_embed_proj_dim\":32,\"do_layer_norm_before\":false}")
set(_opt_untied "{${_opt},\"word_embed_proj_dim\":48,\"tie_word_embeddings\":false}")
set(_opt_postln "{${_opt},\"do_layer_norm_before\":false}")

set(_check_family ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_family_forward.py"
    $<TARGET_FILE:family_dump>)
tessera_reference_case(reference.family_forward_llama COMMAND ${_check_family} --family llama --config ${_gqa})
tessera_reference_case(reference.family_forward_opt_preln COMMAND ${_check_family} --family opt --config ${_opt_preln})
tessera_reference_case(reference.family_forward_opt_postln_proj
  COMMAND ${_check_family} --family opt --config ${_opt_postln_proj})
tessera_reference_case(reference.family_forward_opt_untied COMMAND ${_check_family} --family opt --config ${_opt_untied})
tessera_reference_case(reference.family_forward_opt_postln COMMAND ${_check_family} --family opt --config ${_opt_postln})
# T5: Flan-T5's layout (gated-gelu, untied lm_head, no output scaling) with more decoder than encoder blocks, and the
# original T5's (relu, lm_head tied to shared, decoder output scaled by d_model^-0.5); 8 buckets up to distance 20, so
# that the 16 positions reach the log-spaced buckets. One input row padded, one label row ended by -100.
set(_t5 "\"vocab_size\":300,\"d_model\":32,\"d_kv\":8,\"d_ff\":72,\"num_layers\":2,\"num_heads\":4,\"relative_attention_num_buckets\":8,\"relative_attention_max_distance\":20")
set(_t5_flan "{${_t5},\"num_decoder_layers\":3,\"feed_forward_proj\":\"gated-gelu\",\"tie_word_embeddings\":false}")
set(_t5_original "{${_t5},\"feed_forward_proj\":\"relu\"}")
tessera_reference_case(reference.family_forward_t5_flan COMMAND ${_check_family} --family t5 --config ${_t5_flan})
tessera_reference_case(reference.family_forward_t5_original COMMAND ${_check_family} --family t5 --config ${_t5_original})
tessera_reference_case(reference.family_forward_t5_negative_control
  COMMAND ${_check_family} --family t5 --config ${_t5_flan} --perturb --expect-mismatch)
# BLIP-2: a 2-layer vision model (16x16 images in 8x8 patches), a 3-layer Q-Former (cross-attention in layers 0 and
# 2), 4 queries, over a 2-block OPT and over a Flan-T5 layout; the loss is labels=input_ids with the image tokens.
set(_blip2_parts "\"vision_config\":{\"hidden_size\":32,\"intermediate_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"image_size\":16,\"patch_size\":8},\"qformer_config\":{\"hidden_size\":24,\"num_hidden_layers\":3,\"num_attention_heads\":4,\"intermediate_size\":40,\"cross_attention_frequency\":2},\"num_query_tokens\":4,\"image_token_index\":299")
set(_blip2_opt "{${_blip2_parts},\"text_config\":{\"model_type\":\"opt\",\"vocab_size\":300,\"hidden_size\":32,\"ffn_dim\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"max_position_embeddings\":64,\"word_embed_proj_dim\":32}}")
set(_blip2_t5 "{${_blip2_parts},\"text_config\":{\"model_type\":\"t5\",${_t5},\"num_decoder_layers\":3,\"feed_forward_proj\":\"gated-gelu\",\"tie_word_embeddings\":false}}")
tessera_reference_case(reference.family_forward_blip2_opt COMMAND ${_check_family} --family blip2-opt --config ${_blip2_opt})
tessera_reference_case(reference.family_forward_blip2_t5 COMMAND ${_check_family} --family blip2-t5 --config ${_blip2_t5})
tessera_reference_case(reference.family_forward_blip2_negative_control
  COMMAND ${_check_family} --family blip2-opt --config ${_blip2_opt} --perturb --expect-mismatch)
# ViT: 32x32 images in 8x8 patches (17 positions), 5 classes.
set(_vit "{\"hidden_size\":64,\"num_hidden_layers\":2,\"num_attention_heads\":4,\"intermediate_size\":128,\"image_size\":32,\"patch_size\":8,\"num_labels\":5}")
tessera_reference_case(reference.family_forward_vit COMMAND ${_check_family} --family vit --config ${_vit})
tessera_reference_case(reference.family_forward_vit_negative_control
  COMMAND ${_check_family} --family vit --config ${_vit} --perturb --expect-mismatch)
# ViT with its image data against ViTForImageClassification and ViTImageProcessor on PNG files
# (check_vit_against_transformers.py): the prepared pixels (of the model's size, resized bilinear and bicubic), and
# 20 AdamW steps step by step with the saved directory read back; the negative control trains with another
# weight_decay than the reference.
add_executable(image_dump data/image_dump.cpp)
target_link_libraries(image_dump PRIVATE tessera::tessera)
target_include_directories(image_dump PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
tessera_use_pch(image_dump)
set(_check_vit ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_vit_against_transformers.py")
tessera_reference_case(reference.vit_pixels COMMAND ${_check_vit} $<TARGET_FILE:image_dump> --mode pixels)
# BLIP-2's images (CaptionBatches with the family's defaults) against BlipImageProcessor: 45x37 and 20x28 PNGs
# resized to 32x32 (bicubic, antialiased), 1/255, CLIP mean and std.
set(_check_blip2_pixels ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_blip2_against_transformers.py"
    $<TARGET_FILE:image_dump> --lm opt --mode pixels)
tessera_reference_case(reference.blip2_pixels_downscaled COMMAND ${_check_blip2_pixels} --image-size 45x37)
tessera_reference_case(reference.blip2_pixels_upscaled COMMAND ${_check_blip2_pixels} --image-size 20x28)
tessera_reference_case(reference.vit_pixels_resized_bilinear
  COMMAND ${_check_vit} $<TARGET_FILE:image_dump> --mode pixels --resize --resample 2)
tessera_reference_case(reference.vit_pixels_resized_bicubic
  COMMAND ${_check_vit} $<TARGET_FILE:image_dump> --mode pixels --resize --resample 3)
if(TESSERA_BUILD_EXAMPLES)
  tessera_reference_case(reference.vit_fp32 COMMAND ${_check_vit} $<TARGET_FILE:vit-fp32> --mode train)
  tessera_reference_case(reference.vit_negative_control
    COMMAND ${_check_vit} $<TARGET_FILE:vit-fp32> --mode train --steps 4 --tessera-extra weight_decay=0.5
            --expect-mismatch)
  # T5 with its pairs.jsonl data against T5ForConditionalGeneration (check_t5_against_transformers.py): a Flan-T5
  # layout (untied lm_head, 2 encoder and 3 decoder blocks) saved by transformers, 24 pairs of random lengths padded
  # per batch; 20 AdamW steps step by step with the saved directory read back by from_pretrained (weights within
  # 1e-4, losses within 1e-5); the same from a sharded dir (model.safetensors.index.json); the negative control
  # trains with another weight_decay than the reference.
  set(_check_t5 ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_t5_against_transformers.py")
  tessera_reference_case(reference.t5_fp32 COMMAND ${_check_t5} $<TARGET_FILE:t5-fp32> --mode train)
  tessera_reference_case(reference.t5_fp32_sharded_dir
    COMMAND ${_check_t5} $<TARGET_FILE:t5-fp32> --mode train --sharded --steps 5)
  tessera_reference_case(reference.t5_negative_control
    COMMAND ${_check_t5} $<TARGET_FILE:t5-fp32> --mode train --steps 4 --tessera-extra weight_decay=0.5
            --expect-mismatch)
  # BLIP-2 over OPT and over Flan-T5 with its captions.jsonl data against Blip2ForConditionalGeneration
  # (check_blip2_against_transformers.py): a small BLIP-2 saved by transformers with every parameter random, 24
  # captioned 32x32 PNGs, transformers given what Blip2Processor gives (4 image tokens before each caption,
  # labels=input_ids as the labs pass them); 20 AdamW steps step by step, the saved directory read back by
  # from_pretrained (weights within 1e-4, losses within 1e-5); the T5 one from a sharded dir; the usual recipe's
  # freeze=vision_model,language_model on both sides (the frozen tensors come back unchanged); the negative control
  # trains with another weight_decay than the reference.
  set(_check_blip2 ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_blip2_against_transformers.py")
  tessera_reference_case(reference.blip2_opt_fp32 COMMAND ${_check_blip2} $<TARGET_FILE:blip2-opt-fp32> --lm opt)
  tessera_reference_case(reference.blip2_t5_fp32_sharded_dir
    COMMAND ${_check_blip2} $<TARGET_FILE:blip2-t5-fp32> --lm t5 --sharded)
  tessera_reference_case(reference.blip2_opt_fp32_frozen
    COMMAND ${_check_blip2} $<TARGET_FILE:blip2-opt-fp32> --lm opt --steps 8 --freeze vision_model,language_model)
  tessera_reference_case(reference.blip2_negative_control
    COMMAND ${_check_blip2} $<TARGET_FILE:blip2-t5-fp32> --lm t5 --steps 4 --tessera-extra weight_decay=0.5
            --expect-mismatch)
  # LoRA on BLIP-2 with Flan-T5 from a PEFT adapter dir (q, v: the T5's attention only), blip2-t5-lora-fp32 and PEFT
  # trained on the same batches for 10 steps; losses and the saved adapters within 1e-4.
  execute_process(COMMAND ${TESSERA_PYTHON} -c "import peft" RESULT_VARIABLE _no_peft_blip2 OUTPUT_QUIET ERROR_QUIET)
  if(NOT _no_peft_blip2)
    tessera_reference_case(reference.blip2_t5_lora_from_peft_dir
      COMMAND ${_check_blip2} $<TARGET_FILE:blip2-t5-lora-fp32> --lm t5 --mode lora --steps 10)
  endif()
  # LoRA on T5 from a PEFT adapter dir (q, v: self- and cross-attention by PEFT's suffix rule), t5-lora-fp32 and
  # PEFT trained on the same batches for 10 steps; losses, tessera's saved PEFT dir (config, tensors, logits) within
  # 1e-4 relative.
  execute_process(COMMAND ${TESSERA_PYTHON} -c "import peft" RESULT_VARIABLE _no_peft_t5 OUTPUT_QUIET ERROR_QUIET)
  if(NOT _no_peft_t5)
    tessera_reference_case(reference.t5_lora_from_peft_dir
      COMMAND ${_check_t5} $<TARGET_FILE:t5-lora-fp32> --mode lora --steps 10)
  else()
    message(STATUS "tessera: ${TESSERA_PYTHON} cannot import peft; the T5 LoRA cross-check is not registered")
  endif()
endif()
# Negative control: tessera computes with one bias 1% larger than the one it saved; the check must see it. The script
# exits 0 only when family_dump ran and the comparison failed, so no WILL_FAIL here.
tessera_reference_case(reference.family_forward_negative_control
  COMMAND ${_check_family} --family opt --config ${_opt_preln} --perturb --expect-mismatch)
