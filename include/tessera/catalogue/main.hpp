#pragma once
// defines: tessera::catalogue::run(argc, argv, binary, program), the program of a catalogue entry: `program` (the
// entry's tessera::main<Exp>, main.hpp) with the entry's settings as defaults (the command line's key=value
// override them), its banner printed first and --list printing the whole catalogue. tessera_catalogue_entry()
// generates each entry's main, and compiles the program of each experiment type once for every entry of that type
// (cmake/TesseraCatalogue.cmake); this header is all an entry's main compiles.
#include <cstdio>
#include <string_view>

#include "tessera/catalogue/entry.hpp"
#include "tessera/main_options.hpp"

namespace tessera::catalogue {

// tessera::main<Exp> of one experiment type, with the options given.
using Program = int (*)(int argc, char** argv, const MainOptions& options);

inline int run(int argc, char** argv, std::string_view binary, Program program) {
  const std::span<const Entry> all = entries();
  const Entry* entry = find_entry(all, binary);
  if (entry == nullptr) {  // a build whose generated table lacks this binary: not a user's mistake
    std::fprintf(stderr, "error: %.*s is not in the catalogue this binary was built with; rebuild it\n",
                 static_cast<int>(binary.size()), binary.data());
    return 1;
  }
  const MainOptions options{split_args(entry->defaults), banner(*entry), [all] { return format_table(all); }};
  return program(argc, argv, options);
}

}  // namespace tessera::catalogue
