// tessera_nf4_dump: tessera's NF4 of every tensor of a safetensors file, written to another one, so that
// tests/reference/check_nf4_against_bnb.py can compare it with bitsandbytes' quantize_4bit / dequantize_4bit.
//   tessera_nf4_dump IN.safetensors OUT.safetensors BLOCK
// For each tensor NAME of IN (any floating dtype, any shape), OUT holds
//   NAME.codes       U8  (ceil(n/2),)  nf4_quantize(NAME, false, BLOCK).codes, two codes per byte
//   NAME.absmax      F32 (nblocks,)
//   NAME.dequant     F32 NAME's shape  nf4_dequantize(.., fp32)
//   NAME.dq_codes    U8  (nblocks,)    with double quantization: the 8-bit codes of absmax - offset
//   NAME.dq_absmax   F32 (ceil(nblocks/256),)
//   NAME.dq_offset   F32 (1,)
//   NAME.dq_dequant  F32 NAME's shape
// Exit 1 with the message on any error.
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "dump_tensors.hpp"
#include "tessera/engine/tensor_bytes.hpp"
#include "tessera/io/safetensors.hpp"
#include "tessera/quant/nf4.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s IN.safetensors OUT.safetensors BLOCK\n", argv[0]);
    return 2;
  }
  try {
    const auto in = tessera::io::SafetensorsFile::open(argv[1]);
    const std::int64_t block = std::stoll(argv[3]);
    std::vector<std::pair<std::string, at::Tensor>> out;
    for (const auto& info : in.tensors()) {
      const at::Tensor w = tessera::tensor_from_bytes(info, in.bytes(info));
      const tessera::quant::Nf4Tensor q = tessera::quant::nf4_quantize(w, false, block);
      out.emplace_back(info.name + ".codes", q.codes);
      out.emplace_back(info.name + ".absmax", q.absmax);
      out.emplace_back(info.name + ".dequant", tessera::quant::nf4_dequantize(q, at::kFloat));
      const tessera::quant::Nf4Tensor dq = tessera::quant::nf4_quantize(w, true, block);
      out.emplace_back(info.name + ".dq_codes", dq.absmax_q.codes);
      out.emplace_back(info.name + ".dq_absmax", dq.absmax_q.absmax);
      out.emplace_back(info.name + ".dq_offset", at::full({1}, dq.absmax_offset, at::kFloat));
      out.emplace_back(info.name + ".dq_dequant", tessera::quant::nf4_dequantize(dq, at::kFloat));
    }
    tessera::testing::write_named_tensors(argv[2], out);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera_nf4_dump: %s\n", e.what());
    return 1;
  }
  return 0;
}
