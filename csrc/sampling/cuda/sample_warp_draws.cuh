// Weighted and temporal draws of a node with many neighbours, made by a whole warp.
//
// A weighted or temporal draw must look at every neighbour of a node (its weight, or
// its time), unlike a uniform one (Floyd: work proportional to the fanout). One thread
// per node then lets a hub stall its block: on a products-size graph (in-degrees up
// to ~23k) one batch of 1024 x [15, 10, 5] took 24 ms weighted and 73 ms temporal,
// against 0.2 ms uniform. So nodes with more than kWarpDegree neighbours are counted
// and drawn by the 32 lanes of a warp together (TurboGNN's degree-aware assignment at
// warp granularity), while each lane still draws its own light node alone: counted by
// their own warp one after another; drawn a warp each from a queue over the whole grid.
// Every function here gives exactly the serial version's result (NodeDraw, node_draw.h,
// which the CPU kernel shares), and every lane of the warp must call it with the same
// arguments.
//
// The positions are read in steps of kWarpTiles x 32: each lane issues its loads for
// the step's tiles before testing any, so a lane has kWarpTiles reads in flight.
#pragma once

#include <cstdint>
#include <type_traits>

#include "../node_draw.h"

namespace pyg_accel {

constexpr unsigned kFullWarp = 0xffffffffu;
#ifndef PYG_ACCEL_WARP_DEGREE
#define PYG_ACCEL_WARP_DEGREE 64
#endif
constexpr int64_t kWarpDegree = PYG_ACCEL_WARP_DEGREE;  // more neighbours: a warp's node
constexpr int kWarpTiles = 4;
constexpr int64_t kWarpStep = 32 * kWarpTiles;

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x & 31); }

// Bits of the lanes below this one.
__device__ __forceinline__ unsigned lanes_below() { return (1u << lane_id()) - 1u; }

// The accepted positions of tile u of the step at `base` (ascending positions: base +
// 32 u + lane; descending: base - 32 u - lane), one bit per lane, for each tile.
template <bool kDescending, typename Accept>
__device__ __forceinline__ void accepted_tiles(const Accept& ok, int64_t base, int64_t begin, int64_t end,
                                               unsigned (&mask)[kWarpTiles]) {
  bool hit[kWarpTiles];
#pragma unroll
  for (int u = 0; u < kWarpTiles; ++u) {
    const int64_t e = kDescending ? base - 32 * u - lane_id() : base + 32 * u + lane_id();
    hit[u] = e >= begin && e < end && ok(e);
  }
#pragma unroll
  for (int u = 0; u < kWarpTiles; ++u) mask[u] = __ballot_sync(kFullWarp, hit[u]);
}

// Runs fn(src) with the whole warp for each lane src whose `flag` is set, in lane order
// (every lane of the warp calls it).
template <typename Fn>
__device__ __forceinline__ void for_each_flagged_lane(bool flag, const Fn& fn) {
  for (unsigned lanes = __ballot_sync(kFullWarp, flag); lanes != 0; lanes &= lanes - 1) fn(__ffs(lanes) - 1);
}

// Lane src's `value` (an integer or a pointer), for every lane.
template <typename T>
__device__ __forceinline__ T broadcast(T value, int src) {
  if constexpr (std::is_pointer_v<T>) {
    return reinterpret_cast<T>(__shfl_sync(kFullWarp, reinterpret_cast<unsigned long long>(value), src));
  } else {
    return __shfl_sync(kFullWarp, value, src);
  }
}

// Lane src's weights, for every lane.
__device__ __forceinline__ EdgeWeights broadcast(EdgeWeights value, int src) {
  return {broadcast(value.data, src), __shfl_sync(kFullWarp, static_cast<int>(value.single), src) != 0};
}

__device__ __forceinline__ bool broadcast(bool value, int src) {
  return __shfl_sync(kFullWarp, static_cast<int>(value), src) != 0;
}

