// Fuzz target: T5's pairs.jsonl (data/seq2seq_batches.hpp): token-id pairs or text pairs, read and batched.
#include "fuzz_support.hpp"
#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/data/seq2seq_batches.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::filesystem::path dir = tessera::fuzz::work_dir() / "pairs";
  tessera::fuzz::write_file(dir / "pairs.jsonl", data, size);
  tessera::RunConfig cfg;
  cfg.data = dir.string();
  cfg.seq_len = 16;
  cfg.batch_size = 2;
  try {
    const tessera::data::Seq2SeqBatches batches(cfg, tessera::models::Seq2SeqSpec{100, 0}, 1);
    if (batches.total_steps() > 0) (void)batches.batch(0, 0, 0, c10::Device(c10::kCPU));
  } catch (const tessera::Error&) {
  }
  return 0;
}
