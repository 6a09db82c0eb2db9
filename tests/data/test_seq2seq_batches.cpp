// tests: tessera::data::Seq2SeqBatches: the synthetic copy task (deterministic, labels the first half of the inputs,
// the same rows for any world size), pairs.jsonl rows of different lengths padded per batch (pad id, mask, -100),
// the row order, tokens_per_step, and the refusals of bad pairs with the file, the line and the fix.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

#include "../text/text_fixtures.hpp"
#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/data_for.hpp"
#include "tessera/data/seq2seq_batches.hpp"
#include "tessera/text/tokenizer.hpp"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

models::Seq2SeqSpec spec(std::int64_t vocab = 100, std::int64_t pad = 0) {
  models::Seq2SeqSpec s;
  s.vocab_size = vocab;
  s.pad_token_id = pad;
  return s;
}

RunConfig run(std::int64_t batch, const std::string& data = "", std::int64_t seq_len = 8) {
  RunConfig cfg;
  cfg.batch_size = batch;
  cfg.data = data;
  cfg.seq_len = seq_len;
  cfg.max_steps = 2;
  return cfg;
}

std::vector<std::int64_t> ids(const at::Tensor& row) {
  const at::Tensor c = row.contiguous();
  return {c.data_ptr<std::int64_t>(), c.data_ptr<std::int64_t>() + c.numel()};
}

}  // namespace

static_assert(std::is_same_v<data::DataFor<models::Seq2SeqBatch>::type, data::Seq2SeqBatches>);

TEST_CASE("Seq2SeqBatches synthetic: a deterministic copy task, the same rows for any world size",
          "[data][seq2seq_batches]") {
  const data::Seq2SeqBatches one(run(4), spec(), 1), two(run(2), spec(), 2);
  CHECK(one.size() == 512);
  CHECK(std::string(one.description()) == "synthetic copy task (512 pairs, 8 -> 4 tokens, seed 42)");
  CHECK(one.tokens_per_step() == 4 * (8 + 4));
  CHECK(two.tokens_per_step() == 2 * 2 * (8 + 4));
  const models::Seq2SeqBatch all = one.batch(1, 0, 0, c10::Device("cpu"));
  CHECK(all.inputs.sizes() == at::IntArrayRef({4, 8}));
  CHECK(all.labels.sizes() == at::IntArrayRef({4, 4}));
  CHECK(all.inputs.scalar_type() == at::kLong);
  CHECK(all.attention_mask.scalar_type() == at::kLong);
  CHECK(all.labels.scalar_type() == at::kLong);
  CHECK(all.attention_mask.eq(1).all().item<bool>());  // synthetic rows are all seq_len long
  // Step 1 reads rows 4..7; the labels are the first half of the inputs; ids avoid pad (0) and eos (1).
  for (std::int64_t i = 0; i < 4; ++i) {
    CHECK(ids(all.inputs[i]) == one.input_ids(4 + i));
    CHECK(ids(all.labels[i]) == one.labels(4 + i));
  }
  CHECK(at::equal(all.labels, all.inputs.narrow(1, 0, 4)));
  CHECK(all.inputs.min().item<std::int64_t>() >= 2);
  CHECK(all.inputs.max().item<std::int64_t>() < 100);
  for (std::int64_t r = 0; r < 2; ++r) {  // rank r's two rows are rows 2r, 2r+1 of the 4-row micro-batch
    const models::Seq2SeqBatch part = two.batch(1, 0, r, c10::Device("cpu"));
    CHECK(at::equal(part.inputs, all.inputs.narrow(0, 2 * r, 2)));
    CHECK(at::equal(part.attention_mask, all.attention_mask.narrow(0, 2 * r, 2)));
    CHECK(at::equal(part.labels, all.labels.narrow(0, 2 * r, 2)));
  }
  CHECK(at::equal(one.batch(1, 0, 0, c10::Device("cpu")).inputs, all.inputs));  // the same twice
  CHECK(data::Seq2SeqBatches(run(4), spec(), 1).input_ids(300) == one.input_ids(300));  // the same when rebuilt
  CHECK(one.input_ids(0) != one.input_ids(1));
  // The rows do not depend on num_train_samples either: the first rows of a smaller set are the same rows.
  RunConfig fewer = run(4);
  fewer.num_train_samples = 16;
  const data::Seq2SeqBatches small(fewer, spec(), 1);
  CHECK(small.size() == 16);
  CHECK(small.input_ids(15) == one.input_ids(15));
  // Another seed, other rows; an odd seq_len halves down, and seq_len 1 still has one label.
  RunConfig reseeded = run(4);
  reseeded.seed = 7;
  CHECK(data::Seq2SeqBatches(reseeded, spec(), 1).input_ids(0) != one.input_ids(0));
  CHECK(data::Seq2SeqBatches(run(4, "", 7), spec(), 1).labels(0).size() == 3);
  CHECK(data::Seq2SeqBatches(run(4, "", 1), spec(), 1).labels(0).size() == 1);
  // A vocabulary of two ids has no room for pad and eos to be avoided: ids in [0, 2).
  const data::Seq2SeqBatches tiny(run(4), spec(2), 1);
  for (std::int64_t id : tiny.input_ids(0)) CHECK((id == 0 || id == 1));
}

