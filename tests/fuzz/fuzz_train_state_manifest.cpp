// Fuzz target: a training-state checkpoint's manifest.json (engine/train_state.hpp), beside one valid rank file
// holding "0.param" (8 floats) and a local "0.m_codes". Whatever the reader accepts, every read the trainer and
// OptimizerStep then make of the manifest (at(), get<>()) must succeed: a JSON exception escaping is a finding.
#include <ATen/ATen.h>

#include "fuzz_support.hpp"
#include "tessera/core/error.hpp"
#include "tessera/engine/train_state.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path ckpt = [] {
    tessera::TrainStateWriter w;
    w.add_part("0.param", at::arange(8, at::kFloat), 0, 8);
    w.add_local("0.m_codes", at::arange(4, at::kByte));
    return tessera::train_state::save(tessera::fuzz::work_dir() / "c", 1, w, true, nlohmann::json::object(),
                                      tessera::dist::AnyCommunicator(), c10::Device(c10::kCPU), 0)
        .path;
  }();
  tessera::fuzz::write_file(ckpt / "manifest.json", data, size);
  try {
    const tessera::TrainStateReader reader(ckpt);
    (void)reader.step();
    // What the trainer reads of the manifest before it reads any tensor (engine/trainer_state.hpp resume_from).
    static const nlohmann::json run = {{"experiment", {{"family", "llama"}, {"sharding", "ddp"}}},
                                       {"settings", {{"seq_len", 16}, {"seed", 0}}}};
    (void)tessera::train_state::difference(reader.manifest(), run);
    (void)reader.manifest().value("shard_group_size", std::int64_t{0});
    (void)reader.manifest().value("world_size", 0);
    // What OptimizerStep::load_state reads (engine/optimizer_step.hpp).
    const nlohmann::json& m = reader.manifest();
    (void)m.at("optimizer").at("has_state").get<bool>();
    (void)m.at("optimizer").at("steps").get<std::int64_t>();
    const nlohmann::json& ls = m.at("loss_scaler");
    (void)ls.at("scale").get<double>();
    for (const char* key : {"good_in_a_row", "skipped", "growths"}) (void)ls.at(key).get<std::int64_t>();
    at::Tensor part = at::empty({8});
    if (reader.has("0.param")) reader.read_part("0.param", part, 0, 8);
    at::Tensor codes = at::empty({4}, at::kByte);
    if (reader.has("0.m_codes")) reader.read_local("0.m_codes", codes, 0);
  } catch (const tessera::Error&) {
  }
  return 0;
}
