#pragma once
// defines: what the JSONL data readers share (Seq2SeqBatches' pairs.jsonl, CaptionBatches' captions.jsonl):
//   JsonlData        what a reader calls its file, its lines and its models, for the messages
//   jsonl_data_file  data= as DIR/<file> or the .jsonl file itself; ConfigError saying what data= must be
//   TokenIdRules     what a line's token ids must satisfy (vocabulary, seq_len, a reserved id, -100 in labels)
//   read_token_ids   one line's array of token ids under a key, checked; ConfigError naming the line, the key, the
//                    element and the fix
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::data::detail {

struct JsonlData {
  std::string_view file;        // "pairs.jsonl"
  std::string_view line_shape;  // "each line is {...}", quoted in messages
  std::string_view readers;     // "sequence-to-sequence models"
  std::string_view rows;        // "one pair of token ids per line"
};

// data= as `kind.file` in the directory data= names, or data= itself when it is a .jsonl file.
std::filesystem::path jsonl_data_file(const std::string& data, const JsonlData& kind);

struct TokenIdRules {
  std::int64_t vocab_size = 0;
  std::int64_t seq_len = 0;               // the most ids a list may hold
  bool labels = false;                    // -100 allowed (ignored by the loss), but not only -100
  std::int64_t reserved_id = -1;          // an id the model keeps for itself (BLIP-2's image token); -1: none
  std::string_view reserved_why;          // what the reserved id is for, for the message
  std::string_view line_shape;            // quoted when the key is missing or not an array
  std::string_view empty_fix;             // the fix for an empty list
  std::string_view all_ignored_fix;       // the fix for labels that are all -100
};

std::vector<std::int64_t> read_token_ids(const nlohmann::json& line, const char* key, const std::string& where,
                                         const TokenIdRules& rules);

}  // namespace tessera::data::detail