TEST_CASE("Seq2SeqBatches: pairs.jsonl rows padded to the longest of their batch", "[data][seq2seq_batches]") {
  const fs::path dir = testing::fresh_dir("seq2seq");
  std::ofstream(dir / "pairs.jsonl") << R"({"input_ids": [5, 6, 7], "labels": [8, 1]})" << "\n\n"
                                     << R"({"input_ids": [9], "labels": [10, 11, -100, 1]})" << "\n"
                                     << R"({"input_ids": [12, 13, 14, 15, 16], "labels": [17]})" << "\r\n"
                                     << R"({"labels": [2], "input_ids": [3, 4]})" << "\n";
  const data::Seq2SeqBatches pairs(run(2, dir.string()), spec(50, 3), 1);
  CHECK(pairs.size() == 4);
  CHECK(std::string(pairs.description()) == "pairs.jsonl in " + dir.string() + " (4 pairs)");
  CHECK(pairs.input_ids(1) == std::vector<std::int64_t>{9});
  CHECK(pairs.labels(1) == std::vector<std::int64_t>{10, 11, -100, 1});
  CHECK(pairs.steps_per_epoch() == 2);
  // (3 + 1 + 5 + 2 inputs + 2 + 4 + 1 + 1 labels) / 4 rows = 4.75 tokens a row, times 2 rows a step: 9.5 -> 10.
  CHECK(pairs.tokens_per_step() == 10);

  // Step 0: rows 0 and 1, padded to 3 inputs (with pad id 3) and 4 labels (with -100).
  const models::Seq2SeqBatch b0 = pairs.batch(0, 0, 0, c10::Device("cpu"));
  CHECK(at::equal(b0.inputs, at::tensor({5, 6, 7, 9, 3, 3}, at::kLong).view({2, 3})));
  CHECK(at::equal(b0.attention_mask, at::tensor({1, 1, 1, 1, 0, 0}, at::kLong).view({2, 3})));
  CHECK(at::equal(b0.labels, at::tensor({8, 1, -100, -100, 10, 11, -100, 1}, at::kLong).view({2, 4})));
  // Step 1: rows 2 and 3, 5 inputs and 1 label: the shapes follow the batch, not the file.
  const models::Seq2SeqBatch b1 = pairs.batch(1, 0, 0, c10::Device("cpu"));
  CHECK(b1.inputs.sizes() == at::IntArrayRef({2, 5}));
  CHECK(at::equal(b1.inputs[1], at::tensor({3, 4, 3, 3, 3}, at::kLong)));
  CHECK(at::equal(b1.attention_mask[1], at::tensor({1, 1, 0, 0, 0}, at::kLong)));
  CHECK(at::equal(b1.labels, at::tensor({17, 2}, at::kLong).view({2, 1})));
  // Step 2 starts the second epoch: rows 0 and 1 again.
  CHECK(at::equal(pairs.batch(2, 0, 0, c10::Device("cpu")).labels, b0.labels));

  // Two ranks of one row read what one rank of two reads, each padded to its own row.
  const data::Seq2SeqBatches ranks(run(1, dir.string()), spec(50, 3), 2);
  const models::Seq2SeqBatch r1 = ranks.batch(0, 0, 1, c10::Device("cpu"));
  CHECK(at::equal(r1.inputs, at::tensor({9}, at::kLong).view({1, 1})));
  CHECK(at::equal(r1.labels, at::tensor({10, 11, -100, 1}, at::kLong).view({1, 4})));

  // data= may name the file itself; num_train_samples and accumulation as for any row data.
  RunConfig file = run(1, (dir / "pairs.jsonl").string());
  file.accumulate_grad_batches = 2;
  file.num_train_samples = 3;
  const data::Seq2SeqBatches direct(file, spec(50, 3), 1);
  CHECK(direct.size() == 4);
  CHECK(direct.steps_per_epoch() == 1);  // floor(3 rows / 1) = 3 micro-batches, 2 per step
  // The rows an epoch reads are rows 0..2: (3 + 1 + 5 + 2 + 4 + 1) / 3 = 5.33 a row, times 2 micro-batches.
  CHECK(direct.tokens_per_step() == 11);
  CHECK(at::equal(direct.batch(0, 1, 0, c10::Device("cpu")).inputs, at::tensor({9}, at::kLong).view({1, 1})));
  CHECK(at::equal(direct.batch(1, 0, 0, c10::Device("cpu")).inputs,  // micro-batch 2: row 2
                  at::tensor({12, 13, 14, 15, 16}, at::kLong).view({1, 5})));
  CHECK(at::equal(direct.batch(1, 1, 0, c10::Device("cpu")).inputs, direct.batch(0, 0, 0, c10::Device("cpu")).inputs));
  fs::remove_all(dir);
}

