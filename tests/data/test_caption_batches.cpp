// tests: tessera::data::CaptionBatches: the synthetic captions (deterministic, seq_len long, the same rows for any
// world size, images those of ImageBatches' synthetic set), captions.jsonl rows with
// PNG images (padding; no labels tensor without any row's labels, -100 padding with them), the image processor's
// settings, tokens_per_step, and the refusals of bad rows with data=, the file, the line and the fix.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "../text/text_fixtures.hpp"
#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/caption_batches.hpp"
#include "tessera/data/data_for.hpp"
#include "tessera/data/image_batches.hpp"
#include "tessera/io/image_file.hpp"
#include "tessera/text/tokenizer.hpp"

#include "stb_image_write.hpp"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

// 8x8 RGB images (mean and std 0.5), 4 query positions, a decoder-only language model unless `sequence`.
models::CaptionSpec spec(std::int64_t vocab = 100, std::int64_t pad = 1, bool sequence = false) {
  models::CaptionSpec s;
  s.image.image_size = 8;
  s.image.positions = 5;
  s.vocab_size = vocab;
  s.pad_token_id = pad;
  s.prefix_positions = 4;
  s.labels_are_a_sequence = sequence;
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

at::Tensor longs(std::vector<std::int64_t> values, std::int64_t rows) {
  const auto n = static_cast<std::int64_t>(values.size());
  return at::tensor(values, at::kLong).view({rows, n / rows});
}

// A w x h PNG whose every pixel is (value, value, value).
void write_png(const fs::path& path, int w, int h, unsigned char value) {
  std::vector<unsigned char> px(static_cast<std::size_t>(w * h * 3), value);
  REQUIRE(stbi_write_png(path.c_str(), w, h, 3, px.data(), w * 3));
}

}  // namespace

static_assert(std::is_same_v<data::DataFor<models::CaptionBatch>::type, data::CaptionBatches>);

