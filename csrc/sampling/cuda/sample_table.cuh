// The CUDA sampler's dedup table: open addressing from a node key (< 2^44) to the
// first sampled edge that reached it and, once numbered, its local id.
//
// A slot is 16 bytes (key and value side by side: one memory sector per probe), and
// both words carry the epoch of the sample that wrote them in their top 20 bits. A
// new sample uses a new epoch, so every slot of an older epoch reads as free and the
// table is never cleared between samples (only when the epochs wrap).
//
// value = epoch | assigned bit | 43 low bits, where the low bits hold
//   kMaxPosition - (smallest edge position that reached the key)   while unassigned,
//   the local id                                                   once assigned,
// so one atomicMax keeps the smallest position and can never undo an assignment. A
// new key is inserted with its first position in one 16-byte compare-and-swap (sm_90).
#pragma once

#include <cstdint>

#include "../sampling_rng.h"

namespace pyg_accel {

constexpr int kEpochShift = 44;
constexpr uint64_t kKeyMask = (uint64_t{1} << kEpochShift) - 1;
constexpr uint64_t kAssigned = uint64_t{1} << 43;
constexpr uint64_t kLowMask = kAssigned - 1;
constexpr uint64_t kMaxPosition = kLowMask;
constexpr int64_t kMaxEpoch = (int64_t{1} << (64 - kEpochShift)) - 1;

struct alignas(16) TableSlot {
  unsigned long long key;    // epoch | node key
  unsigned long long value;  // epoch | assigned | position or local id
};

struct Table {
  TableSlot* slots;
  int64_t mask;  // capacity - 1 (a power of two)
};

__device__ __forceinline__ unsigned long long tag(uint64_t epoch, uint64_t low) {
  return (epoch << kEpochShift) | low;
}

__device__ __forceinline__ bool current(unsigned long long word, uint64_t epoch) {
  return (word >> kEpochShift) == epoch;
}

// Swaps the 16-byte slot from `seen` to (key, value) in one atomic (sm_90); returns
// whether it did, else leaves the slot's current words in `seen`.
__device__ __forceinline__ bool slot_cas(TableSlot* slot, ulonglong2& seen, unsigned long long key,
                                         unsigned long long value) {
  unsigned long long old_key, old_value;
  asm volatile(
      "{\n\t.reg .b128 d, b, c;\n\t"
      "mov.b128 b, {%2, %3};\n\t"
      "mov.b128 c, {%4, %5};\n\t"
      "atom.global.cas.b128 d, [%6], b, c;\n\t"
      "mov.b128 {%0, %1}, d;\n\t}"
      : "=l"(old_key), "=l"(old_value)
      : "l"(seen.x), "l"(seen.y), "l"(key), "l"(value), "l"(slot)
      : "memory");
  const bool swapped = old_key == seen.x && old_value == seen.y;
  seen = make_ulonglong2(old_key, old_value);
  return swapped;
}

// Returns the key's slot and records that edge `position` reached it (the smallest
// position wins). A new key takes a free (older-epoch) slot together with its
// position in one 16-byte compare-and-swap. A position that already lost (the key is
// numbered, or an earlier position claimed it) makes no atomic at all, so the many
// edges reaching a hub do not queue on its slot.
__device__ __forceinline__ int64_t table_insert_claim(const Table& t, uint64_t epoch, uint64_t key,
                                                      int64_t position) {
  const unsigned long long mine = tag(epoch, key);
  const unsigned long long claim = tag(epoch, kMaxPosition - static_cast<uint64_t>(position));
  int64_t slot = static_cast<int64_t>(mix64(key) & static_cast<uint64_t>(t.mask));
  while (true) {
    TableSlot* s = &t.slots[slot];
    ulonglong2 seen = __ldcg(reinterpret_cast<const ulonglong2*>(s));  // (a torn read only fails the swap)
    while (seen.x != mine && !current(seen.x, epoch)) {  // free: take it
      if (slot_cas(s, seen, mine, claim)) return slot;
    }
    if (seen.x == mine) {
      if (seen.y < claim) atomicMax(&s->value, claim);  // (older epochs compare smaller, assigned words larger)
      return slot;
    }
    slot = (slot + 1) & t.mask;
  }
}

// Inserts `key` and claims it for position p, once per distinct key of the warp: lanes
// with the same key elect the lowest lane (the smallest p) to do the atomics, so
// repeats of a node inside a warp add no atomic traffic. Every lane of the warp must
// call it (`live` false: a lane with nothing to insert, whose key must be unique).
__device__ __forceinline__ int64_t claim_in_warp(const Table& t, uint64_t epoch, int64_t key, bool live, int64_t p) {
  const unsigned peers = __match_any_sync(0xffffffffu, static_cast<unsigned long long>(key));
  const int leader = __ffs(peers) - 1;
  int64_t slot = 0;
  if (live && static_cast<int>(threadIdx.x % 32) == leader) {
    slot = table_insert_claim(t, epoch, static_cast<uint64_t>(key), p);
  }
  return __shfl_sync(0xffffffffu, slot, leader);
}

// Whether `position` is the first edge to reach the slot's still unnumbered key. (Read
// through L2, where the atomics are made: the claims may come from the same kernel,
// before a barrier, and this SM's L1 may hold the slot from the insert.)
__device__ __forceinline__ bool table_is_first(const Table& t, int64_t slot, uint64_t epoch, int64_t position) {
  const unsigned long long v = __ldcg(&t.slots[slot].value);
  return current(v, epoch) && !(v & kAssigned) && kMaxPosition - (v & kLowMask) == static_cast<uint64_t>(position);
}

__device__ __forceinline__ void table_assign(const Table& t, int64_t slot, uint64_t epoch, int64_t local_id) {
  t.slots[slot].value = tag(epoch, kAssigned | static_cast<uint64_t>(local_id));
}

__device__ __forceinline__ int64_t table_local_id(const Table& t, int64_t slot) {
  return static_cast<int64_t>(t.slots[slot].value & kLowMask);
}

}  // namespace pyg_accel
