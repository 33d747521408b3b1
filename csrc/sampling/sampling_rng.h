// The counter-based random numbers and draw counts shared by the CPU and CUDA
// samplers: the same (seed, hop, frontier slot, draw) gives the same number on both,
// so a seed gives the same sample on either device.
#pragma once

#include <cstdint>

#include "../common/host_device.h"

namespace pyg_accel {

PYG_ACCEL_HD uint64_t mix64(uint64_t x) {  // splitmix64 finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// A uniform integer in [0, bound) that depends only on (key, draw).
PYG_ACCEL_HD int64_t uniform_below(uint64_t key, uint64_t draw, int64_t bound) {
  const uint64_t r = mix64(key ^ mix64(draw + 0x632BE59BD9B4E019ull));
#ifdef __CUDA_ARCH__
  return static_cast<int64_t>(__umul64hi(r, static_cast<uint64_t>(bound)));
#else
  return static_cast<int64_t>((static_cast<unsigned __int128>(r) * static_cast<uint64_t>(bound)) >> 64);
#endif
}

// A uniform double in (0, 1] that depends only on (key, draw).
PYG_ACCEL_HD double uniform_open(uint64_t key, uint64_t draw) {
  const uint64_t r = mix64(key ^ mix64(draw + 0x632BE59BD9B4E019ull));
  return (static_cast<double>(r >> 11) + 1.0) * (1.0 / 9007199254740992.0);
}

// The key of hop `hop` (0-based) of a sample seeded with `random_seed`.
PYG_ACCEL_HD uint64_t hop_key(int64_t random_seed, int64_t hop) {
  return mix64(static_cast<uint64_t>(random_seed) ^ mix64(static_cast<uint64_t>(hop + 1)));
}

// The key of the node in frontier slot `slot` at a hop keyed `key`.
PYG_ACCEL_HD uint64_t slot_key(uint64_t key, int64_t slot) { return mix64(key ^ mix64(static_cast<uint64_t>(slot))); }

// The key of edge type `rel`'s draws at a hop keyed `key`: the hop's own key for a
// homogeneous graph (one edge type), else mixed with the edge type.
PYG_ACCEL_HD uint64_t type_key(uint64_t key, int64_t rel, bool homogeneous) {
  return homogeneous ? key : mix64(key ^ mix64(static_cast<uint64_t>(rel) + 0x51ED270B27E1D3A9ull));
}

// Neighbours drawn for a node of `degree` at `fanout` (-1: all).
PYG_ACCEL_HD int64_t num_to_draw(int64_t fanout, int64_t degree, bool replace) {
  if (fanout < 0 || (!replace && degree <= fanout)) return degree;
  return degree > 0 ? fanout : 0;
}

}  // namespace pyg_accel
