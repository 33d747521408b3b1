// Identity of an input tensor across calls, for caches of what was derived from it.
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

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

// Whether every tensor of a key is alive, and whether two keys name the same tensors.
inline bool all_alive(const std::vector<TensorId>& ids) {
  for (const TensorId& t : ids) {
    if (!t.alive()) return false;
  }
  return true;
}
inline bool all_same(const std::vector<TensorId>& a, const std::vector<TensorId>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i].same(b[i])) return false;
  }
  return true;
}

// Values derived from input tensors (a sync to compute, say), remembered while the
// caller passes the same, unmodified tensors: the kCapacity most recently used ones.
// Thread-safe; compute runs outside the lock.
template <typename Value, size_t kCapacity = 64>
class DerivedMemo {
 public:
  using Key = std::vector<TensorId>;

  template <typename Compute>
  Value get(const Key& key, const Compute& compute) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      known_.remove_if([](const std::pair<Key, Value>& k) { return !all_alive(k.first); });
      for (auto it = known_.begin(); it != known_.end(); ++it) {
        if (all_same(it->first, key)) {
          known_.splice(known_.begin(), known_, it);
          return known_.front().second;
        }
      }
    }
    const Value value = compute();
    std::lock_guard<std::mutex> lock(mutex_);
    known_.emplace_front(key, value);
    if (known_.size() > kCapacity) known_.pop_back();
    return value;
  }

  // Forgets every value (for tensors changed where no version counter sees it).
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    known_.clear();
  }

 private:
  std::mutex mutex_;
  std::list<std::pair<Key, Value>> known_;  // most recently used first
};

}  // namespace pyg_accel
