// An open-addressing hash map from non-negative int64 keys to int64 values: the CPU
// samplers' dedup table (node id, or tree and node id, -> local id).
//
// Linear probing over one power-of-two array of key/value pairs, kept at most half
// full, so an insert or lookup touches one or two cache lines and never allocates.
// std::unordered_map allocates a node per entry and chases a pointer per lookup; on
// the sampler's insert-heavy load (one emplace per sampled edge) that pass dominated
// the CPU kernel (docs/benchmarks.md).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace pyg_accel {

class FlatMap {
 public:
  explicit FlatMap(int64_t expected = 16) { rehash(capacity_for(expected)); }

  // Room for `more` inserts beyond the current size, so that none of them rehashes.
  void reserve_more(int64_t more) {
    const int64_t need = capacity_for(size_ + more);
    if (need > capacity()) rehash(need);
  }

  // (the value stored under `key`, whether it was inserted now): inserts `value` if
  // `key` (>= 0) is absent, else leaves the stored value, as std::unordered_map's emplace.
  std::pair<int64_t, bool> emplace(int64_t key, int64_t value) {
    if ((size_ + 1) * 2 > capacity()) rehash(capacity() * 2);
    for (uint64_t i = hash(key) & mask_;; i = (i + 1) & mask_) {
      Slot& slot = slots_[i];
      if (slot.key == kEmpty) {
        slot = {key, value};
        ++size_;
        return {value, true};
      }
      if (slot.key == key) return {slot.value, false};
    }
  }

  // Starts loading the slot `key` hashes to (a lookup issued ahead of its use hides the
  // cache miss behind the work in between).
  void prefetch(int64_t key) const { __builtin_prefetch(slots_.data() + (hash(key) & mask_), 1); }

  int64_t size() const { return size_; }

 private:
  struct Slot {
    int64_t key, value;
  };
  static constexpr int64_t kEmpty = -1;

  static uint64_t hash(int64_t key) {  // the finaliser of MurmurHash3: consecutive ids scatter
    uint64_t x = static_cast<uint64_t>(key);
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return x;
  }

  static int64_t capacity_for(int64_t entries) {  // at most half full
    int64_t c = 16;
    while (c < 2 * entries) c <<= 1;
    return c;
  }

  int64_t capacity() const { return static_cast<int64_t>(slots_.size()); }

  void rehash(int64_t capacity) {
    std::vector<Slot> old(static_cast<size_t>(capacity), Slot{kEmpty, 0});
    old.swap(slots_);
    mask_ = static_cast<uint64_t>(capacity - 1);
    size_ = 0;
    for (const Slot& slot : old) {
      if (slot.key != kEmpty) emplace(slot.key, slot.value);
    }
  }

  std::vector<Slot> slots_;
  uint64_t mask_ = 0;
  int64_t size_ = 0;
};

}  // namespace pyg_accel