// Lane src's node draw, for every lane.
__device__ __forceinline__ NodeDraw broadcast(const NodeDraw& d, int src) {
  NodeDraw theirs;
  theirs.start = broadcast(d.start, src), theirs.degree = broadcast(d.degree, src);
  theirs.fanout = broadcast(d.fanout, src), theirs.replace = broadcast(d.replace, src);
  theirs.weight = broadcast(d.weight, src);
  theirs.time = {broadcast(d.time.limit, src), broadcast(d.time.row, src), broadcast(d.time.node_time, src),
                 broadcast(d.time.edge_time, src), broadcast(d.time.num_src, src)};
  theirs.last = broadcast(d.last, src), theirs.time_sorted = broadcast(d.time_sorted, src);
  return theirs;
}

// Appends the `value` of each lane whose `flag` is set to `queue`, in lane order, after
// the *count entries already there (one atomic per warp). Every lane of the warp calls it.
// With `from_back`, entry j is written at queue[-1 - j] (queue: the end of its buffer),
// so two queues whose lengths sum to at most the buffer's can share it.
__device__ inline void warp_enqueue(bool flag, int64_t value, int64_t* count, int64_t* queue, bool from_back = false) {
  const unsigned lanes = __ballot_sync(kFullWarp, flag);
  if (lanes == 0) return;
  const int leader = __ffs(lanes) - 1;
  unsigned long long first = 0;
  if (lane_id() == leader) {
    first = atomicAdd(reinterpret_cast<unsigned long long*>(count), static_cast<unsigned long long>(__popc(lanes)));
  }
  first = __shfl_sync(kFullWarp, first, leader);
  const int64_t j = static_cast<int64_t>(first) + __popc(lanes & lanes_below());
  if (flag) queue[from_back ? -1 - j : j] = value;
}

// count_upto by a warp: the count may pass `cap` by less than a step.
template <typename Accept>
__device__ int64_t warp_count_upto(const Accept& ok, int64_t start, int64_t degree, int64_t cap) {
  int64_t n = 0;
  for (int64_t base = start; base < start + degree && n < cap; base += kWarpStep) {
    unsigned mask[kWarpTiles];
    accepted_tiles<false>(ok, base, start, start + degree, mask);
#pragma unroll
    for (int u = 0; u < kWarpTiles; ++u) n += __popc(mask[u]);
  }
  return n;
}

// Every accepted position, in CSC order, into out.
template <typename Accept>
__device__ void warp_take_all(const Accept& ok, int64_t start, int64_t degree, int64_t* out) {
  int64_t n = 0;
  for (int64_t base = start; base < start + degree; base += kWarpStep) {
    unsigned mask[kWarpTiles];
    accepted_tiles<false>(ok, base, start, start + degree, mask);
#pragma unroll
    for (int u = 0; u < kWarpTiles; ++u) {
      if (mask[u] >> lane_id() & 1u) out[n + __popc(mask[u] & lanes_below())] = base + 32 * u + lane_id();
      n += __popc(mask[u]);
    }
  }
}

// The last k accepted positions, in CSC order, into out[0, k) (k <= the accepted count).
template <typename Accept>
__device__ void warp_take_last(const Accept& ok, int64_t start, int64_t degree, int64_t k, int64_t* out) {
  int64_t n = 0;  // taken so far, from the end
  for (int64_t base = start + degree - 1; base >= start && n < k; base -= kWarpStep) {
    unsigned mask[kWarpTiles];
    accepted_tiles<true>(ok, base, start, start + degree, mask);
#pragma unroll
    for (int u = 0; u < kWarpTiles; ++u) {
      const int64_t rank = n + __popc(mask[u] & lanes_below());  // (lower lanes hold later positions)
      if ((mask[u] >> lane_id() & 1u) && rank < k) out[k - 1 - rank] = base - 32 * u - lane_id();
      n += __popc(mask[u]);
    }
  }
}

