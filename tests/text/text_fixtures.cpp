// The committed tokenizers' directory as the build gives it (text_fixtures.hpp): the one file of tessera_tests
// compiled with this checkout's path, so that the test files reading fixtures compile alike in any clone (ccache).
#include "text_fixtures.hpp"

namespace tessera::testing {

std::filesystem::path text_fixtures_dir() { return TESSERA_TEXT_FIXTURES; }

}  // namespace tessera::testing
