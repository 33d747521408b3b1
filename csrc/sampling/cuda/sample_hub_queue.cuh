// The queue of a hop's hub draws, shared by the homogeneous and heterogeneous CUDA
// samplers: nodes whose weighted or temporal draws must look at many neighbours are
// queued by the draw kernel and drawn by the next kernel, taken one at a time by
// whichever warp (or, for giants, block) is free.
//
// Degrees vary by orders of magnitude (on a products-like graph a node reached along an
// edge has ~1,100 neighbours, a few have 20,000; an ogbn-mag-like field of study has up
// to 30,000 papers), so a fixed share of the queue per warp left most of the GPU idle
// while a few warps drew long lists (SMs active 45% of hop 2's time on products,
// weighted, 1024 x [15, 10, 5]). Giants (weighted nodes of more than kBlockDegree
// neighbours) are queued apart, from the end of the same buffer, drawn by a whole block
// each, and taken first, so the longest draws start earliest.
#pragma once

#include <cstdint>

#include "sample_warp_draws.cuh"

namespace pyg_accel {

// Queued nodes with more than this many neighbours drawn weighted without replacement
// ("giants") are drawn by a whole block: a slice each for its warps (at least 4 steps
// each), then one merge of their top-k lists.
#ifndef PYG_ACCEL_BLOCK_DEGREE
#define PYG_ACCEL_BLOCK_DEGREE 4096
#endif
constexpr int64_t kBlockDegree = PYG_ACCEL_BLOCK_DEGREE;

// Whether a queued node is a giant: weighted draws without replacement (k <= 32, as
// warp_can_draw allows) from more than kBlockDegree neighbours.
__device__ __forceinline__ bool is_giant(const NodeDraw& d) {
  return d.weighted() && d.fanout >= 0 && d.degree > kBlockDegree;
}

// Queues this lane's node `value` (`heavy`: it has one) as a hub, at the front of
// `queue` (`hubs` counts them), or as a giant, from the back of the queue's buffer of
// `len` entries (`giants` counts them; together they never exceed the buffer).
__device__ __forceinline__ void enqueue_hub(bool heavy, bool giant, int64_t value, int64_t* hubs, int64_t* giants,
                                            int64_t* queue, int64_t len) {
  warp_enqueue(heavy && !giant, value, hubs, queue);
  warp_enqueue(heavy && giant, value, giants, queue + len, /*from_back=*/true);
}

// The next item for the whole block (every thread the same), taken from `claimed`;
// `count` or more once none is left. Every thread of the block calls it.
__device__ __forceinline__ int64_t block_next_item(int64_t* claimed) {
  __shared__ int64_t item;
  if (threadIdx.x == 0) item = static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(claimed), 1ull));
  __syncthreads();
  const int64_t mine = item;
  __syncthreads();  // (read by all before thread 0 claims again)
  return mine;
}

// The next item for a warp (every lane the same), taken from `claimed`; `count` or more
// once none is left. It is claimed one item ahead (`ahead`, lane 0's, from
// warp_first_claim: the atomic's answer is only read when the next item starts), so a
// warp does not wait on the atomic between items.
__device__ __forceinline__ unsigned long long warp_first_claim(int64_t* claimed) {
  return lane_id() == 0 ? atomicAdd(reinterpret_cast<unsigned long long*>(claimed), 1ull) : 0ull;
}
__device__ __forceinline__ int64_t warp_next_item(unsigned long long& ahead, int64_t* claimed) {
  const int64_t item = static_cast<int64_t>(__shfl_sync(kFullWarp, ahead, 0));
  if (lane_id() == 0) ahead = atomicAdd(reinterpret_cast<unsigned long long*>(claimed), 1ull);
  return item;
}

// draw_weighted without replacement (k <= 32) of a giant whose edges are [start, start
// + degree), by a block of kWarps warps: warp w offers the w-th slice of the positions
// to a top-k of its own; warp 0 then offers the slices' lists in slice order (each in
// its held order: keys descending, equal keys by position), which keeps draw_weighted's
// result, into out[0, k). Every thread of the block calls it.
template <int kWarps>
__device__ void block_draw_weighted(EdgeWeights weight, int64_t start, int64_t degree, uint64_t key, int64_t k,
                                    int64_t* out) {
  __shared__ double slice_key[kWarps][32];
  __shared__ int64_t slice_pos[kWarps][32];
  __shared__ int64_t slice_held[kWarps];
  const int warp = static_cast<int>(threadIdx.x / 32), lane = lane_id();
  const int64_t width = (degree + kWarps - 1) / kWarps;
  const int64_t begin = start + min(degree, warp * width), end = start + min(degree, (warp + 1) * width);
  WarpTopK slice{k};
  warp_offer_weighted(weight, start, begin, end, key, slice);
  slice_key[warp][lane] = slice.key;
  slice_pos[warp][lane] = slice.pos;
  if (lane == 0) slice_held[warp] = slice.n;
  __syncthreads();
  if (warp == 0) {
    WarpTopK top{k};
    for (int w = 0; w < kWarps; ++w) {
      const bool held = lane < slice_held[w];
      const double c = held ? slice_key[w][lane] : 0.0;
      const bool wanted = top.wants(c);  // (every lane: a shuffle)
      top.offer_lanes(held && wanted, c, held ? slice_pos[w][lane] : -1);
    }
    if (lane < k) out[lane] = top.pos;
  }
  __syncthreads();  // (the slices' lists are reused)
}

// Draws a hop's queue: giants (`num_giants`, ending at `giants_end`, claimed through
// `claimed[1]`) by whole blocks, with giant(j) drawing the j-th; then the hubs
// (`num_hubs`, from `hubs`, claimed through `claimed[0]`) a warp each, with hub(q)
// drawing the q-th. Every thread of the grid calls it (blocks of kWarps warps).
template <int kWarps, typename Giant, typename Hub>
__device__ void draw_hub_queue(const int64_t* hubs, int64_t num_hubs, const int64_t* giants_end, int64_t num_giants,
                               int64_t* claimed, const Giant& giant, const Hub& hub) {
  for (int64_t j = block_next_item(claimed + 1); j < num_giants; j = block_next_item(claimed + 1)) {
    giant(giants_end[-1 - j]);
  }
  unsigned long long ahead = warp_first_claim(claimed);
  for (int64_t q = warp_next_item(ahead, claimed); q < num_hubs; q = warp_next_item(ahead, claimed)) {
    hub(hubs[q]);  // (warp-uniform)
  }
}

}  // namespace pyg_accel
