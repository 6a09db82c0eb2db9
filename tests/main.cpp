// The main of tessera_tests.
#include "catch_session.hpp"

int main(int argc, char** argv) { return tessera::test::run_catch_session(argc, argv); }
