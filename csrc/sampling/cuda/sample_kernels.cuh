// The one-type specialisations of the CUDA sampling engine (sample_engine.cuh), the
// homogeneous sampler's fast paths: a level numbered in one kernel (new nodes' local
// ids and the next hop's draw counts, summed across blocks by decoupled look-back),
// uniform draws of bounded fanouts made by lane groups and expanded where they are made,
// an edge-parallel expand for the other draws, and the last hop's rows with the
// counters' publication. One sample is the fixed sequence neighbor_sample.cu enqueues:
// seed and number (one kernel up to kSeedTile seeds), then per hop draw (the shared
// draw_kernel, or draw_group_kernel), expand, number. Included by neighbor_sample.cu only.
#pragma once

#include <cub/cub.cuh>

#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>

#include "../sampling_rng.h"
#include "../node_draw.h"
#include "sample_engine.cuh"
#include "sample_launch.cuh"
#include "sample_publish.cuh"
#include "sample_table.cuh"
#include "tile_scan.cuh"

namespace pyg_accel {
namespace {

using OneHop = HopArgs<OneType>;
using OneCall = CallParams<1>;

// Numbering a level, one kernel: positions p < count (the seeds, or the hop's edges)
// whose edge is the first to reach a node without a local id get consecutive ids in
// position order (first-seen order, as on the CPU), after all earlier levels' nodes.
// If another hop follows, each new node's draw count is summed in the same pass into
// the next hop's draw_scan (inclusive sums in id order = each node's edge range), and
// the hop's edge total is recorded. Both sums run across blocks by decoupled look-back
// (tile_scan.cuh): flag, scan and assign in one launch instead of four.
#ifndef PYG_ACCEL_NUMBER_ITEMS
#define PYG_ACCEL_NUMBER_ITEMS 2
#endif
constexpr int kNumberItems = PYG_ACCEL_NUMBER_ITEMS;  // consecutive positions per thread
constexpr int64_t kNumberTile = static_cast<int64_t>(kBlock) * kNumberItems;
// Up to kSeedBlock * kSeedItems seeds, the first kernel numbers them too, in its one
// block (no second launch, no look-back). (1024 threads x 1 would spill: 64 registers.)
// PYG_ACCEL_SEED_ITEMS=0 turns this off (a variant for comparison).
#ifndef PYG_ACCEL_SEED_ITEMS
#define PYG_ACCEL_SEED_ITEMS 2
#endif
constexpr int kSeedBlock = 512;
constexpr int kSeedItems = PYG_ACCEL_SEED_ITEMS > 0 ? PYG_ACCEL_SEED_ITEMS : 1;
constexpr int64_t kSeedTile = PYG_ACCEL_SEED_ITEMS > 0 ? static_cast<int64_t>(kSeedBlock) * kSeedItems : -1;

struct NumberArgs {
  const int64_t* slot_of;
  const int64_t* nbr;
  const int64_t* tree;
  const int64_t* count_ptr;  // the number of positions (device), or null: static_count
  int64_t static_count;
  int64_t level;
  bool disjoint;
  Table t;
  unsigned long long* id_status;    // [tiles] look-back words of the id sums
  unsigned long long* draw_status;  // [tiles] look-back words of the draw sums
  bool count_next;                  // another hop follows: sum its draws
  OneHop next;                      // that hop (its call and counters also this level's)
  int64_t* draw_scan;               // [frontier] where the next hop's inclusive draw sums go (next.draw_scan)
};

// Tile `blockIdx.x` of a level's `count` positions, BLOCK threads x ITEMS positions
// each, in the sample of `epoch`.
template <int BLOCK, int ITEMS, bool kFiltered>
__device__ __forceinline__ void number_tile(const NumberArgs& a, int64_t count, uint64_t epoch) {
  using Scan = cub::BlockScan<int64_t, BLOCK>;
  constexpr int64_t kTile = static_cast<int64_t>(BLOCK) * ITEMS;
  __shared__ typename Scan::TempStorage scan_storage;
  __shared__ int64_t tile_before[2];  // ids and draws of all earlier tiles
  const Counters& c = a.next.c;
  const int64_t tile = blockIdx.x, first = tile * kTile;
  const bool last = first + kTile >= count;  // this tile holds the last position (or there are none)
  if (first >= count && tile > 0) return;  // no later tile needs this one's sums
  // Each step's loads for all items first, then the next step (dependent loads of
  // different items overlap instead of queueing behind each other).
  const int64_t mine = first + threadIdx.x * ITEMS;  // this thread's first position
  // Level 0 lists every seed as given, repeats included (as PyG does): each position
  // gets an id and its own draws; only the first of a repeated seed is in the table,
  // so later hops reaching that node link to the first.
  int64_t slot[ITEMS], v[ITEMS], b[ITEMS], draws[ITEMS];
  bool fresh[ITEMS], first_reach[ITEMS];
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) slot[k] = mine + k < count ? a.slot_of[mine + k] : 0;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    first_reach[k] = mine + k < count && table_is_first(a.t, slot[k], epoch, mine + k);
    fresh[k] = a.level == 0 ? mine + k < count : first_reach[k];
  }
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    v[k] = fresh[k] ? a.nbr[mine + k] : 0;
    b[k] = fresh[k] && a.disjoint ? a.tree[mine + k] : 0;
  }
  int64_t my_ids = 0, my_draws = 0;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    draws[k] = a.count_next ? count_draws<kFiltered>(a.next, fresh[k], 0, v[k], b[k]) : 0;  // (every lane)
    my_ids += fresh[k];
    my_draws += draws[k];
  }
  int64_t ids_before = 0, tile_ids = 0, draws_before = 0, tile_draws = 0;
  Scan(scan_storage).ExclusiveSum(my_ids, ids_before, tile_ids);
  if (a.count_next) {
    __syncthreads();  // (the scan storage is reused)
    Scan(scan_storage).ExclusiveSum(my_draws, draws_before, tile_draws);
  }
  if (threadIdx.x < 32) {
    int64_t ids_earlier = 0, draws_earlier = 0;
    if (threadIdx.x == 0) {  // this tile's own totals first, so later tiles can go on
      const uint64_t state = tile == 0 ? kStatusInclusive : kStatusAggregate;
      publish_status(a.id_status + tile, epoch, state, tile_ids);
      if (a.count_next) publish_status(a.draw_status + tile, epoch, state, tile_draws);
    }
    if (tile > 0) {
      ids_earlier = look_back(a.id_status, tile, epoch);
      if (a.count_next) draws_earlier = look_back(a.draw_status, tile, epoch);
    }
    if (threadIdx.x == 0) {
      if (tile > 0) {
        publish_status(a.id_status + tile, epoch, kStatusInclusive, ids_earlier + tile_ids);
        if (a.count_next) publish_status(a.draw_status + tile, epoch, kStatusInclusive, draws_earlier + tile_draws);
      }
      tile_before[0] = ids_earlier;
      tile_before[1] = draws_earlier;
    }
  }
  __syncthreads();
  const int64_t base = a.level == 0 ? 0 : c.level_start[a.level - 1] + c.level_count[a.level - 1];
  if (last && threadIdx.x == 0) {  // the level's and the next hop's totals
    c.level_start[a.level] = base;
    c.level_count[a.level] = tile_before[0] + tile_ids;
    if (a.count_next) {
      const int64_t edges = tile_before[1] + tile_draws;
      c.edge_count[a.level] = edges;
      c.edge_start[a.level + 1] = c.edge_start[a.level] + edges;
    }
  }
  int64_t rank = tile_before[0] + ids_before, drawn = tile_before[1] + draws_before;
  const OneCall* call = a.next.call;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    if (!fresh[k]) continue;
    const int64_t id = base + rank;
    if (first_reach[k]) table_assign(a.t, slot[k], epoch, id);
    call->node_out[0][id] = v[k];
    if (a.disjoint) call->batch_out[0][id] = b[k];
    drawn += draws[k];
    if (a.count_next) a.draw_scan[rank] = drawn;
    ++rank;
  }
}

