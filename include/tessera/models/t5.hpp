#pragma once
// defines: tessera::models::T5, the encoder-decoder family with Hugging Face T5ForConditionalGeneration semantics
// (v1.1 and Flan-T5; the original T5's ReLU feed-forward and tied, rescaled head too): RMS layer norm (no mean, no
// bias, eps 1e-6) before each sub-layer, attention without biases or 1/sqrt(d) scaling whose scores add a relative
// position bias (bucketed: bidirectional in the encoder, causal in the decoder; one table per stack, in its first
// block, read by every block of the stack), decoder blocks that cross-attend to the encoder's output, gated-GELU
// feed-forward (wi_0, wi_1, wo), a final RMS norm per stack, lm_head, and the mean cross-entropy over the labels
// that are not -100. The decoder's inputs are the labels shifted right behind decoder_start_token_id. No dropout.
//
// Shapes: inputs (B, S) -> shared (B, S, d_model) -> encoder (B, S, d_model); labels (B, L) -> shifted (B, L)
//         -> shared -> decoder (B, L, d_model) -> logits (B, L, vocab_size).
#include <ATen/core/Tensor.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

#include "tessera/core/param_spec.hpp"
#include "tessera/models/family_parts.hpp"
#include "tessera/models/model_family.hpp"
#include "tessera/models/t5_config.hpp"

namespace tessera::models {

struct T5 {
  using family = model_family_tag;
  using Config = T5Config;
  using Batch = Seq2SeqBatch;
  static constexpr std::string_view name = "t5";
  // lora_targets=auto: PEFT's default target_modules for this architecture.
  static constexpr std::string_view lora_targets = "q,v";

  // The relative-position buckets of a seq_len x seq_len score matrix (query row, key column), built once per run;
  // shorter batches read its top-left corner (a bucket depends only on key - query).
  struct Context {
    at::Tensor encoder_buckets;  // (seq_len, seq_len) int64, bidirectional
    at::Tensor decoder_buckets;  // (seq_len, seq_len) int64, causal
  };

  // Shapes: a named preset, or a Hugging Face config.json (and back).
  static Config preset(std::string_view preset_name) { return t5_preset(preset_name); }
  static std::span<const std::string_view> preset_names() { return t5_preset_names(); }
  static Config read_config(const std::filesystem::path& config_json) { return read_t5_config(config_json); }
  static void write_config(const std::filesystem::path& config_json, const Config& config, std::string_view dtype) {
    write_t5_config(config_json, config, dtype);
  }
  static Seq2SeqSpec data_spec(const Config& config) { return Seq2SeqSpec{config.vocab_size, config.pad_token_id}; }

  // Units, E encoder and D decoder blocks:
  //   0            shared (the token embedding both stacks read; lm_head too when tied)
  //   1            the encoder's relative_attention_bias table (HF keeps it in encoder.block.0)
  //   2 .. E+1     encoder T5Block blocks
  //   E+2          encoder.final_layer_norm
  //   E+3          the decoder's relative_attention_bias table
  //   E+4 .. E+D+3 decoder T5Block blocks
  //   E+D+4        the head: decoder.final_layer_norm (and an untied lm_head)
  // The tables are units of their own so that a block's call reads its own unit alone: under FullShard with T5Block
  // wrapped they belong to the root, with shared and the norms.
  static std::vector<ParamSpec> parameters(const Config& config);
  static std::vector<UnitInfo> units(const Config& config);
  // Calls, in forward order, one per unit and shared read twice: encoder embedding, encoder bias, encoder blocks,
  // encoder final norm, decoder embedding, decoder bias, decoder blocks, the loss head (reading shared too when
  // tied).
  static std::vector<CallInfo> calls(const Config& config);
  static Context make_context(const Config& config, std::int64_t seq_len, c10::ScalarType compute_dtype,
                              c10::Device device);

  // Calls and their inputs:
  //   embedding          {ids (B, N)} -> (B, N, d_model); the encoder's also {ids (B, T), prefix (B, P, d_model)}
  //                      -> [prefix; shared(ids)] (B, P + T, d_model)
  //   encoder bias       {attention_mask (B, S)} -> (B, heads, S, S): the table's bias, padded keys at the dtype's min
  //   encoder block      {x, bias} -> x
  //   encoder final norm {x} -> the encoder's output
  //   decoder bias       {decoder ids (B, L)} -> (1, heads, L, L): the table's bias, later keys at the dtype's min
  //   decoder block      {y, bias, encoder output, attention_mask} -> y
  //   head               {y, labels (B, L)} -> mean cross-entropy over labels != -100, fp32 scalar
  static at::Tensor compute(const Config& config, const Context& ctx, std::size_t call, const CallWeights& w,
                            std::span<const at::Tensor> inputs);
  static at::Tensor forward(const Config& config, CallRunner& run, const Batch& batch);
  // The same program with the encoder's inputs behind a prefix of embeddings (BLIP-2): the encoder reads
  // [prefix; shared(input_ids)] under the mask [1..1; attention_mask], the decoder the labels (see PrefixedTokens).
  static at::Tensor forward(const Config& config, CallRunner& run, const PrefixedTokens& tokens);

  // The decoder's inputs: labels shifted right by one, decoder_start_token_id first, -100 replaced by pad_token_id
  // (T5PreTrainedModel._shift_right).
  static at::Tensor shift_right(const Config& config, const at::Tensor& labels);
  // T5Attention._relative_position_bucket of key - query for a q_len x k_len matrix, (q_len, k_len) int64.
  static at::Tensor position_buckets(const Config& config, std::int64_t q_len, std::int64_t k_len, bool bidirectional,
                                     c10::Device device);
};

}  // namespace tessera::models