TEST_CASE("Seq2SeqBatches refuses bad pairs before training, naming the file and line", "[data][seq2seq_batches]") {
  const fs::path dir = testing::fresh_dir("bad-seq2seq");
  const std::string file = (dir / "pairs.jsonl").string();
  const std::string ok = R"({"input_ids": [5, 6], "labels": [7]})";
  auto with_lines = [&](const std::string& text, std::int64_t seq_len = 8) {
    std::ofstream(dir / "pairs.jsonl") << text;
    return data::Seq2SeqBatches(run(1, dir.string(), seq_len), spec(50), 1);
  };
  CHECK_NOTHROW(with_lines(ok + "\n"));
  CHECK_THROWS_WITH(with_lines(ok + "\n[1, 2]\n"), Catch::StartsWith(file + ":2: not a JSON object"));
  CHECK_THROWS_WITH(with_lines(ok + "\n{\"input_ids\": [5\n"), Catch::StartsWith(file + ":2: not a JSON object"));
  CHECK_THROWS_WITH(with_lines("{\"labels\": [7]}\n"), Catch::StartsWith(file + ":1: no \"input_ids\""));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5]}\n"), Catch::StartsWith(file + ":1: no \"labels\""));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": \"5 6\", \"labels\": [7]}\n"),
                    Catch::StartsWith(file + ":1: \"input_ids\" must be an array of token ids, got a string"));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5], \"labels\": 7}\n"),
                    Catch::StartsWith(file + ":1: \"labels\" must be an array of token ids"));
  CHECK_THROWS_WITH(with_lines(ok + "\n{\"input_ids\": [], \"labels\": [7]}\n"),
                    Catch::StartsWith(file + ":2: \"input_ids\" is empty"));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5], \"labels\": []}\n"),
                    Catch::StartsWith(file + ":1: \"labels\" is empty"));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5, 6.5], \"labels\": [7]}\n"),
                    file + ":1: \"input_ids\"[1] must be an integer token id, got 6.5");
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5], \"labels\": [\"7\"]}\n"),
                    file + ":1: \"labels\"[0] must be an integer token id, got \"7\"");
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5, 50], \"labels\": [7]}\n"),
                    file + ":1: \"input_ids\"[1] is 50, not a token id of the model (0 to 49); tokenize with the "
                           "model's own tokenizer");
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [-100], \"labels\": [7]}\n"),
                    Catch::StartsWith(file + ":1: \"input_ids\"[0] is -100, not a token id"));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [18446744073709551615], \"labels\": [7]}\n"),
                    Catch::StartsWith(file + ":1: \"input_ids\"[0] is 18446744073709551615, not a token id"));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5], \"labels\": [7, -1]}\n"),
                    file + ":1: \"labels\"[1] is -1, neither a token id of the model (0 to 49) nor -100 (ignored by "
                           "the loss); tokenize with the model's own tokenizer");
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5], \"labels\": [50]}\n"),
                    Catch::StartsWith(file + ":1: \"labels\"[0] is 50, neither a token id"));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5], \"labels\": [-100, -100]}\n"),
                    Catch::StartsWith(file + ":1: \"labels\" are all -100"));
  CHECK_THROWS_WITH(with_lines(ok + "\n{\"input_ids\": [1, 2, 3, 4, 5], \"labels\": [7]}\n", 4),
                    file + ":2: \"input_ids\" has 5 tokens, more than seq_len=4; raise seq_len or shorten the row");
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5], \"labels\": [1, 2, 3, 4, 5]}\n", 4),
                    file + ":1: \"labels\" has 5 tokens, more than seq_len=4; raise seq_len or shorten the row");
  CHECK_THROWS_WITH(with_lines("{\"input\": \"translate: hello\", \"target\": \"hallo\"}\n"),
                    Catch::StartsWith(file + ":1: a text pair") && Catch::Contains("needs the model's tokenizer") &&
                        Catch::Contains("give token ids"));
  CHECK_THROWS_WITH(with_lines("{\"input\": \"translate: hello\"}\n"),
                    Catch::StartsWith(file + ":1: a text pair needs \"input\" and \"target\""));
  {
    // With the model's tokenizer (a T5-like SentencePiece: EOS appended), text pairs are its ids.
    const fs::path tok_dir = dir / "t5tok";
    fs::create_directories(tok_dir);
    fs::copy_file(testing::text_fixture("sp_unigram/tokenizer.model"), tok_dir / "tokenizer.model");
    std::ofstream(tok_dir / "tokenizer_config.json") << R"({"tokenizer_class": "T5Tokenizer"})";
    const auto tok = text::Tokenizer::load(tok_dir);
    REQUIRE(tok.add_eos_token());
    std::ofstream(dir / "pairs.jsonl") << R"({"input": "translate: hello", "target": "hallo"})" << "\n";
    RunConfig cfg = run(1, dir.string(), 32);
    cfg.tokenizer = tok_dir.string();
    const data::Seq2SeqBatches texts(cfg, spec(tok.vocab_size()), 1);
    const auto b = texts.batch(0, 0, 0, c10::Device(c10::kCPU));
    const at::Tensor in = b.inputs[0].contiguous(), lab = b.labels[0].contiguous();
    CHECK(std::vector<std::int64_t>(in.data_ptr<std::int64_t>(), in.data_ptr<std::int64_t>() + in.numel()) ==
          tok.encode_with_special("translate: hello"));
    CHECK(std::vector<std::int64_t>(lab.data_ptr<std::int64_t>(), lab.data_ptr<std::int64_t>() + lab.numel()) ==
          tok.encode_with_special("hallo"));
  }
  CHECK_THROWS_WITH(with_lines(std::string(100, '[') + "\n"), Catch::StartsWith(file + ":1: nests deeper than"));
  CHECK_THROWS_WITH(with_lines("\n \n"), Catch::Contains(file + " has no rows"));
  std::ofstream(dir / "pairs.jsonl") << ok << "\n";
  CHECK_THROWS_WITH(data::Seq2SeqBatches(run(2, dir.string()), spec(50), 1),
                    Catch::Contains("pairs.jsonl in " + dir.string() + " (1 pairs) has 1 rows but one micro-step needs "
                                    "world_size*batch_size = 1*2 = 2"));
  // A directory without pairs.jsonl, a missing path, a file that is not .jsonl, and a bad pad id.
  fs::create_directories(dir / "empty");
  CHECK_THROWS_WITH(data::Seq2SeqBatches(run(1, (dir / "empty").string()), spec(50), 1),
                    Catch::StartsWith("data=" + (dir / "empty").string() + ": no pairs.jsonl in it") &&
                        Catch::Contains((dir / "empty" / "pairs.jsonl").string()));
  CHECK_THROWS_WITH(data::Seq2SeqBatches(run(1, (dir / "gone").string()), spec(50), 1),
                    Catch::Contains("no such file or directory"));
  std::ofstream(dir / "train.bin") << "tokens";
  CHECK_THROWS_WITH(data::Seq2SeqBatches(run(1, (dir / "train.bin").string()), spec(50), 1),
                    Catch::Contains("sequence-to-sequence models read pairs.jsonl"));
  CHECK_THROWS_WITH(data::Seq2SeqBatches(run(1, dir.string()), spec(50, 50), 1),
                    Catch::Contains("pad_token_id 50 is not a token id"));
  fs::remove_all(dir);
}