TEST_CASE("CaptionBatches synthetic: deterministic, padded per batch, the same rows for any world size",
          "[data][caption_batches]") {
  const data::CaptionBatches one(run(4), spec(), 1), two(run(2), spec(), 2);
  CHECK(one.size() == 512);
  CHECK(std::string(one.description()) ==
        "synthetic captions: 512 images 3x8x8 (16 classes), captions of 8 tokens (seed 42)");
  // Captions of seq_len = 8 ids in [2, 100); no row has labels of its own.
  std::set<std::size_t> lengths;
  double total = 0.0;
  for (std::int64_t r = 0; r < one.size(); ++r) {
    const auto& x = one.input_ids(r);
    lengths.insert(x.size());
    total += static_cast<double>(x.size());
    CHECK_FALSE(one.has_labels(r));
    CHECK(one.labels(r).empty());
    CHECK(*std::min_element(x.begin(), x.end()) >= 2);
    CHECK(*std::max_element(x.begin(), x.end()) < 100);
  }
  CHECK((lengths == std::set<std::size_t>{8}));  // one length: no padding, so any split over ranks is one batch
  // Every row is read in an epoch (512 = 128 batches of 4): 4 query positions plus the mean caption.
  const double mean = total / 512.0;
  CHECK(one.tokens_per_step() == std::llround(4 * (4 + mean)));
  CHECK(two.tokens_per_step() == std::llround(2 * 2 * (4 + mean)));
  // An encoder-decoder LM also counts the labels (the inputs here).
  CHECK(data::CaptionBatches(run(4), spec(100, 1, true), 1).tokens_per_step() == std::llround(4 * (4 + 2 * mean)));

  // Each batch is padded to its own longest caption with the pad id (1), its mask 1 over the caption; no row has
  // labels, so the batch's are its padded input ids (caption_targets=caption). Synthetic captions need no padding.
  std::int64_t padded = 0;
  for (std::int64_t step = 0; step < 8; ++step) {
    const models::CaptionBatch b = one.batch(step, 0, 0, c10::Device("cpu"));
    std::size_t longest = 0;
    for (std::int64_t i = 0; i < 4; ++i) longest = std::max(longest, one.input_ids(4 * step + i).size());
    REQUIRE(b.input_ids.sizes() == at::IntArrayRef({4, static_cast<std::int64_t>(longest)}));
    CHECK(b.pixels.sizes() == at::IntArrayRef({4, 3, 8, 8}));
    CHECK(b.pixels.scalar_type() == at::kFloat);
    CHECK(b.input_ids.scalar_type() == at::kLong);
    CHECK(b.attention_mask.scalar_type() == at::kLong);
    CHECK(at::equal(b.labels, b.input_ids));
    for (std::int64_t i = 0; i < 4; ++i) {
      const auto& x = one.input_ids(4 * step + i);
      const auto n = static_cast<std::int64_t>(x.size());
      std::vector<std::int64_t> row = x, mask(x.size(), 1);
      row.resize(longest, 1);
      mask.resize(longest, 0);
      CHECK(ids(b.input_ids[i]) == row);
      CHECK(ids(b.attention_mask[i]) == mask);
      CHECK(at::equal(b.pixels[i], one.image(4 * step + i)));
      padded += static_cast<std::int64_t>(longest) - n;
    }
  }
  CHECK(padded == 0);

  // Rank r of two ranks of two rows reads rows 2r, 2r+1 of one rank's four, each rank padded to its own longest.
  const models::CaptionBatch all = one.batch(1, 0, 0, c10::Device("cpu"));
  for (std::int64_t r = 0; r < 2; ++r) {
    const models::CaptionBatch part = two.batch(1, 0, r, c10::Device("cpu"));
    const std::int64_t t = part.input_ids.size(1);
    const at::Tensor mine = all.input_ids.narrow(0, 2 * r, 2);
    CHECK(at::equal(part.pixels, all.pixels.narrow(0, 2 * r, 2)));
    CHECK(at::equal(part.input_ids, mine.narrow(1, 0, t)));
    CHECK(at::equal(part.attention_mask, all.attention_mask.narrow(0, 2 * r, 2).narrow(1, 0, t)));
    CHECK(at::equal(part.labels, part.input_ids));
    CHECK(mine.narrow(1, t, mine.size(1) - t).eq(1).all().item<bool>());  // only padding beyond the rank's longest
  }
  for (std::int64_t r = 0; r < 512; r += 37) CHECK(two.input_ids(r) == one.input_ids(r));
  CHECK(at::equal(one.batch(1, 0, 0, c10::Device("cpu")).pixels, all.pixels));  // the same twice
  CHECK(data::CaptionBatches(run(4), spec(), 1).input_ids(300) == one.input_ids(300));  // the same when rebuilt
  RunConfig fewer = run(4);
  fewer.num_train_samples = 16;
  CHECK(data::CaptionBatches(fewer, spec(), 1).input_ids(15) == one.input_ids(15));

  // The images are ImageBatches' synthetic images of the rows' classes (16 of them), and a class has one caption:
  // two rows whose captions share their first 4 ids have closer images than two whose captions do not.
  models::ImageSpec sixteen = spec().image;
  sixteen.num_labels = 16;
  const data::ImageBatches images(run(4), sixteen, 1);
  for (std::int64_t r = 0; r < 40; r += 13) CHECK(at::equal(one.image(r), images.image(r)));
  auto head = [&](std::int64_t r) {
    const auto& x = one.input_ids(r);
    return std::vector<std::int64_t>(x.begin(), x.begin() + 4);
  };
  std::int64_t same = -1, other = -1;
  for (std::int64_t r = 1; r < 64 && (same < 0 || other < 0); ++r) {
    if (head(r) == head(0) && same < 0) same = r;
    if (head(r) != head(0) && other < 0) other = r;
  }
  REQUIRE(same > 0);
  REQUIRE(other > 0);
  CHECK(images.label(same) == images.label(0));
  CHECK((one.image(0) - one.image(same)).abs().mean().item<float>() <
        (one.image(0) - one.image(other)).abs().mean().item<float>());
  CHECK(one.input_ids(0) == one.input_ids(same));  // a class has one caption

  // Another seed, other captions and images; seq_len 1 makes one-token captions; a vocabulary of two ids has no
  // room to avoid 0 and 1.
  RunConfig reseeded = run(4);
  reseeded.seed = 7;
  const data::CaptionBatches other_seed(reseeded, spec(), 1);
  CHECK_FALSE(at::equal(other_seed.image(0), one.image(0)));
  CHECK(other_seed.input_ids(0) != one.input_ids(0));
  const data::CaptionBatches single(run(4, "", 1), spec(), 1);
  CHECK(std::string(single.description()).find("captions of 1 tokens") != std::string::npos);
  for (std::int64_t r = 0; r < 32; ++r) CHECK(single.input_ids(r).size() == 1);
  const data::CaptionBatches tiny(run(4), spec(2, 0), 1);
  for (std::int64_t id : tiny.input_ids(0)) CHECK((id == 0 || id == 1));
  // The model's reserved id (BLIP-2's image token) is never in a caption: ids 2 and 3 of 4, 3 reserved, leave 2.
  models::CaptionSpec reserving = spec(4, 0);
  reserving.reserved_token_id = 3;
  const data::CaptionBatches avoided(run(4), reserving, 1);
  for (std::int64_t r = 0; r < 32; ++r)
    for (std::int64_t id : avoided.input_ids(r)) CHECK(id == 2);
}

