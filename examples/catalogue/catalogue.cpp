// tessera-catalogue: the table of the seed catalogue (every lab step, its binary, experiment type and defaults).
#include <cstdio>
#include <string_view>

#include "tessera/catalogue/entry.hpp"

int main(int argc, char** argv) {
  using namespace tessera::catalogue;
  if (argc == 2 && (std::string_view(argv[1]) == "--help" || std::string_view(argv[1]) == "-h")) {
    std::puts("usage: tessera-catalogue [binary]\n\n  no argument: the table of every catalogue entry (as --list of "
              "any entry)\n  binary: that entry's banner (seed, step, experiment, defaults, variants, launch)");
    return 0;
  }
  if (argc == 2) {
    const Entry* entry = find_entry(entries(), argv[1]);
    if (entry == nullptr) {
      std::fprintf(stderr, "error: '%s' is not a catalogue binary; run tessera-catalogue for the list\n", argv[1]);
      return 2;
    }
    std::puts(banner(*entry).c_str());
    return 0;
  }
  if (argc > 2) {
    std::fputs("error: give at most one binary name; run tessera-catalogue --help\n", stderr);
    return 2;
  }
  std::fputs(format_table(entries()).c_str(), stdout);
  return 0;
}