// The position of each lane's `ordinal`-th accepted position (-1: none asked), or -1.
template <typename Accept>
__device__ int64_t warp_find_ordinal(const Accept& ok, int64_t start, int64_t degree, int64_t ordinal) {
  int64_t n = 0, found = -1;
  for (int64_t base = start; base < start + degree && __any_sync(kFullWarp, ordinal >= n && found < 0);
       base += kWarpStep) {
    unsigned mask[kWarpTiles];
    accepted_tiles<false>(ok, base, start, start + degree, mask);
#pragma unroll
    for (int u = 0; u < kWarpTiles; ++u) {
      const int64_t c = __popc(mask[u]);
      if (ordinal >= n && ordinal < n + c) {  // drop the tile's first ordinal - n accepted lanes
        unsigned rest = mask[u];
        for (int64_t r = ordinal - n; r > 0; --r) rest &= rest - 1;
        found = base + 32 * u + __ffs(rest) - 1;
      }
      n += c;
    }
  }
  return found;
}

// draw_temporal (without 'last'), k <= 32 unless every eligible edge is taken.
__device__ inline void warp_draw_temporal_uniform(const NotLater& ok, int64_t start, int64_t degree, int64_t fanout,
                                                  bool replace, uint64_t key, int64_t k, int64_t* out) {
  const int64_t n = warp_count_upto(ok, start, degree, INT64_MAX);
  if (k == n && (fanout < 0 || !replace)) {
    warp_take_all(ok, start, degree, out);
    return;
  }
  if (lane_id() == 0) draw_uniform(0, n, k, replace, key, out);  // the ordinals, as the serial draw makes them
  __syncwarp();
  const int64_t ordinal = lane_id() < k ? out[lane_id()] : -1;
  __syncwarp();
  const int64_t position = warp_find_ordinal(ok, start, degree, ordinal);
  if (lane_id() < k) out[lane_id()] = position;
}

// The running top-k (k <= 32) of Efraimidis-Spirakis keys of a warp, in decreasing
// order: lane q holds entry q. A key enters as it would in draw_weighted's serial
// insertion (after the equal keys already held), so offering the keys in CSC order
// keeps the k best by (key descending, position ascending), draw_weighted's result.
struct WarpTopK {
  int64_t k;
  double key = 0.0;  // this lane's entry
  int64_t pos = -1;
  int64_t n = 0;  // entries held so far

  __device__ double kth() const { return __shfl_sync(kFullWarp, key, static_cast<int>(k - 1)); }
  // Whether a key `c` would be offered (it may still not enter: offer checks again).
  __device__ bool wants(double c) const { return n < k || c > kth(); }
  // Every lane, the same (c, p).
  __device__ void offer(double c, int64_t p) {
    if (n == k && !(c > kth())) return;
    const int lane = lane_id();
    const int at = __popc(__ballot_sync(kFullWarp, lane < n && key >= c));  // entries staying ahead
    const double up_key = __shfl_up_sync(kFullWarp, key, 1);
    const int64_t up = __shfl_up_sync(kFullWarp, pos, 1);
    if (lane > at && lane <= n && lane < k) key = up_key, pos = up;
    if (lane == at) key = c, pos = p;
    n = n < k ? n + 1 : k;
  }
  // Offers each lane's (c, p) where `offered`, in lane order.
  __device__ void offer_lanes(bool offered, double c, int64_t p) {
    for (unsigned lanes = __ballot_sync(kFullWarp, offered); lanes != 0; lanes &= lanes - 1) {
      const int src = __ffs(lanes) - 1;
      offer(__shfl_sync(kFullWarp, c, src), __shfl_sync(kFullWarp, p, src));
    }
  }
};

// Offers positions [begin, end) of a weighted node whose edges start at `origin` (the
// keys' counters are positions - origin) to `top`, in CSC order: each step's random
// numbers drawn by all lanes at once, the exact keys only where they may enter
// (may_exceed). W: float or double.
template <typename W>
__device__ inline void warp_offer_weighted(const W* weight, int64_t origin, int64_t begin, int64_t end,
                                           uint64_t key, WarpTopK& top) {
  const int lane = lane_id();
  for (int64_t base = begin; base < end; base += kWarpStep) {
    double w[kWarpTiles], r[kWarpTiles];
#pragma unroll
    for (int u = 0; u < kWarpTiles; ++u) {
      const int64_t e = base + 32 * u + lane;
      w[u] = e < end ? weight[e] : 0.0;
    }
#pragma unroll
    for (int u = 0; u < kWarpTiles; ++u) r[u] = w[u] > 0 ? uniform_open(key, base + 32 * u + lane - origin) : 1.0;
#pragma unroll
    for (int u = 0; u < kWarpTiles; ++u) {
      const double kth = top.kth();
      const bool may = w[u] > 0 && (top.n < top.k || may_exceed(r[u], w[u], kth));
      const double cand = may ? log(r[u]) / w[u] : 0.0;
      top.offer_lanes(may && (top.n < top.k || cand > kth), cand, base + 32 * u + lane);
    }
  }
}

