// Fuzz target: BLIP-2's captions.jsonl (data/caption_batches.hpp), beside one valid 2x2 PNG (images/a.png).
#include "fuzz_support.hpp"
#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/caption_batches.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path dir = tessera::fuzz::work_dir() / "captions";
  static const bool image_written = [&] {
    static constexpr char png[] =
        "\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x02\x00\x00\x00\x02\x08\x02\x00"
        "\x00\x00\xfd\xd4\x9a\x73\x00\x00\x00\x10\x49\x44\x41\x54\x78\x9c\x63\xf8\xcf\xc0\x00\x44\x0c\x10\x0a\x00\x1f"
        "\xee\x03\xfd\x8b\x5f\x14\xd4\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82";
    tessera::fuzz::write_file(dir / "images" / "a.png", std::string_view(png, sizeof png - 1));
    return true;
  }();
  (void)image_written;
  tessera::fuzz::write_file(dir / "captions.jsonl", data, size);
  tessera::RunConfig cfg;
  cfg.data = dir.string();
  cfg.seq_len = 16;
  cfg.batch_size = 2;
  tessera::models::CaptionSpec spec;
  spec.image.image_size = 4;
  spec.image.positions = 4;
  spec.vocab_size = 100;
  spec.prefix_positions = 2;
  spec.reserved_token_id = 99;
  try {
    const tessera::data::CaptionBatches batches(cfg, spec, 1);
    if (batches.total_steps() > 0) (void)batches.batch(0, 0, 0, c10::Device(c10::kCPU));
  } catch (const tessera::Error&) {
  }
  return 0;
}
