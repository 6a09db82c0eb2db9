// Fuzz target: a sharded Hugging Face checkpoint's model.safetensors.index.json (io/checkpoint_dir.hpp), next to
// one valid shard holding tensors "a" and "b".
#include <vector>

#include "fuzz_support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/checkpoint_dir.hpp"
#include "tessera/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path dir = tessera::fuzz::work_dir() / "ckpt";
  static const bool shard_written = [&] {
    std::filesystem::create_directories(dir);
    const float values[4] = {1, 2, 3, 4};
    const auto* bytes = reinterpret_cast<const std::byte*>(values);
    const std::vector<tessera::io::TensorView> views = {
        {"a", tessera::io::StDType::F32, {2}, std::span<const std::byte>(bytes, 8)},
        {"b", tessera::io::StDType::F32, {2}, std::span<const std::byte>(bytes + 8, 8)}};
    tessera::io::write_safetensors(dir / "model-00001-of-00001.safetensors", views);
    return true;
  }();
  (void)shard_written;
  tessera::fuzz::write_file(dir / "model.safetensors.index.json", data, size);
  try {
    const auto ckpt = tessera::io::CheckpointDir::open(dir);
    std::size_t sum = 0;
    for (const std::string& name : ckpt.names()) sum += ckpt.bytes(name).size();
    static volatile std::size_t sink;
    sink = sum;
  } catch (const tessera::Error&) {
  }
  return 0;
}
