#pragma once
// defines: freeing and refilling a tensor's storage under the tensor objects that view it. FullShard drops a
// unit's gathered parameters after its forward (PyTorch FSDP does the same), while every view of them,
// including those an autograd graph saved, stays valid as an object; the backward refills them.
#include <ATen/core/Tensor.h>
#include <c10/core/StorageImpl.h>

#include <cstddef>

namespace tessera::storage {

// The bytes go back to the allocator and the storage reports size 0.
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

}  // namespace tessera::storage
