#pragma once
// defines: tessera::MainOptions, what a binary adds to tessera::main (main.hpp): defaults over RunConfig's, a
// banner printed first, and --list. Apart from main.hpp, so that a catalogue entry's main (catalogue/main.hpp)
// names it without compiling the library's templates.
#include <functional>
#include <string>
#include <vector>

namespace tessera {

struct MainOptions {
  std::vector<std::string> default_args;  // key=value, applied before the command line's
  std::string banner;                     // printed by rank 0 before the run and atop --help
  std::function<std::string()> list;      // what --list prints; empty: --list is not an option
};

}  // namespace tessera
