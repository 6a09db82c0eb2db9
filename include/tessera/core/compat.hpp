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

#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>

#include <cstddef>

namespace tessera::compat {

// Frees a tensor's storage while every view of it (including those an autograd graph saved) stays
// valid as an object: the bytes go back to the allocator and the storage reports size 0. FullShard
// uses this to drop a unit's gathered parameters after its forward (PyTorch FSDP does the same).
inline void free_storage(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(c10::DataPtr(nullptr, t.device()));
  s->set_nbytes(std::size_t{0});
}

// Gives a storage freed by free_storage `nbytes` again, from the same allocator (contents undefined).
inline void restore_storage(const at::Tensor& t, std::size_t nbytes) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(s->allocator()->allocate(nbytes));
  s->set_nbytes(nbytes);
}

inline bool storage_freed(const at::Tensor& t) { return t.storage().nbytes() == 0; }

}  // namespace tessera::compat