TEST_CASE("CaptionBatches: captions.jsonl rows with PNG images, labels given or not", "[data][caption_batches]") {
  const fs::path dir = testing::fresh_dir("captions");
  fs::create_directories(dir / "images");
  write_png(dir / "images/a.png", 8, 8, 255);
  write_png(dir / "images/b.png", 12, 10, 0);  // resized to 8 x 8
  write_png(dir / "images/c.png", 8, 8, 128);
  std::ofstream(dir / "captions.jsonl")
      << R"({"image": "images/a.png", "input_ids": [5, 6, 7]})" << "\n\n"
      << R"({"image": "images/b.png", "input_ids": [9]})" << "\n"
      << R"({"image": "images/c.png", "input_ids": [12, 13, 14, 15, 16], "labels": [-100, -100, 14, 15, 16]})"
      << "\r\n"
      << R"({"input_ids": [3, 4], "image": "images/a.png"})" << "\n";
  const data::CaptionBatches captions(run(2, dir.string()), spec(50, 1), 1);
  CHECK(captions.size() == 4);
  CHECK(std::string(captions.description()) == "captions.jsonl in " + dir.string() + " (4 captions)");
  CHECK(captions.input_ids(1) == std::vector<std::int64_t>{9});
  CHECK_FALSE(captions.has_labels(0));
  CHECK(captions.labels(0).empty());
  CHECK(captions.has_labels(2));
  CHECK((captions.labels(2) == std::vector<std::int64_t>{-100, -100, 14, 15, 16}));
  CHECK(captions.image(0).sizes() == at::IntArrayRef({3, 8, 8}));
  CHECK(captions.image(0).min().item<float>() == 1.0f);  // (1 - 0.5) / 0.5
  CHECK(captions.image(1).sizes() == at::IntArrayRef({3, 8, 8}));
  CHECK(captions.image(1).max().item<float>() == -1.0f);
  CHECK(captions.steps_per_epoch() == 2);
  // 4 query positions + (3 + 1 + 5 + 2) / 4 = 2.75 caption tokens a row, times 2 rows a step: 13.5 -> 14.
  CHECK(captions.tokens_per_step() == 14);

  // Step 0: rows 0 and 1, neither with labels: the labels are the padded input ids, pads included
  // (caption_targets=caption), or none with caption_targets=processor (the model then takes the processor's input
  // ids, image tokens and caption, as labels).
  const models::CaptionBatch b0 = captions.batch(0, 0, 0, c10::Device("cpu"));
  CHECK(at::equal(b0.input_ids, longs({5, 6, 7, 9, 1, 1}, 2)));
  CHECK(at::equal(b0.attention_mask, longs({1, 1, 1, 1, 0, 0}, 2)));
  CHECK(at::equal(b0.labels, b0.input_ids));
  RunConfig processor = run(2, dir.string());
  processor.caption_targets = CaptionTargets::processor;
  const models::CaptionBatch p0 = data::CaptionBatches(processor, spec(50, 1), 1).batch(0, 0, 0, c10::Device("cpu"));
  CHECK(at::equal(p0.input_ids, b0.input_ids));
  CHECK_FALSE(p0.labels.defined());
  CHECK(at::equal(b0.pixels, at::stack({captions.image(0), captions.image(1)})));
  // Step 1: row 2 has labels, so the batch's labels are padded with -100, row 3's own input ids included.
  const models::CaptionBatch b1 = captions.batch(1, 0, 0, c10::Device("cpu"));
  CHECK(at::equal(b1.input_ids, longs({12, 13, 14, 15, 16, 3, 4, 1, 1, 1}, 2)));
  CHECK(at::equal(b1.attention_mask, longs({1, 1, 1, 1, 1, 1, 1, 0, 0, 0}, 2)));
  CHECK(at::equal(b1.labels, longs({-100, -100, 14, 15, 16, 3, 4, -100, -100, -100}, 2)));
  // Step 2 starts the second epoch: rows 0 and 1 again.
  CHECK(at::equal(captions.batch(2, 0, 0, c10::Device("cpu")).input_ids, b0.input_ids));

  // A dry run's batch (the meta device): the same shapes, no image decoded.
  const std::int64_t decoded = io::detail::images_decoded();
  const models::CaptionBatch m1 = captions.batch(1, 0, 0, c10::Device("meta"));
  CHECK(io::detail::images_decoded() == decoded);
  CHECK(m1.pixels.is_meta());
  CHECK(m1.pixels.sizes() == b1.pixels.sizes());
  CHECK(m1.pixels.scalar_type() == b1.pixels.scalar_type());
  CHECK(m1.input_ids.sizes() == b1.input_ids.sizes());
  CHECK(m1.labels.sizes() == b1.labels.sizes());

  // Two ranks of one row read what one rank of two reads, each padded to its own row.
  const data::CaptionBatches ranks(run(1, dir.string()), spec(50, 1), 2);
  const models::CaptionBatch r1 = ranks.batch(1, 0, 1, c10::Device("cpu"));  // row 3
  CHECK(at::equal(r1.input_ids, longs({3, 4}, 1)));
  CHECK(at::equal(r1.labels, longs({3, 4}, 1)));
  CHECK(at::equal(r1.pixels[0], captions.image(3)));

  // An encoder-decoder LM: labels a sequence of their own length, which also counts in tokens_per_step; data= may
  // name the file itself.
  std::ofstream(dir / "seq.jsonl") << R"({"image": "images/a.png", "input_ids": [5, 6, 7], "labels": [8, 1]})" << "\n"
                                   << R"({"image": "images/c.png", "input_ids": [9]})" << "\n";
  const data::CaptionBatches seq(run(2, (dir / "seq.jsonl").string()), spec(50, 0, true), 1);
  const models::CaptionBatch s0 = seq.batch(0, 0, 0, c10::Device("cpu"));
  CHECK(at::equal(s0.input_ids, longs({5, 6, 7, 9, 0, 0}, 2)));
  CHECK(at::equal(s0.labels, longs({8, 1, 9, -100}, 2)));
  // 4 + (3 + 1) / 2 + (2 + 1) / 2 = 7.5 a row, times 2 rows.
  CHECK(seq.tokens_per_step() == 15);

  // preprocessor_config.json in model_dir sets the image processor, as for ImageBatches.
  fs::create_directories(dir / "model");
  std::ofstream(dir / "model/preprocessor_config.json")
      << R"({"image_mean": [0.0, 0.0, 0.0], "image_std": 0.25, "resample": 3})";
  RunConfig with_model = run(2, dir.string());
  with_model.model_dir = (dir / "model").string();
  const data::CaptionBatches processed(with_model, spec(50, 1), 1);
  CHECK(processed.spec().image.resample == models::Resample::bicubic);
  CHECK(processed.image(0).max().item<float>() == 4.0f);  // 1 / 0.25
  fs::remove_all(dir);
}