template <bool kFiltered>
__global__ void __launch_bounds__(kBlock) number_kernel(NumberArgs a) {
  after_previous_kernel();
  const int64_t count = a.count_ptr != nullptr ? *a.count_ptr : a.static_count;
  number_tile<kBlock, kNumberItems, kFiltered>(a, count, static_cast<uint64_t>(a.next.call->epoch));
}

// Level 0 in one block of up to kSeedTile seeds: insert them, then number them.
template <bool kFiltered>
__global__ void __launch_bounds__(kSeedBlock) seed_number_kernel(SeedArgs<OneType> s, NumberArgs n) {
  after_previous_kernel();
  insert_seeds(s, threadIdx.x, blockDim.x);
  __syncthreads();  // every seed's claim is made (number_tile reads the table through L2)
  number_tile<kSeedBlock, kSeedItems, kFiltered>(n, s.num_seeds, static_cast<uint64_t>(s.call.epoch));
}

// The rows of hop `hop`'s edges: each edge's neighbour becomes its local id, once the
// next level is numbered. The next hop's draw kernel does it on the side (before its
// expand reuses slot_of), the last hop's a kernel of its own.
struct RowsArgs {
  const int64_t* slot_of;
  int64_t len;  // 0: nothing to write
  int64_t hop;
  Counters c;
  Table t;
  const OneCall* call;
  // How many rows there are to write (0 when len is 0: no hop's rows pending).
  __device__ int64_t count() const { return len == 0 ? 0 : (len < c.edge_count[hop] ? len : c.edge_count[hop]); }
  // Row p of `count` (the draw kernels' side work).
  __device__ void operator()(int64_t p, int64_t count) const {
    if (p < count) call->row_out[c.edge_start[hop] + p] = table_local_id(t, slot_of[p]);
  }
};

