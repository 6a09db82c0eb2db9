// batch_dump: the first batches tessera builds for a model family from a run config, written for the checks that
// compare them with what the labs' pipeline gives (tests/reference/check_lab_batches.py: datasets + the model's
// processor).
//   batch_dump blip2-opt|blip2-t5|vit OUT.safetensors STEPS key=value...   (model_dir= and data= among the keys)
// Writes, for each step s < STEPS (one rank, micro-step 0): s.pixels F32 (B, C, S, S) and, for blip2-opt/-t5,
// s.input_ids, s.attention_mask I64 (B, T) and s.labels I64 (when defined); for vit, s.labels I64 (B,).
// Exit 2 on bad arguments, 1 with the message on any error.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dump_tensors.hpp"
#include "tessera/config/run_config.hpp"
#include "tessera/data/caption_batches.hpp"
#include "tessera/data/image_batches.hpp"
#include "tessera/models/blip2.hpp"
#include "tessera/models/vit.hpp"

int main(int argc, char** argv) {
  const std::string_view family = argc < 2 ? std::string_view() : std::string_view(argv[1]);
  if (argc < 4 || (family != "blip2-opt" && family != "blip2-t5" && family != "vit")) {
    std::fprintf(stderr, "usage: %s blip2-opt|blip2-t5|vit OUT.safetensors STEPS key=value...\n", argv[0]);
    return 2;
  }
  try {
    using namespace tessera;
    const std::vector<std::string_view> args(argv + 4, argv + argc);
    const RunConfig cfg = parse_run_config(args);
    const std::int64_t steps = std::stoll(argv[3]);
    const std::filesystem::path config_json = std::filesystem::path(cfg.model_dir) / "config.json";
    const c10::Device cpu(c10::kCPU);
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    if (family != "vit") {
      const data::CaptionBatches data(
          cfg,
          family == "blip2-opt" ? models::Blip2Opt::data_spec(models::Blip2Opt::read_config(config_json))
                                : models::Blip2T5::data_spec(models::Blip2T5::read_config(config_json)),
          1);
      for (std::int64_t s = 0; s < steps; ++s) {
        const auto b = data.batch(s, 0, 0, cpu);
        const std::string p = std::to_string(s) + ".";
        tensors.insert(tensors.end(), {{p + "pixels", b.pixels}, {p + "input_ids", b.input_ids},
                                       {p + "attention_mask", b.attention_mask}});
        if (b.labels.defined()) tensors.emplace_back(p + "labels", b.labels);
      }
    } else {
      const data::ImageBatches data(cfg, models::Vit::data_spec(models::Vit::read_config(config_json)), 1);
      for (std::int64_t s = 0; s < steps; ++s) {
        const auto b = data.batch(s, 0, 0, cpu);
        const std::string p = std::to_string(s) + ".";
        tensors.insert(tensors.end(), {{p + "pixels", b.pixels}, {p + "labels", b.labels}});
      }
    }
    testing::write_named_tensors(argv[2], tensors);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "batch_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
