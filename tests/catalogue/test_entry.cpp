// tests: the catalogue's lookup, argument splitting and tables (catalogue/entry.hpp), on entries of the test's own.
#include <catch2/catch.hpp>

#include <array>
#include <string>

#include "tessera/catalogue/entry.hpp"

using namespace tessera::catalogue;

namespace {

constexpr std::array<Entry, 2> kEntries{{
    {"seed009-one", "009", "one", "tessera::Experiment<tessera::models::Llama, tessera::Bf16True>",
     "model=open-llama-7b batch_size=4", "batch_size=2", "model=tiny", 1, "one GPU"},
    {"seed009-four", "009", "four", "tessera::Experiment<tessera::models::Llama, tessera::FullShard>",
     "model=open-llama-7b  batch_size=8 ", "", "model=tiny global_batch_size=16", 4, "four GPUs"},
}};

}  // namespace

TEST_CASE("catalogue entries are found by binary name", "[catalogue]") {
  CHECK(find_entry(kEntries, "seed009-four") == &kEntries[1]);
  CHECK(find_entry(kEntries, "seed009-five") == nullptr);
}

TEST_CASE("an entry's defaults split into key=value arguments", "[catalogue]") {
  CHECK(split_args("model=open-llama-7b  batch_size=8 ") == std::vector<std::string>{"model=open-llama-7b", "batch_size=8"});
  CHECK(split_args("").empty());
  CHECK(split_args("   ").empty());
}

TEST_CASE("the table has a row per entry and the A100 variants, the banner says how to launch", "[catalogue]") {
  CHECK(short_type(kEntries[1].experiment) == "Experiment<Llama, FullShard>");
  const std::string table = format_table(kEntries);
  INFO(table);
  CHECK(table.rfind("seed | step | binary       | ranks | experiment                   | defaults\n", 0) == 0);
  CHECK(table.find("009  | one  | seed009-one  | 1     | Experiment<Llama, Bf16True>  | model=open-llama-7b batch_size=4\n") !=
        std::string::npos);
  CHECK(table.find("A100 variants") != std::string::npos);
  CHECK(table.find("  seed009-one   batch_size=2\n") != std::string::npos);
  const std::string one = banner(kEntries[0]);
  CHECK(one.rfind("[cfg] seed 009, step one (seed009-one): one GPU\n", 0) == 0);
  CHECK(one.find("[cfg]   A100 variant: batch_size=2\n") != std::string::npos);
  CHECK(one.find("launch:     build/catalogue/seed009-one") != std::string::npos);
  const std::string four = banner(kEntries[1]);
  CHECK(four.find("A100") == std::string::npos);
  CHECK(four.find("mpirun -np 4 build/catalogue/seed009-four   (Slurm: srun -n 4 build/catalogue/seed009-four)") !=
        std::string::npos);
  CHECK(four.find("tiny variant: model=tiny global_batch_size=16") != std::string::npos);
}
