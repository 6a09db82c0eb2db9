// job::agree (engine/job.hpp) at whatever size the job has: facts alike pass; a rank whose facts differ makes every
// rank throw the same ConfigError, naming the lowest such rank, its first differing key and both values.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/dist/world.hpp"
#include "tessera/engine/job.hpp"

using tessera::ConfigError;
using tessera::dist::World;
using tessera::job::Fact;

namespace {

std::vector<Fact> facts(const std::string& lr) {
  return {{"lr", lr, "lr=" + lr}, {"seed", "42", "seed=42"}};
}

// Runs agree and returns its message on this rank ("" when it passed).
std::string agree_message(const std::vector<Fact>& mine) {
  try {
    tessera::job::agree("the test", mine, "the fix");
    return {};
  } catch (const ConfigError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("job::agree: ranks with the same facts go on", "[dist]") {
  CHECK(agree_message(facts("0.001")).empty());
}

TEST_CASE("job::agree: the lowest differing rank's first difference ends every rank", "[dist]") {
  World& world = World::instance();
  if (world.size() == 1) return;  // a job of one agrees with itself
  // Ranks 1 and up differ; rank 1 is named, with its value and rank 0's.
  const std::string message = agree_message(facts(world.rank() == 0 ? "0.001" : "0.1"));
  CHECK(message == "ranks disagree on the test: rank 1 has lr=0.1 where rank 0 has lr=0.001; the fix");
}

TEST_CASE("job::agree: a key one rank lacks is named", "[dist]") {
  World& world = World::instance();
  if (world.size() == 1) return;
  std::vector<Fact> mine = facts("0.001");
  if (world.rank() == world.size() - 1) mine.push_back({"--help", "given", "--help"});
  const std::string message = agree_message(mine);
  CHECK(message == "ranks disagree on the test: rank " + std::to_string(world.size() - 1) +
                       " has --help where rank 0 has no --help; the fix");
}
