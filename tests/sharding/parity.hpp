#pragma once
// Shared by the sharding tests (tessera_sharding_tests, run under mpiexec with 1, 2 and 4 ranks): train an
// experiment on this job, and the same experiment as the single-process reference with NoShard on
// world_size * batch_size rows, computed by rank 0 inside a SoloScope and broadcast to the other ranks (its losses
// and parameters; every rank computing it for itself was W times the reference's work). The foundation's batch
// order gives rank k rows k*B .. k*B+B-1 of the rows the reference takes at once, so the two see the same data.
//
// Tolerances: fp32 gradients of W ranks of B rows and of one rank of W*B rows differ by GEMM rounding
// (~1e-7 relative). AdamW's first update is lr*sign(g) per element, so elements whose gradient is at rounding
// level can move by +-lr in one run and -+lr in the other; the parameter difference scales with lr. The
// parity runs use lr = 1e-4, where that stays far under 1e-5 relative while every parameter still moves by
// ~3e-4 (checked: every unit's final parameters differ from the initial ones by > 1e-4 relative).
#include <ATen/ATen.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "support.hpp"
#include "tessera/engine/job.hpp"
#include "tessera/tessera.hpp"
#ifdef TESSERA_WITH_MPI
#include "tessera/dist/world.hpp"
#endif

