// Single-pass prefix sums across the blocks of one kernel: decoupled look-back
// (Merrill & Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back").
//
// Block b publishes its own total, then looks back over the tiles before it, summing
// their totals until it meets one that has published its inclusive prefix, and
// publishes its own inclusive prefix. A block waits only for lower-numbered blocks,
// which the GPU has started before it.
//
// A tile's status is one 64-bit word, written at once (value and state cannot be seen
// apart): [epoch (20 bits) | state (2 bits) | value (42 bits)]. A word of another
// epoch reads as "not yet published", so the status arrays are never cleared between
// samples: each sample (and each scan inside it) uses the words with its own epoch,
// and they are zeroed only when the epochs wrap.
#pragma once

#include <cstdint>

namespace pyg_accel {

constexpr int kStatusValueBits = 42;
constexpr uint64_t kStatusValueMask = (uint64_t{1} << kStatusValueBits) - 1;
constexpr uint64_t kStatusAggregate = uint64_t{1} << kStatusValueBits;      // the tile's own total
constexpr uint64_t kStatusInclusive = uint64_t{2} << kStatusValueBits;      // total up to the tile
constexpr uint64_t kStatusStateMask = uint64_t{3} << kStatusValueBits;
constexpr int kStatusEpochShift = kStatusValueBits + 2;

__device__ __forceinline__ void publish_status(unsigned long long* status, uint64_t epoch, uint64_t state,
                                               int64_t value) {
  const unsigned long long word = (epoch << kStatusEpochShift) | state | static_cast<uint64_t>(value);
  atomicExch(status, word);
}

// The sum of the totals of tiles [0, tile) of `status`, computed by one full warp
// (every lane calls it; all lanes get the result). The tile's own aggregate must be
// published before, so that later tiles do not wait on this one.
__device__ __forceinline__ int64_t look_back(const unsigned long long* status, int64_t tile, uint64_t epoch) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  int64_t exclusive = 0;
  for (int64_t window = tile - 1; window >= 0; window -= 32) {
    const int64_t index = window - lane;  // lane 0: the nearest predecessor
    uint64_t word = kStatusInclusive;     // (before tile 0: an inclusive prefix of 0)
    if (index >= 0) {
      do {
        word = *reinterpret_cast<const volatile unsigned long long*>(status + index);
      } while ((word >> kStatusEpochShift) != epoch);
    }
    const bool inclusive = (word & kStatusStateMask) == kStatusInclusive;
    const unsigned found = __ballot_sync(0xffffffffu, inclusive);
    const int stop = found != 0 ? __ffs(found) - 1 : 31;  // sum lanes 0..stop
    int64_t value = lane <= stop ? static_cast<int64_t>(word & kStatusValueMask) : 0;
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(0xffffffffu, value, offset);
    exclusive += value;
    if (found != 0) break;
  }
  return exclusive;
}

}  // namespace pyg_accel
