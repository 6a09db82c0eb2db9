// image_dump: the images of an image data directory as tessera's ImageBatches prepares them for a ViT model dir,
// written for tests/reference/check_vit_against_transformers.py to compare with transformers' ViTImageProcessor;
// with --blip2, the images of a captions.jsonl directory as CaptionBatches prepares them for a BLIP-2 (OPT) model dir,
// for check_blip2_against_transformers.py to compare with BlipImageProcessor.
//   image_dump MODEL_DIR DATA_DIR OUT.safetensors [--blip2]
// Writes pixels F32 (N, C, S, S) (every row in file order: resized, scaled, normalized with MODEL_DIR's
// preprocessor_config.json or the family's defaults) and, for ViT, labels I64 (N,). Exit 2 on bad arguments, 1 with
// the message on any error.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "dump_tensors.hpp"
#include "tessera/config/run_config.hpp"
#include "tessera/data/caption_batches.hpp"
#include "tessera/data/image_batches.hpp"
#include "tessera/models/blip2.hpp"
#include "tessera/models/vit.hpp"

int main(int argc, char** argv) {
  const bool blip2 = argc == 5 && std::string(argv[4]) == "--blip2";
  if (argc != 4 && !blip2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR DATA_DIR OUT.safetensors [--blip2]\n", argv[0]);
    return 2;
  }
  try {
    using namespace tessera;
    RunConfig cfg;
    cfg.model_dir = argv[1];
    cfg.data = argv[2];
    cfg.batch_size = 1;
    if (blip2) {
      const auto config = models::Blip2Opt::read_config(std::filesystem::path(argv[1]) / "config.json");
      const data::CaptionBatches captions(cfg, models::Blip2Opt::data_spec(config), 1);
      std::vector<at::Tensor> pixels;
      for (std::int64_t r = 0; r < captions.size(); ++r) pixels.push_back(captions.image(r));
      std::vector<std::pair<std::string, at::Tensor>> tensors{{"pixels", at::stack(pixels)}};
      testing::write_named_tensors(argv[3], tensors);
      return 0;
    }
    const models::VitConfig config = models::Vit::read_config(std::filesystem::path(argv[1]) / "config.json");
    const data::ImageBatches images(cfg, models::Vit::data_spec(config), 1);
    std::vector<at::Tensor> pixels;
    at::Tensor labels = at::empty({images.size()}, at::kLong);
    for (std::int64_t r = 0; r < images.size(); ++r) {
      pixels.push_back(images.image(r));
      labels[r] = images.label(r);
    }
    std::vector<std::pair<std::string, at::Tensor>> tensors{{"pixels", at::stack(pixels)}, {"labels", labels}};
    testing::write_named_tensors(argv[3], tensors);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "image_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
