// expect: N must be at least 1
#include <tessera/checkpoint/every_nth.hpp>

constexpr bool instantiate = tessera::CheckpointEveryNth<0>::checkpointed(3);
