#pragma once
// run_catch_session: Catch::Session().run(argc, argv), from Catch2's implementation compiled once
// (tests/catch_session.cpp, the object library tessera_catch_session) for every test binary. Each binary's main
// calls it (tests/main.cpp; tests/dist/main.cpp and tests/dist/nccl/main.cpp, around an MPI World).
namespace tessera::test {

int run_catch_session(int argc, char** argv);

}  // namespace tessera::test
