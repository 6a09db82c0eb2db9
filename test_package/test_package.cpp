// One experiment, one binary: the package's headers, library and LibTorch, linked and run for a training step.
#include <tessera/tessera.hpp>

using Experiment = tessera::Experiment<tessera::models::Llama, tessera::Sgd>;

int main(int argc, char** argv) { return tessera::main<Experiment>(argc, argv); }
