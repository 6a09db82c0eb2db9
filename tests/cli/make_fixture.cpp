// tessera_make_fixture: writes small, valid inputs that the CLI tests then break on purpose.
//   tessera_make_fixture model DIR        a 2-block Llama (vocab 256, hidden 32) as a Hugging Face dir
//   tessera_make_fixture tokens FILE N    N uint16 tokens (nanoGPT raw format), ids < 256
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/engine/param_store.hpp"
#include "tessera/engine/save.hpp"
#include "tessera/models/llama.hpp"

int main(int argc, char** argv) {
  const std::string kind = argc > 1 ? argv[1] : "";
  if (kind == "model" && argc == 3) {
    tessera::models::LlamaConfig c = tessera::models::llama_preset("tiny");
    c.vocab_size = 256;
    c.hidden_size = 32;
    c.intermediate_size = 64;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 8;
    tessera::ParamStore store(tessera::models::Llama::parameters(c), c10::ScalarType::Float, c10::Device("cpu"));
    store.initialize(0.02, 1);
    tessera::save_hf_dir<tessera::models::Llama>(argv[2], c, store, store.full_units());
    return 0;
  }
  if (kind == "tokens" && argc == 4) {
    const long n = std::stol(argv[3]);
    std::vector<std::uint16_t> tokens(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) tokens[static_cast<std::size_t>(i)] = static_cast<std::uint16_t>((i * 7919) % 256);
    std::ofstream(argv[2], std::ios::binary)
        .write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(n * 2));
    return 0;
  }
  std::fprintf(stderr, "usage: %s model DIR | tokens FILE N\n", argc > 0 ? argv[0] : "tessera_make_fixture");
  return 2;
}
