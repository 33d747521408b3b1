// The kernel that draws a hop's queued nodes (sample_hub_queue.cuh), one for both CUDA
// samplers: each gives it a Hop that says where the hop's queue is and, for a queued
// item, what it draws from, with which key, how many, and where the draws go.
#pragma once

#include <cstdint>

#include "../node_draw.h"
#include "sample_hub_queue.cuh"
#include "sample_launch.cuh"
#include "sample_warp_draws.cuh"

namespace pyg_accel {
namespace {

// One queued item's draw: k draws from d, keyed by key, into out[0, k).
struct QueuedDraw {
  NodeDraw d;
  uint64_t key;
  int64_t k;
  int64_t* out;
};

// A hop's queue: hubs from the front of `queue` (*hubs of them), giants from the back of
// its `len` entries (*giants of them), and the two claim counters.
struct HubQueue {
  const int64_t* queue;
  int64_t len;
  const int64_t* hubs;
  const int64_t* giants;
  int64_t* claimed;  // [2]: hubs, giants taken
};

#ifndef PYG_ACCEL_HUB_MIN_BLOCKS
#define PYG_ACCEL_HUB_MIN_BLOCKS 0  // resident blocks per SM asked of the compiler (0: its choice, 64 registers)
#endif
#if PYG_ACCEL_HUB_MIN_BLOCKS > 0
#define PYG_ACCEL_HUB_BOUNDS __launch_bounds__(kBlock, PYG_ACCEL_HUB_MIN_BLOCKS)
#else
#define PYG_ACCEL_HUB_BOUNDS __launch_bounds__(kBlock)
#endif

// The hop's queued items: giants by whole blocks, first, then the others a warp each,
// each taken by whichever is free. Hop: `HubQueue queue() const` and
// `QueuedDraw queued(int64_t item) const` (device).
template <typename Hop>
__global__ void PYG_ACCEL_HUB_BOUNDS hub_draw_kernel(Hop hop) {
  after_previous_kernel();
  constexpr int kWarps = kBlock / 32;
  const HubQueue q = hop.queue();
  draw_hub_queue<kWarps>(
      q.queue, *q.hubs, q.queue + q.len, *q.giants, q.claimed,
      [&](int64_t item) {
        const QueuedDraw h = hop.queued(item);
        block_draw_weighted<kWarps>(h.d.weight, h.d.start, h.d.degree, h.key, h.k, h.out);
      },
      [&](int64_t item) {
        const QueuedDraw h = hop.queued(item);
        warp_draw_filtered(h.d, h.key, h.k, h.out);
      });
}

}  // namespace
}  // namespace pyg_accel
