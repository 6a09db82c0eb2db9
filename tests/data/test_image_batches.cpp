// tests: tessera::data::ImageBatches: the synthetic set (deterministic, learnable, the same rows for any world size),
// labels.jsonl and ImageFolder directories of PNG files, the image processor's settings from preprocessor_config.json,
// one decode per image an epoch, and the refusals of bad data with the file, the line and the fix.
#include <catch2/catch.hpp>

#include <ATen/ATen.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/image_batches.hpp"
#include "tessera/io/image_file.hpp"

#include "stb_image_write.hpp"

namespace fs = std::filesystem;
using namespace tessera;

namespace {

models::ImageSpec spec(std::int64_t size = 8, std::int64_t labels = 3) {
  models::ImageSpec s;
  s.image_size = size;
  s.num_labels = labels;
  s.positions = 5;
  return s;
}

RunConfig run(std::int64_t batch, const std::string& data = "") {
  RunConfig cfg;
  cfg.batch_size = batch;
  cfg.data = data;
  cfg.max_steps = 2;
  return cfg;
}

// A w x h PNG whose every pixel is (value, value, value).
void write_png(const fs::path& path, int w, int h, unsigned char value) {
  std::vector<unsigned char> px(static_cast<std::size_t>(w * h * 3), value);
  REQUIRE(stbi_write_png(path.c_str(), w, h, 3, px.data(), w * 3));
}

}  // namespace

TEST_CASE("ImageBatches synthetic: deterministic, the same rows for any world size, labels in range",
          "[data][image_batches]") {
  const data::ImageBatches one(run(4), spec(), 1), two(run(2), spec(), 2);
  CHECK(one.size() == 512);
  CHECK(one.tokens_per_step() == 4 * 5);
  const models::ImageBatch all = one.batch(1, 0, 0, c10::Device("cpu"));
  CHECK(all.pixels.sizes() == at::IntArrayRef({4, 3, 8, 8}));
  CHECK(all.pixels.scalar_type() == at::kFloat);
  for (std::int64_t r = 0; r < 2; ++r) {  // rank r's two rows are rows 2r, 2r+1 of the 4-row micro-batch
    const models::ImageBatch part = two.batch(1, 0, r, c10::Device("cpu"));
    CHECK(at::equal(part.pixels, all.pixels.narrow(0, 2 * r, 2)));
    CHECK(at::equal(part.labels, all.labels.narrow(0, 2 * r, 2)));
  }
  CHECK(at::equal(one.batch(1, 0, 0, c10::Device("cpu")).pixels, all.pixels));  // the same twice
  CHECK(all.labels.min().item<std::int64_t>() >= 0);
  CHECK(all.labels.max().item<std::int64_t>() < 3);
  // Normalized with mean and std 0.5: values in [-1, 1]. A class's images share its pattern: two images of one
  // class are closer than two of different classes.
  CHECK(all.pixels.min().item<float>() >= -1.0f);
  CHECK(all.pixels.max().item<float>() <= 1.0f);
  std::vector<at::Tensor> by_class(3);
  std::vector<at::Tensor> other(3);
  for (std::int64_t r = 0; r < 60; ++r) {
    const auto k = static_cast<std::size_t>(one.label(r));
    if (!by_class[k].defined()) by_class[k] = one.image(r);
    else if (!other[k].defined()) other[k] = one.image(r);
  }
  CHECK((by_class[0] - other[0]).abs().mean().item<float>() < (by_class[0] - by_class[1]).abs().mean().item<float>());
  // Another seed, other images.
  RunConfig reseeded = run(4);
  reseeded.seed = 7;
  CHECK_FALSE(at::equal(data::ImageBatches(reseeded, spec(), 1).image(0), one.image(0)));
}

TEST_CASE("ImageBatches: labels.jsonl and class directories of PNG files", "[data][image_batches]") {
  const fs::path dir = testing::fresh_dir("images");
  fs::create_directories(dir / "jsonl" / "img");
  write_png(dir / "jsonl/img/a.png", 8, 8, 255);
  write_png(dir / "jsonl/img/b.png", 12, 10, 0);  // resized to 8 x 8
  std::ofstream(dir / "jsonl/labels.jsonl") << R"({"image": "img/a.png", "label": 2})" << "\n\n"
                                            << R"({"image": "img/b.png", "label": 0})" << "\n";
  const data::ImageBatches jsonl(run(2, (dir / "jsonl").string()), spec(), 1);
  CHECK(jsonl.size() == 2);
  CHECK(jsonl.label(0) == 2);
  CHECK(jsonl.image(0).sizes() == at::IntArrayRef({3, 8, 8}));
  CHECK(jsonl.image(0).min().item<float>() == 1.0f);  // (1 - 0.5) / 0.5
  CHECK(jsonl.image(1).max().item<float>() == -1.0f);
  CHECK(std::string(jsonl.description()).find("labels.jsonl") != std::string::npos);

  // ImageFolder: classes in sorted name order, as torchvision numbers them.
  fs::create_directories(dir / "folder/zebra");
  fs::create_directories(dir / "folder/ant");
  write_png(dir / "folder/zebra/1.png", 8, 8, 10);
  write_png(dir / "folder/ant/2.png", 8, 8, 20);
  write_png(dir / "folder/ant/1.png", 8, 8, 30);
  const data::ImageBatches folder(run(3, (dir / "folder").string()), spec(), 1);
  CHECK(folder.size() == 3);
  CHECK(folder.label(0) == 0);  // ant/1.png
  CHECK(folder.label(2) == 1);  // zebra/1.png
  const models::ImageBatch b = folder.batch(0, 0, 0, c10::Device("cpu"));
  CHECK(at::equal(b.labels, at::tensor({0, 0, 1}, at::kLong)));

  // preprocessor_config.json in model_dir sets mean, std and the resampling filter.
  fs::create_directories(dir / "model");
  std::ofstream(dir / "model/preprocessor_config.json")
      << R"({"image_mean": [0.0, 0.0, 0.0], "image_std": 0.25, "resample": 3})";
  RunConfig with_model = run(2, (dir / "jsonl").string());
  with_model.model_dir = (dir / "model").string();
  const data::ImageBatches processed(with_model, spec(), 1);
  CHECK(processed.spec().resample == models::Resample::bicubic);
  CHECK(processed.image(0).max().item<float>() == 4.0f);  // 1 / 0.25
  std::ofstream(dir / "model/preprocessor_config.json") << R"({"resample": 1})";
  CHECK_THROWS_WITH(data::ImageBatches(with_model, spec(), 1),
                    Catch::Contains("\"resample\" 1 is not supported") && Catch::Contains("2 (bilinear) or 3 (bicubic)"));
  fs::remove_all(dir);
}

