#pragma once
// defines: tessera::catalogue::Entry, one step of a lab (a seed under ../seeds) as one binary whose defaults are
// that step's settings, and the catalogue's table (tessera-catalogue, or any entry's --list).
//   build/catalogue/seed002-baseline                  the step as the seed runs it (its H100 variant)
//   build/catalogue/seed002-baseline batch_size=32    the seed's A100 variant (Entry::a100)
//   build/catalogue/seed002-baseline model=tiny max_steps=2   what the tests run (Entry::tiny)
// Entries are declared one line each with tessera_catalogue_entry() (cmake/TesseraCatalogue.cmake), which
// generates entries() for the build.
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::catalogue {

struct Entry {
  std::string_view binary;      // "seed002-baseline"
  std::string_view seed;        // "002"
  std::string_view step;        // "baseline"
  std::string_view experiment;  // the C++ type, e.g. "tessera::Experiment<tessera::models::Blip2Opt, tessera::Fp32>"
  std::string_view defaults;    // "key=value ...": the step's settings (the seed's H100 variant where it has two)
  std::string_view a100;        // "key=value ..." over defaults for the seed's A100 variant; "" when the same
  std::string_view tiny;        // "key=value ..." over defaults for the tiny variant (a CPU-sized model)
  int ranks = 1;                // the seed's devices: start it with mpirun -np ranks (srun -n ranks)
  std::string_view title;       // what the step does and should teach
};

// Every entry of the catalogue, in declaration order: defined by the build (tessera_catalogue_finish()).
std::span<const Entry> entries();

// The entry whose binary is `binary`, or nullptr.
const Entry* find_entry(std::span<const Entry> all, std::string_view binary);

// "a=1  b=2" -> {"a=1", "b=2"} (key=value words separated by spaces).
std::vector<std::string> split_args(std::string_view words);

// "Experiment<Blip2Opt, Fp32>": the type without its namespaces, for tables.
std::string short_type(std::string_view experiment);

// The table --list prints: seed | step | binary | ranks | experiment | defaults, one row per entry, then each
// entry's A100 variant where it has one.
std::string format_table(std::span<const Entry> all);

// The lines a catalogue binary prints first (and atop --help): seed, step, title, defaults, how to launch it.
std::string banner(const Entry& entry);

}  // namespace tessera::catalogue