__device__ inline void warp_offer_weighted(EdgeWeights weight, int64_t origin, int64_t begin, int64_t end,
                                           uint64_t key, WarpTopK& top) {
  if (weight.single) {
    warp_offer_weighted(weight.as<float>(), origin, begin, end, key, top);
  } else {
    warp_offer_weighted(weight.as<double>(), origin, begin, end, key, top);
  }
}

// draw_weighted without replacement and fanout >= 0, for k <= 32 (k <= the positive
// weights): the k largest keys, in decreasing order, into out[0, k).
__device__ inline void warp_draw_weighted(EdgeWeights weight, int64_t start, int64_t degree, uint64_t key, int64_t k,
                                          int64_t* out) {
  WarpTopK top{k};
  warp_offer_weighted(weight, start, start, start + degree, key, top);
  if (lane_id() < k) out[lane_id()] = top.pos;
}

// NodeDraw::count() of a filtered node (weighted, or temporal in a column not in time
// order) by the whole warp.
__device__ inline int64_t warp_count(const NodeDraw& d) {
  if (d.weighted()) {
    const int64_t n = warp_count_upto(PositiveWeight{d.weight}, d.start, d.degree, count_cap(d.fanout, d.replace));
    return weighted_draws(n, d.fanout, d.replace);
  }
  const int64_t n = warp_count_upto(d.time, d.start, d.degree, count_cap(d.fanout, d.replace && !d.last));
  return temporal_draws(n, d.fanout, d.replace, d.last);
}

// NodeDraw::count() of this lane's node (`live`: the lane has one), a filtered node with
// more than kWarpDegree neighbours counted by the whole warp after each lane has counted
// its own other node; 0 for a lane without one. Every lane of the warp calls it.
__device__ inline int64_t warp_assisted_count(bool live, const NodeDraw& d) {
  const bool heavy = live && d.filtered() && d.degree > kWarpDegree;
  int64_t count = live && !heavy ? d.count() : 0;
  for_each_flagged_lane(heavy, [&](int src) {
    const int64_t n = warp_count(broadcast(d, src));
    if (lane_id() == src) count = n;
  });
  return count;
}

// Whether a warp makes a filtered node's k draws: its draws keep up to 32 entries where
// they hold one per lane, and weighted draws with replacement stay with the node's thread.
__device__ __forceinline__ bool warp_can_draw(const NodeDraw& d, int64_t k) {
  if (d.weighted()) return d.fanout < 0 || (!d.replace && k <= 32);
  return d.last || d.fanout < 0 || k <= 32;
}

// Whether a node's k draws go to the hop's queue of warp (or block) draws: filtered,
// more than kWarpDegree neighbours, and draws a warp can make.
__device__ __forceinline__ bool warp_draws(const NodeDraw& d, int64_t k) {
  return d.filtered() && d.degree > kWarpDegree && warp_can_draw(d, k);
}

// NodeDraw::draw of a node warp_draws accepts, by the warp.
__device__ inline void warp_draw_filtered(const NodeDraw& d, uint64_t key, int64_t k, int64_t* out) {
  if (d.weighted()) {
    if (d.fanout < 0) {
      warp_take_all(PositiveWeight{d.weight}, d.start, d.degree, out);
    } else {
      warp_draw_weighted(d.weight, d.start, d.degree, key, k, out);
    }
  } else if (d.last) {
    warp_take_last(d.time, d.start, d.degree, k, out);
  } else {
    warp_draw_temporal_uniform(d.time, d.start, d.degree, d.fanout, d.replace, key, k, out);
  }
}

}  // namespace pyg_accel
