#pragma once
// defines: every difference between the LibTorch versions tessera builds against (1.13 from Debian on CPU
// machines, 2.x with CUDA on GPU machines). Nothing else in tessera tests TORCH_VERSION_*.
#include <torch/version.h>

#define TESSERA_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// c10::Allocator::allocate() lost its `const` in LibTorch 2.3 (and gained a pure virtual copy_data(),
// which implementers simply always define).
#if TESSERA_TORCH_AT_LEAST(2, 3)
#define TESSERA_ALLOCATE_CONST
#else
#define TESSERA_ALLOCATE_CONST const
#endif