// Uniform draws with a bounded fanout (<= 32), a group of `width` lanes (the fanout)
// per frontier node, as many whole groups per warp as fit (32 / width; the warp's
// other lanes idle): lane j makes draw j, so the RNG work runs in parallel, and
// Floyd's collisions are resolved in `width` warp votes. Same numbers, same order as
// draw_uniform.
struct GroupDraw {
  bool drawn;   // this lane makes a draw (lane < the node's count)
  int64_t i;    // the node's frontier index
  int64_t p;    // the edge's slot in the hop (the node's first slot + lane)
  int64_t pos;  // the drawn CSC position
};

// Threads that cover m nodes in groups of `width` lanes.
__host__ __device__ __forceinline__ int64_t group_threads(int64_t m, int64_t width) {
  const int64_t per_warp = 32 / width;
  return (m + per_warp - 1) / per_warp * 32;
}

// Thread t's draw (of m live nodes); every lane of the warp calls it.
__device__ __forceinline__ GroupDraw group_draw(const OneHop& a, int64_t m, int64_t t, int width) {
  const int warp_lane = static_cast<int>(t & 31), per_warp = 32 / width, group = warp_lane / width;
  const int base = group * width, lane = warp_lane - base;  // the group's first warp lane; this lane's draw
  const int64_t i = (t >> 5) * per_warp + group;
  const bool live = group < per_warp && i < m;
  const unsigned group_mask = group >= per_warp ? 0u : width == 32 ? 0xffffffffu : ((1u << width) - 1u) << base;
  int64_t k = 0, o = 0, start = 0, degree = 0;
  if (live) {
    k = step(a.draw_scan, i);
    o = a.draw_scan[i] - k;
    node_range(a, 0, a.call->node_out[0][a.c.level_start[a.hop] + i], start, degree);
  }
  const bool floyd = live && k > 0 && !a.replace && k < degree;
  int64_t mine = 0;  // this lane's draw
  if (live && lane < k) {
    const uint64_t key = task_key(a, Task{0, i, 0, 0, 0});
    if (a.replace) {
      mine = start + uniform_below(key, lane, degree);
    } else if (k == degree) {
      mine = start + lane;
    } else {
      const int64_t j = degree - k + lane;
      mine = start + uniform_below(key, j, j + 1);
    }
  }
  int64_t chosen = mine;
  // Floyd, step n: candidate n stands unless an earlier step chose it, else j_n.
  for (int n = 0; n < width; ++n) {
    const int64_t candidate = __shfl_sync(0xffffffffu, mine, (base + n) & 31);
    const bool clash = floyd && lane < n && n < k && chosen == candidate;
    const bool taken = (__ballot_sync(0xffffffffu, clash) & group_mask) != 0;
    if (floyd && lane == n && taken) chosen = start + degree - k + n;
  }
  return {live && lane < k, i, o + lane, chosen};
}

// Whether any lane of the warp has a live node (whole warps past the frontier skip).
__device__ __forceinline__ bool warp_has_nodes(int64_t m, int64_t t, int width) {
  return __ballot_sync(0xffffffffu, (t >> 5) * (32 / width) < m) != 0;
}

struct ExpandArgs {
  bool disjoint;
  int64_t stride;  // key = tree * stride + node in disjoint mode
  int64_t len;     // buffer length of the per-edge scratch
  Table t;
  int64_t* nbr;
  int64_t* tree;
  int64_t* slot_of;
};

// Edge p of the hop (if `live`): the node of local id `id` drew CSC position pos. Its
// neighbour (and tree) go into the dedup table, the edge's col and id into the outputs.
// Every lane of the warp calls it.
__device__ __forceinline__ void expand_edge(const OneHop& a, const ExpandArgs& x, bool live, int64_t id, int64_t pos,
                                            int64_t p) {
  const OneCall& call = *a.call;
  int64_t u = 0, b = 0;
  int64_t key = -1 - static_cast<int64_t>(threadIdx.x % 32);  // dead lanes: a key no one else has
  if (live) {
    u = a.g.row[pos];
    if (u < 0 || u >= a.g.num_nodes) {  // (noted, and stands in as node 0: see node_range)
      note_bad(a.c.bad, kBadRowType, 0, pos);
      u = 0;
    }
    if (x.disjoint) b = call.batch_out[0][id];  // trees matter only in disjoint mode
    key = x.disjoint ? b * x.stride + u : u;
  }
  const int64_t slot = claim_in_warp(x.t, static_cast<uint64_t>(call.epoch), key, live, p);
  if (!live) return;
  x.slot_of[p] = slot;
  x.nbr[p] = u;
  if (x.disjoint) x.tree[p] = b;
  const int64_t e = a.c.edge_start[a.hop] + p;
  call.col_out[e] = id;
  call.edge_out[e] = pos;
}

