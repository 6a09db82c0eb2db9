// Catch2's implementation (its single header with CATCH_CONFIG_RUNNER): compiled once, for every test binary.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "catch_session.hpp"

namespace tessera::test {

int run_catch_session(int argc, char** argv) { return Catch::Session().run(argc, argv); }

}  // namespace tessera::test