namespace tessera::testing {

struct RunResult {
  std::vector<double> losses;
  std::vector<at::Tensor> params;  // per unit, the model's parameters only (no padding), as float64
  std::vector<memory::MemorySnapshot> snapshots;  // train()'s; reference() gives them (and param_bytes) at 1 rank only
  std::int64_t param_bytes = 0;
};

inline int world_size() { return job::place().size; }
inline int world_rank() { return job::place().rank; }

inline RunConfig parity_run(std::int64_t batch_size = 2, std::int64_t accumulate = 1) {
  RunConfig cfg = small_run(batch_size, accumulate, 32);
  cfg.lr = 1e-4;
  cfg.max_steps = 3;
  return cfg;
}

// The Llama policies' parity runs: the `micro` preset (156,480 parameters, two blocks, grouped-query attention;
// docs/config.md), whose units, shards, buckets and collectives take every path `tiny`'s do, with a thirty-second of
// tiny's parameters. A check that needs more bytes than micro has (several 1 MiB buckets) keeps parity_run's `tiny`.
inline RunConfig micro_parity_run(std::int64_t batch_size = 2, std::int64_t accumulate = 1) {
  RunConfig cfg = parity_run(batch_size, accumulate);
  cfg.model = "micro";
  return cfg;
}

template <class Exp>
RunResult train(const RunConfig& cfg, std::int64_t steps) {
  Trainer<Exp> t(cfg, quiet());
  RunResult r;
  for (std::int64_t s = 0; s < steps; ++s) r.losses.push_back(t.train_step(s).loss);
  const std::vector<at::Tensor> full = t.full_params();
  for (std::size_t u = 0; u < full.size(); ++u)
    r.params.push_back(full[u].narrow(0, 0, t.params().unit_numel(u)).to(at::kDouble));
  r.snapshots = t.snapshots();
  r.param_bytes = t.params().param_bytes();
  return r;
}

namespace detail {

template <class T>
void put(std::string& out, const T& value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

template <class T>
T take(const std::string& in, std::size_t& at) {
  if (at + sizeof(T) > in.size()) throw std::runtime_error("parity: the broadcast reference is cut short");
  T value;
  std::memcpy(&value, in.data() + at, sizeof value);
  at += sizeof value;
  return value;
}

// Rank 0's losses and parameters (float64, contiguous) as bytes: 1 and them, or 0 and rank 0's error message.
inline std::string pack(const RunResult& r) {
  std::string out;
  put(out, std::int64_t{1});
  put(out, static_cast<std::int64_t>(r.losses.size()));
  for (double loss : r.losses) put(out, loss);
  put(out, static_cast<std::int64_t>(r.params.size()));
  for (const at::Tensor& p : r.params) {
    const at::Tensor c = p.contiguous();
    put(out, static_cast<std::int64_t>(c.dim()));
    for (std::int64_t size : c.sizes()) put(out, size);
    out.append(static_cast<const char*>(c.data_ptr()), c.numel() * sizeof(double));
  }
  return out;
}

inline RunResult unpack(const std::string& in) {
  std::size_t at = 0;
  RunResult r;
  if (take<std::int64_t>(in, at) != 1)
    throw std::runtime_error("the reference run failed on rank 0: " + in.substr(sizeof(std::int64_t)));
  for (auto n = take<std::int64_t>(in, at); n > 0; --n) r.losses.push_back(take<double>(in, at));
  for (auto n = take<std::int64_t>(in, at); n > 0; --n) {
    std::vector<std::int64_t> sizes(take<std::int64_t>(in, at));
    for (std::int64_t& size : sizes) size = take<std::int64_t>(in, at);
    at::Tensor p = at::empty(sizes, at::kDouble);
    const std::size_t bytes = p.numel() * sizeof(double);
    if (at + bytes > in.size()) throw std::runtime_error("parity: the broadcast reference is cut short");
    std::memcpy(p.data_ptr(), in.data() + at, bytes);
    at += bytes;
    r.params.push_back(p);
  }
  return r;
}

#ifdef TESSERA_WITH_MPI
// Every rank waits here for the last to arrive, asleep between looks (a blocking MPI call would spin on its core,
// which rank 0 needs for the reference run, and so would the other tests beside this one).
inline void barrier_asleep() {
  MPI_Request request;
  MPI_Ibarrier(dist::World::instance().comm(), &request);
  for (int done = 0; MPI_Test(&request, &done, MPI_STATUS_IGNORE), !done;)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
}
#endif

}  // namespace detail

// The same experiment with NoShard and NoOffload, one process, world_size() * batch_size rows: computed on rank 0
// and broadcast (losses and parameters); an error there is thrown on every rank, so none waits for a result.
template <class Exp>
RunResult reference(RunConfig cfg, std::int64_t steps) {
  using Ref = ExperimentSpec<typename Exp::model, NoShard, typename Exp::precision, typename Exp::checkpointing,
                             typename Exp::optimizer, NoOffload, typename Exp::adapter>;
  cfg.batch_size *= world_size();
  cfg.lr_scaling = LrScaling::none;
  cfg.wrap_blocks = "all";  // NoShard has no FSDP units
  if (world_size() == 1) {
    SoloScope solo;
    return train<Ref>(cfg, steps);
  }
#ifdef TESSERA_WITH_MPI
  std::string bytes;
  if (world_rank() == 0) {
    try {
      SoloScope solo;
      bytes = detail::pack(train<Ref>(cfg, steps));
    } catch (const std::exception& e) {
      bytes.clear();
      detail::put(bytes, std::int64_t{0});
      bytes += e.what();
    }
  }
  detail::barrier_asleep();
  dist::World::instance().broadcast(bytes, 0);
  return detail::unpack(bytes);
#else
  throw std::logic_error("parity: a job of several ranks without MPI");
#endif
}

// Every step's loss and every unit's final parameters within `tol` relative of the reference.
inline void check_parity(const RunResult& got, const RunResult& want, double tol) {
  REQUIRE(got.losses.size() == want.losses.size());
  for (std::size_t s = 0; s < got.losses.size(); ++s) {
    INFO("step " << s << " loss " << got.losses[s] << " vs reference " << want.losses[s]);
    CHECK(std::abs(got.losses[s] - want.losses[s]) <= tol * std::abs(want.losses[s]));
  }
  REQUIRE(got.params.size() == want.params.size());
  for (std::size_t u = 0; u < got.params.size(); ++u) {
    INFO("unit " << u);
    CHECK(rel_norm_diff(got.params[u], want.params[u]) <= tol);
  }
}

// The parity check, and a guard that training moved every unit's parameters by more than `min_move` relative (the
// comparison is not of two copies of the initial weights).
template <class Exp>
void check_against_reference(const RunConfig& cfg, double tol, std::int64_t steps = 3, double min_move = 1e-4) {
  INFO("ranks " << world_size() << ", batch_size " << cfg.batch_size << ", accumulate " << cfg.accumulate_grad_batches);
  const RunResult got = train<Exp>(cfg, steps);
  const RunResult want = reference<Exp>(cfg, steps);
  check_parity(got, want, tol);
  const RunResult initial = reference<Exp>(cfg, 0);
  for (std::size_t u = 0; u < want.params.size(); ++u)
    if (want.params[u].numel()) CHECK(rel_norm_diff(want.params[u], initial.params[u]) > min_move);  // adapters: empty units
}

}  // namespace tessera::testing