#ifndef PYG_ACCEL_EXPAND_MIN_BLOCKS
#define PYG_ACCEL_EXPAND_MIN_BLOCKS 1  // resident blocks per SM asked of the compiler (8: registers capped, spills)
#endif

// expand_kernel (draws made by draw_kernel / draw_group_kernel<false>): one thread per
// sampled edge, so a node's edges spread over as many threads as it has draws. Edge
// p's node comes from owner (bounded fanouts) or, for fanout -1 (a hub takes all its
// edges), from a binary search over the draw sums. Every lane of the warp calls it
// (p < count: a live edge).
__device__ __forceinline__ void expand_one(const OneHop& a, const ExpandArgs& x, int64_t count, int64_t p) {
  const bool live = p < count;
  int64_t id = 0, pos = 0;
  if (live) {
    if (a.g.fanout >= 0) {
      id = a.owner[p];
      pos = a.drawn[p];
    } else {
      int64_t lo = 0, hi = a.c.level_count[a.hop] - 1;
      while (lo < hi) {
        const int64_t mid = (lo + hi) >> 1;
        if (a.draw_scan[mid] > p) hi = mid; else lo = mid + 1;
      }
      const int64_t k = step(a.draw_scan, lo);
      id = a.c.level_start[a.hop] + lo;
      const NodeDraw d = draw_at(a, 0, a.call->node_out[0][id], 0);
      pos = d.takes_all(k) ? d.start + p - (a.draw_scan[lo] - k) : a.drawn[p];
    }
  }
  expand_edge(a, x, live, id, pos, p);
}

__global__ void __launch_bounds__(kBlock, PYG_ACCEL_EXPAND_MIN_BLOCKS) expand_kernel(OneHop a, ExpandArgs x) {
  after_previous_kernel();
  const int64_t count = x.len < a.c.edge_count[a.hop] ? x.len : a.c.edge_count[a.hop];
  PYG_ACCEL_FOR_BLOCK_STRIDE(p, count) expand_one(a, x, count, p);
}

#ifndef PYG_ACCEL_SAMPLER_FUSED_EXPAND
#define PYG_ACCEL_SAMPLER_FUSED_EXPAND 1
#endif
// Uniform bounded-fanout draws, a group of `width` lanes per node. kExpand (the
// default): each lane's draw is expanded where it is made, so a hop is one kernel with
// no drawn/owner round trip through memory. Without it (PYG_ACCEL_SAMPLER_FUSED_EXPAND=0,
// a variant for comparison) the draws go to drawn/owner for expand_kernel. The grid also
// writes the previous hop's rows, from the other slot_of buffer.
template <bool kExpand>
__global__ void __launch_bounds__(kBlock) draw_group_kernel(OneHop a, ExpandArgs x, int64_t frontier_len,
                                                            RowsArgs rows, int width) {
  after_previous_kernel();
  const int64_t live = live_tasks(a), m = frontier_len < live ? frontier_len : live, num_rows = rows.count();
  const int64_t n = std::max(group_threads(m, width), num_rows);
  PYG_ACCEL_FOR_BLOCK_STRIDE(t, n) {
    rows(t, num_rows);
    if (!warp_has_nodes(m, t, width)) continue;
    const GroupDraw d = group_draw(a, m, t, width);
    const int64_t id = d.drawn ? a.c.level_start[a.hop] + d.i : 0;
    if constexpr (kExpand) {
      expand_edge(a, x, d.drawn, id, d.pos, d.p);
    } else if (d.drawn) {
      a.drawn[d.p] = d.pos;
      a.owner[d.p] = id;
    }
  }
}

// The last hop's rows (grid-stride: the grid is capped at what the GPU holds at once),
// then the last block to finish publishes the counters, which every other block has
// read by then.
__global__ void rows_publish_kernel(RowsArgs r, PublishArgs p) {
  after_previous_kernel();
  const int64_t num_rows = r.count();
  PYG_ACCEL_FOR_BLOCK_STRIDE(e, num_rows) r(e, num_rows);
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(p.blocks_done, 1u) == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  publish_counts(p);
  if (threadIdx.x == 0) *p.blocks_done = 0;
}

}  // namespace
}  // namespace pyg_accel