TEST_CASE("ImageBatches refuses bad image data before training, naming the file and line", "[data][image_batches]") {
  const fs::path dir = testing::fresh_dir("bad-images");
  write_png(dir / "ok.png", 8, 8, 1);
  auto with_lines = [&](const std::string& text) {
    std::ofstream(dir / "labels.jsonl") << text;
    return data::ImageBatches(run(1, dir.string()), spec(), 1);
  };
  const std::string file = (dir / "labels.jsonl").string();
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"label\": 3}\n"),
                    file + ":1: label 3 is not a class of the model, which has 3 (ids 0 to 2)");
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"label\": 1}\n[1]\n"), Catch::StartsWith(file + ":2: not a JSON object"));
  CHECK_THROWS_WITH(with_lines("{\"image\": 5, \"label\": 1}\n"), Catch::Contains(":1: \"image\" must be the image's path"));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"ok.png\", \"label\": \"cat\"}\n"),
                    Catch::Contains(":1: \"label\" must be an integer class id, got \"cat\""));
  CHECK_THROWS_WITH(with_lines("{\"image\": \"gone.png\", \"label\": 1}\n"),
                    Catch::Contains("labels.jsonl row 1: ") && Catch::Contains("gone.png: no such image file"));
  std::ofstream(dir / "bad.png") << "not a png";
  CHECK_THROWS_WITH(with_lines("{\"image\": \"bad.png\", \"label\": 1}\n"), Catch::Contains("bad.png: not a PNG or JPEG"));
  CHECK_THROWS_WITH(with_lines("\n"), Catch::Contains("no images in it"));
  std::ofstream(dir / "labels.jsonl") << "{\"image\": \"ok.png\", \"label\": 1}\n";
  CHECK_THROWS_WITH(data::ImageBatches(run(2, dir.string()), spec(), 1),
                    Catch::Contains("has 1 rows but one micro-step needs world_size*batch_size = 1*2 = 2"));
  CHECK_NOTHROW(data::ImageBatches(run(1, dir.string()), spec(), 1));
  fs::remove_all(dir);
}

TEST_CASE("ImageBatches decodes each image once an epoch: none to check it, none for a dry run's batch",
          "[data][image_batches]") {
  const fs::path dir = testing::fresh_dir("decodes");
  for (const char* cls : {"cat", "dog"}) fs::create_directories(dir / cls);
  for (int i = 0; i < 6; ++i) write_png(dir / (i % 2 ? "dog" : "cat") / (std::to_string(i) + ".png"), 8, 8, 40 * i);
  auto decodes_since = [start = io::detail::images_decoded()]() mutable {
    const std::int64_t now = io::detail::images_decoded(), n = now - start;
    start = now;
    return n;
  };
  for (const std::int64_t world : {1, 2}) {
    const data::ImageBatches data(run(2 / world, dir.string()), spec(), world);
    CHECK(decodes_since() == 0);  // headers probed, nothing decoded
    REQUIRE(data.steps_per_epoch() == 3);
    // The dry run (predict=true) reads the first two steps on the meta device, as every rank does.
    for (std::int64_t rank = 0; rank < world; ++rank)
      for (std::int64_t step = 0; step < 2; ++step) {
        const models::ImageBatch meta = data.batch(step, 0, rank, c10::Device("meta"));
        CHECK(meta.pixels.is_meta());
        CHECK(meta.pixels.sizes() == at::IntArrayRef({2 / world, 3, 8, 8}));
        CHECK(meta.pixels.scalar_type() == at::kFloat);
      }
    CHECK(decodes_since() == 0);
    for (std::int64_t step = 0; step < 3; ++step)
      for (std::int64_t rank = 0; rank < world; ++rank) (void)data.batch(step, 0, rank, c10::Device("cpu"));
    CHECK(decodes_since() == 6);  // the epoch: each image once
  }
  fs::remove_all(dir);
}
