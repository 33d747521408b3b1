// Identity of an input tensor across calls, for caches of what was derived from it.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

namespace pyg_accel {

// Identity of an input tensor: its storage (weakly held), data pointer, size and
// version, so something derived from it is reused only while the caller passes the
// same, unmodified tensor. An entry whose storage has died is dead (alive() is false)
// and must be dropped before a lookup: its address may have been reused.
struct TensorId {
  const void* ptr = nullptr;
  int64_t numel = 0;
  int64_t version = 0;
  std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;

  static TensorId of(const at::Tensor* t) {
    TensorId id;
    if (t == nullptr || !t->defined()) return id;
    id.ptr = t->data_ptr();
    id.numel = t->numel();
    id.version = t->is_inference() ? 0 : static_cast<int64_t>(t->_version());
    id.storage = t->storage().getWeakStorageImpl();
    return id;
  }
  bool alive() const { return !storage.has_value() || !storage->expired(); }
  bool same(const TensorId& o) const { return ptr == o.ptr && numel == o.numel && version == o.version; }
};

}  // namespace pyg_accel
