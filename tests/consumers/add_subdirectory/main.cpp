// A research program that names its experiment in code rather than through tessera_add_experiment().
#include <tessera/tessera.hpp>

using Experiment = tessera::Experiment<tessera::models::Llama, tessera::Sgd, tessera::Bf16True>;

int main(int argc, char** argv) { return tessera::main<Experiment>(argc, argv); }
