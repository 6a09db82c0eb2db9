// tessera_make_fixture: writes small, valid inputs that the CLI tests then break on purpose.
//   tessera_make_fixture model DIR        a 2-block Llama (vocab 256, hidden 32) as a Hugging Face dir
//   tessera_make_fixture tokens FILE N    N uint16 tokens (nanoGPT raw format), ids < 256
//   tessera_make_fixture deep-json FILE PREFIX DEPTH SUFFIX [safetensors]
//                                         PREFIX, DEPTH nested '[' and ']', SUFFIX (as a safetensors header:
//                                         with the u64 length in front and space padding)
//   tessera_make_fixture poison DIR       the first weight of DIR/model.safetensors becomes NaN
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
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
  if (kind == "deep-json" && (argc == 6 || argc == 7)) {
    const auto depth = static_cast<std::size_t>(std::stol(argv[4]));
    std::string text = argv[3] + std::string(depth, '[') + std::string(depth, ']') + argv[5];
    std::ofstream out(argv[2], std::ios::binary);
    if (argc == 7) {
      text.append((8 - text.size() % 8) % 8, ' ');
      char length[8];
      for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
      out.write(length, 8);
    }
    out << text;
    return out ? 0 : 1;
  }
  if (kind == "poison" && argc == 3) {
    std::fstream file(std::string(argv[2]) + "/model.safetensors", std::ios::binary | std::ios::in | std::ios::out);
    unsigned char length[8] = {};
    file.read(reinterpret_cast<char*>(length), 8);
    std::uint64_t header = 0;
    for (int i = 0; i < 8; ++i) header |= static_cast<std::uint64_t>(length[i]) << (8 * i);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    file.seekp(static_cast<std::streamoff>(8 + header));
    file.write(reinterpret_cast<const char*>(&nan), sizeof nan);
    return file ? 0 : 1;
  }
  std::fprintf(stderr, "usage: %s model DIR | tokens FILE N | deep-json FILE PREFIX DEPTH SUFFIX [safetensors] | poison DIR\n", argc > 0 ? argv[0] : "tessera_make_fixture");
  return 2;
}
