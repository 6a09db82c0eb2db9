// text_rows_dump: an instruction file through tessera's text reader and TokenBatches, for
// tests/reference/check_text_data.py to compare with litgpt.
//   text_rows_dump DATA TOKENIZER SEQ_LEN MASK_PROMPT OUT.jsonl [key=value...]
// DATA may be a table (data/table_source.hpp), read in TableRows' order under the run-config keys given
// (val_split_fraction=0.05 seed=42: litgpt's Alpaca2k).
// OUT.jsonl gets one {"inputs": [...], "targets": [...]} line per record, in the file's order: the row TokenBatches
// gives (batch_size 1, one rank: step r reads record r), seq_len ids and targets (-100 where none).
// Exit 2 on bad arguments, 1 with the message when a file cannot be read or is refused.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tessera/config/run_config.hpp"
#include "tessera/data/table_rows.hpp"
#include "tessera/data/text_data.hpp"
#include "tessera/data/token_batches.hpp"
#include "tessera/text/tokenizer.hpp"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s DATA TOKENIZER SEQ_LEN MASK_PROMPT(0|1) OUT.jsonl [key=value...]\n", argv[0]);
    return 2;
  }
  try {
    tessera::RunConfig cfg;
    cfg.data = argv[1];
    cfg.tokenizer = argv[2];
    cfg.seq_len = std::stoll(argv[3]);
    cfg.mask_prompt = std::string(argv[4]) == "1";
    cfg.batch_size = 1;
    for (int a = 6; a < argc; ++a) {
      const std::string_view kv = argv[a];
      const auto eq = kv.find('=');
      if (eq == std::string_view::npos) throw std::runtime_error(std::string(kv) + ": key=value expected");
      tessera::set_field(cfg, kv.substr(0, eq), kv.substr(eq + 1));
    }
    const auto tokenizer = tessera::text::Tokenizer::load(cfg.tokenizer);
    const auto rows = tessera::data::TableSource::recognizes(cfg.data)
                          ? tessera::data::read_table_text_rows(tessera::data::TableRows::open(cfg), cfg.text_column,
                                                                tokenizer)
                          : tessera::data::read_text_rows(cfg.data, tokenizer);
    const tessera::data::TokenBatches batches(cfg, tessera::models::TokenSpec{tokenizer.vocab_size()}, 1);
    std::ofstream out(argv[5]);
    for (std::int64_t r = 0; r < rows.rows(); ++r) {
      const auto b = batches.batch(r, 0, 0, c10::Device(c10::kCPU));
      const at::Tensor in = b.inputs[0].contiguous(), tg = b.targets[0].contiguous();
      nlohmann::json line;
      line["inputs"] = std::vector<std::int64_t>(in.data_ptr<std::int64_t>(), in.data_ptr<std::int64_t>() + in.numel());
      line["targets"] = std::vector<std::int64_t>(tg.data_ptr<std::int64_t>(), tg.data_ptr<std::int64_t>() + tg.numel());
      out << line.dump() << '\n';
    }
    if (!out) throw std::runtime_error(std::string(argv[5]) + ": cannot write it");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