TEST_CASE("CaptionBatches refuses bad captions before training, naming data=, the file and line",
          "[data][caption_batches]") {
  const fs::path dir = testing::fresh_dir("bad-captions");
  write_png(dir / "ok.png", 8, 8, 1);
  std::ofstream(dir / "bad.png") << "not a png";
  const std::string file = (dir / "captions.jsonl").string();
  const std::string ok = R"({"image": "ok.png", "input_ids": [5, 6]})";
  auto with_lines = [&](const std::string& text, std::int64_t seq_len = 8, bool sequence = false) {
    std::ofstream(dir / "captions.jsonl") << text;
    return data::CaptionBatches(run(1, dir.string(), seq_len), spec(50, 1, sequence), 1);
  };
  CHECK_NOTHROW(with_lines(ok + "\n"));
  CHECK_THROWS_WITH(with_lines(ok + "\n{\"image\": \"gone.png\", \"input_ids\": [5]}\n"),
                    Catch::StartsWith("data=" + dir.string() + ": " + file + ":2: ") &&
                        Catch::Contains("gone.png: no such image file"));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"bad.png\", \"input_ids\": [5]}\n"),
                    Catch::Contains(file + ":1: ") && Catch::Contains("bad.png: not a PNG or JPEG"));
  CHECK_THROWS_WITH(with_lines(ok + "\n{\"image\": \"ok.png\", \"input_ids\": [5\n"),
                    Catch::Contains(file + ":2: not a JSON object"));
  CHECK_THROWS_WITH(with_lines(ok + "\n[1, 2]\n"), Catch::Contains(file + ":2: not a JSON object"));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"input_ids\": [5, 50]}\n"),
                    Catch::Contains(file + ":1: \"input_ids\"[1] is 50, not a token id of the model (0 to 49); "
                                           "tokenize with the model's own tokenizer"));
  CHECK_THROWS_WITH(with_lines(ok + "\n{\"image\": \"ok.png\", \"input_ids\": [1, 2, 3, 4, 5]}\n", 4),
                    Catch::Contains(file + ":2: \"input_ids\" has 5 tokens, more than seq_len=4; raise seq_len or "
                                           "shorten the row"));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"text\": \"a photo of a cat\"}\n"),
                    Catch::Contains(file + ":1: a text caption") && Catch::Contains("needs the model's tokenizer") &&
                        Catch::Contains("give model_dir=DIR or tokenizer=DIR"));
  {
    // With a tokenizer, a text caption is its ids as the processor gives them (special tokens added).
    const auto tok_dir = testing::text_fixture("bpe_json");
    const auto tok = text::Tokenizer::load(tok_dir);
    std::ofstream(dir / "captions.jsonl") << R"({"image": "ok.png", "text": "a photo of a cat"})" << "\n";
    RunConfig cfg = run(1, dir.string(), 32);
    cfg.tokenizer = tok_dir.string();
    const data::CaptionBatches texts(cfg, spec(tok.vocab_size(), 1), 1);
    const auto b = texts.batch(0, 0, 0, c10::Device(c10::kCPU));
    CHECK(ids(b.input_ids[0]) == tok.encode_with_special("a photo of a cat"));
    CHECK_THROWS_WITH(data::CaptionBatches(cfg, spec(10, 1), 1),
                      Catch::Contains(file + ":1 (\"text\" as tokenized by ") && Catch::Contains("not a token id"));
  }
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\"}\n"), Catch::Contains(file + ":1: no \"input_ids\""));
  CHECK_THROWS_WITH(with_lines("{\"input_ids\": [5]}\n"),
                    Catch::Contains(file + ":1: \"image\" must be the image's path (a string), relative to " +
                                    dir.string()));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"input_ids\": []}\n"),
                    Catch::Contains(file + ":1: \"input_ids\" is empty"));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"input_ids\": [5, 6.5]}\n"),
                    Catch::Contains(file + ":1: \"input_ids\"[1] must be an integer token id, got 6.5"));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"input_ids\": [5], \"labels\": [-1]}\n"),
                    Catch::Contains(file + ":1: \"labels\"[0] is -1, neither a token id of the model (0 to 49) nor "
                                           "-100 (ignored by the loss)"));
  {  // BLIP-2's image token: the model puts the query positions before the caption itself.
    std::ofstream(dir / "captions.jsonl") << "{\"image\": \"ok.png\", \"input_ids\": [5, 7]}\n";
    models::CaptionSpec reserving = spec(50, 1);
    reserving.reserved_token_id = 7;
    CHECK_THROWS_WITH(data::CaptionBatches(run(1, dir.string()), reserving, 1),
                      Catch::Contains(file + ":1: \"input_ids\"[1] is 7, the id the model reserves for its image "
                                             "token") && Catch::Contains("without image tokens"));
  }
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"input_ids\": [5, 6], \"labels\": [-100, -100]}\n"),
                    Catch::Contains(file + ":1: \"labels\" are all -100"));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"input_ids\": [5], \"labels\": []}\n"),
                    Catch::Contains(file + ":1: \"labels\" is empty") && Catch::Contains("leave \"labels\" out"));
  // A decoder-only LM's labels are one per input position; an encoder-decoder LM's may be of any length.
  const std::string shorter = "{\"image\": \"ok.png\", \"input_ids\": [5, 6, 7], \"labels\": [8]}\n";
  CHECK_THROWS_WITH(with_lines(shorter),
                    Catch::Contains(file + ":1: \"labels\" has 1 ids but \"input_ids\" has 3") &&
                        Catch::Contains("decoder-only"));
  CHECK_NOTHROW(with_lines(shorter, 8, true));
  CHECK_THROWS_WITH(with_lines("\n \n"), Catch::Contains(file + " has no rows"));
  std::ofstream(dir / "captions.jsonl") << ok << "\n";
  CHECK_THROWS_WITH(data::CaptionBatches(run(2, dir.string()), spec(50), 1),
                    Catch::Contains("captions.jsonl in " + dir.string() + " (1 captions) has 1 rows but one "
                                    "micro-step needs world_size*batch_size = 1*2 = 2"));
  // A directory without captions.jsonl, a missing path, a file that is not .jsonl, and a bad pad id.
  fs::create_directories(dir / "empty");
  CHECK_THROWS_WITH(data::CaptionBatches(run(1, (dir / "empty").string()), spec(50), 1),
                    Catch::StartsWith("data=" + (dir / "empty").string() + ": no captions.jsonl in it") &&
                        Catch::Contains((dir / "empty" / "captions.jsonl").string()));
  CHECK_THROWS_WITH(data::CaptionBatches(run(1, (dir / "gone").string()), spec(50), 1),
                    Catch::Contains("no such file or directory"));
  CHECK_THROWS_WITH(data::CaptionBatches(run(1, (dir / "ok.png").string()), spec(50), 1),
                    Catch::Contains("image-to-text models read captions.jsonl"));
  CHECK_THROWS_WITH(data::CaptionBatches(run(1, dir.string()), spec(50, 50), 1),
                    Catch::Contains("pad_token_id 50 is not a token id"));
  fs::remove_all(dir);
}
