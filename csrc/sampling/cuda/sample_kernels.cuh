// The CUDA sampler's kernels and their argument structs (one sample is the fixed
// sequence neighbor_sample.cu enqueues: seed and number (one kernel up to kSeedTile
// seeds), then per hop draw, expand, number, and the last hop's rows with the
// counters' publication). Included by neighbor_sample.cu only.
#pragma once

#include <cub/cub.cuh>

#include <c10/cuda/CUDAException.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

#include "../sampling_rng.h"
#include "../node_draw.h"
#include "sample_hub_draw.cuh"
#include "sample_hub_queue.cuh"
#include "sample_launch.cuh"
#include "sample_publish.cuh"
#include "sample_table.cuh"
#include "sample_warp_draws.cuh"
#include "tile_scan.cuh"

namespace pyg_accel {
namespace {

// Device pointers of a CSC graph and what its draws read besides (BiasView: weights,
// node and edge times).
struct GraphPtrs {
  const int64_t* colptr;
  const int64_t* row;
  BiasView bias;
  int64_t num_nodes, num_edges;
};

// Where this call's outputs go: fresh tensors per call, so the graph reads their
// addresses from device memory instead of baking them in.
struct Outputs {
  int64_t* node;   // [node bound] global id per local id
  int64_t* batch;  // [node bound] tree per local id (disjoint mode; else null)
  int64_t* row;    // [edge bound] per output edge
  int64_t* col;
  int64_t* edge;
};

// What changes from call to call: the first kernel's argument (set in the replayed
// graph by updating that kernel node), which it copies to device memory for the
// others. (Copy nodes from or to host memory made a graph launch cost the host ~10 us
// more; reading the parameters from pinned memory cost the first kernel ~4 us.)
struct Params {
  Outputs out;
  const int64_t* seed;       // [S] this call's seeds
  const int64_t* seed_time;  // [S] or null
  int64_t random_seed;
  int64_t epoch;             // this sample's table epoch
};

// The device counters of one sample, zeroed by the last kernel of the previous one
// (after it published them to the host), in one int64 buffer:
// [nodes[H+1] | edges[H] | node_start[H+1] | edge_start[H+1] | bad_seed | hubs[H] |
//  giants[H] | claimed[2H] | bad_graph].
// nodes[l] = nodes first reached at level l (level 0: the seeds), node_start[l] = their
// first local id, edges[h] / edge_start[h] = hop h's edges and their first output slot,
// bad_seed = 1 + an out-of-range seed (0 if none), hubs[h] / giants[h] = hop h's nodes
// queued for warp / block draws (hub_draw_kernel), claimed[2h] / claimed[2h + 1] = how
// many of them hub_draw_kernel's warps / blocks have taken, bad_graph = 1 + a node
// whose colptr range is not within the row's edges, or -1 - an edge whose row is not a
// node (0 if none). random_seed and epoch point into the device copy of the call's Params.
struct Counters {
  const int64_t* random_seed;
  const int64_t* epoch;
  int64_t* nodes;
  int64_t* edges;
  int64_t* node_start;
  int64_t* edge_start;
  int64_t* bad_seed;
  int64_t* hubs;
  int64_t* giants;
  int64_t* claimed;
  int64_t* bad_graph;
  static int64_t size(int64_t hops) { return 8 * hops + 5; }
  static Counters at(int64_t* base, int64_t hops, const Params* params) {
    const bool device = params != nullptr;
    return {device ? &params->random_seed : nullptr, device ? &params->epoch : nullptr, base, base + 1 + hops,
            base + 1 + 2 * hops, base + 2 + 3 * hops, base + 3 + 4 * hops, base + 4 + 4 * hops,
            base + 4 + 5 * hops, base + 4 + 6 * hops, base + 4 + 8 * hops};
  }
};

// What a hop's kernels share.
struct HopArgs {
  GraphPtrs g;
  Bias bias;  // the graph's (bias_of)
  bool last;  // temporal: strategy 'last'
  int64_t fanout;
  bool replace;
  int64_t hop;
  Counters c;
  const Outputs* out;
  const int64_t* seed_time;  // per tree (temporal)
  int64_t* offsets;          // inclusive sums of the frontier's draw counts (written when numbered)
  int64_t* drawn;            // CSC position of each hop edge (bounded fanouts; else sampling nodes only)
  double* drawn_key;         // weighted scratch
  int64_t* seg;              // frontier index of each hop edge (bounded fanouts)
  int64_t* hub_queue;        // [frontier bound] frontier indices of the nodes warps draw (filtered modes),
  int64_t hub_queue_len;     // and, from its end backwards, of those blocks draw (giants)
};

// Node v's edge range [colptr[v], colptr[v + 1]), checked where it is read: the graph's
// tensors are the caller's, and may have changed since the plan checked them in ways
// no version counter sees (a pinned graph written through numpy, a CUDA one through
// DLPack). A range outside the row's edges is noted and read as empty, so no kernel
// reads outside the graph, and the call raises once the counters are back. Every site
// reads the same range the same way, so draw counts and draws agree.
__device__ __forceinline__ void edge_range(const HopArgs& a, int64_t v, int64_t& start, int64_t& degree) {
  const int64_t s = a.g.colptr[v], e = a.g.colptr[v + 1];
  if (s >= 0 && s <= e && e <= a.g.num_edges) {
    start = s, degree = e - s;
  } else {
    *a.c.bad_graph = v + 1;  // (any one will do)
    start = 0, degree = 0;
  }
}

// The draw of a node whose edges are [start, start + degree), in tree b (read only by
// temporal draws), at the hop of `a` (node_draw.h: the policy the CPU and the
// heterogeneous sampler share).
__device__ __forceinline__ NodeDraw node_draw(const HopArgs& a, int64_t start, int64_t degree, int64_t b) {
  return node_draw_of(a.g.bias, a.g.row, start, degree, a.fanout, a.replace, a.last,
                      a.bias == Bias::kTemporal ? a.seed_time[b] : 0);
}

// The tree of local id `id` where the draws read it (temporal; else 0).
__device__ __forceinline__ int64_t tree_of(const HopArgs& a, int64_t id) {
  return a.bias == Bias::kTemporal ? a.out->batch[id] : 0;
}

// How many neighbours this lane's node v (in tree b; `live`: the lane has a node) draws
// at the hop of `a`. kFiltered (weighted and temporal draws; the kernels are
// instantiated per kind, so uniform sampling keeps its lean kernels): every lane of the
// warp calls it, and a node with more than kWarpDegree neighbours is counted by the
// whole warp.
template <bool kFiltered>
__device__ int64_t draw_count(const HopArgs& a, bool live, int64_t v, int64_t b) {
  int64_t start = 0, degree = 0;
  if (live) edge_range(a, v, start, degree);
  if constexpr (!kFiltered) {
    return live ? num_to_draw(a.fanout, degree, a.replace) : 0;
  } else {
    return warp_assisted_count(live, live ? node_draw(a, start, degree, b) : NodeDraw{});
  }
}

// Everything the first kernel takes, as one argument (one kernel-node parameter).
struct SeedArgs {
  Params call;
  Params* params;  // the device copy the later kernels read
  int64_t num_seeds, num_nodes;
  bool disjoint;
  int64_t stride;  // key = tree * stride + node in disjoint mode
  Counters c;
  Table t;
  int64_t* slot_of;
  int64_t* nbr;
  int64_t* tree;
  int64_t* seed_time_buf;
};

// Level 0, and the call's parameters (block 0 keeps the device copy the later kernels
// read). Every seed is inserted (and its time kept for its tree); an out-of-range seed
// is noted and stands in as node 0 (the call raises once the sample is back, but the
// kernels never read outside the graph).
// Thread `first` takes seeds first, first + stride, ...
__device__ __forceinline__ void insert_seed(const SeedArgs& a, int64_t first, int64_t stride) {
  const Params& call = a.call;
  if (first == 0) *a.params = call;
  const uint64_t epoch = static_cast<uint64_t>(call.epoch);
  for (int64_t i = first; i < a.num_seeds; i += stride) {
    int64_t v = call.seed[i];
    if (call.seed_time != nullptr) a.seed_time_buf[i] = call.seed_time[i];
    if (v < 0 || v >= a.num_nodes) {
      *a.c.bad_seed = v < 0 ? v - 1 : v + 1;  // any one bad seed will do
      v = 0;
    }
    const uint64_t key = static_cast<uint64_t>(a.disjoint ? i * a.stride + v : v);
    const int64_t slot = table_insert_claim(a.t, epoch, key, i);
    a.slot_of[i] = slot;
    a.nbr[i] = v;
    a.tree[i] = i;
  }
}


__global__ void seed_kernel(SeedArgs a) {
  after_previous_kernel();
  insert_seed(a, global_thread(), static_cast<int64_t>(gridDim.x) * blockDim.x);
}

// Numbering a level, one kernel: positions p < count (the seeds, or the hop's edges)
// whose edge is the first to reach a node without a local id get consecutive ids in
// position order (first-seen order, as on the CPU), after all earlier levels' nodes.
// If another hop follows, each new node's draw count is summed in the same pass into
// the next hop's offsets (inclusive sums in id order = each node's edge range), and
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
  HopArgs next;
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
    draws[k] = a.count_next ? draw_count<kFiltered>(a.next, fresh[k], v[k], b[k]) : 0;  // (every lane)
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
  const int64_t base = a.level == 0 ? 0 : c.node_start[a.level - 1] + c.nodes[a.level - 1];
  if (last && threadIdx.x == 0) {  // the level's and the next hop's totals
    c.node_start[a.level] = base;
    c.nodes[a.level] = tile_before[0] + tile_ids;
    if (a.count_next) {
      const int64_t edges = tile_before[1] + tile_draws;
      c.edges[a.level] = edges;
      c.edge_start[a.level + 1] = c.edge_start[a.level] + edges;
    }
  }
  int64_t rank = tile_before[0] + ids_before, drawn = tile_before[1] + draws_before;
  const Outputs* out = a.next.out;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    if (!fresh[k]) continue;
    const int64_t id = base + rank;
    if (first_reach[k]) table_assign(a.t, slot[k], epoch, id);
    out->node[id] = v[k];
    if (a.disjoint) out->batch[id] = b[k];
    drawn += draws[k];
    if (a.count_next) a.next.offsets[rank] = drawn;
    ++rank;
  }
}

template <bool kFiltered>
__global__ void __launch_bounds__(kBlock) number_kernel(NumberArgs a) {
  after_previous_kernel();
  const int64_t count = a.count_ptr != nullptr ? *a.count_ptr : a.static_count;
  number_tile<kBlock, kNumberItems, kFiltered>(a, count, static_cast<uint64_t>(*a.next.c.epoch));
}

// Level 0 in one block of up to kSeedTile seeds: insert them, then number them.
template <bool kFiltered>
__global__ void __launch_bounds__(kSeedBlock) seed_number_kernel(SeedArgs s, NumberArgs n) {
  after_previous_kernel();
  insert_seed(s, threadIdx.x, blockDim.x);
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
};

// How many rows there are to write (0 when r.len is 0: no hop's rows pending).
__device__ __forceinline__ int64_t rows_count(const RowsArgs& r) {
  return r.len == 0 ? 0 : (r.len < r.c.edges[r.hop] ? r.len : r.c.edges[r.hop]);
}

__device__ __forceinline__ void write_row(const RowsArgs& r, const Outputs* out, int64_t p, int64_t count) {
  if (p < count) out->row[r.c.edge_start[r.hop] + p] = table_local_id(r.t, r.slot_of[p]);
}

// The CSC positions frontier node i draws (`live`: the lane has a node; bounded
// fanouts: also every position's edge owner, so expand needs neither a search nor the
// node's degree). kFiltered (weighted and temporal modes): every lane of the warp calls
// it, and a node with more than kWarpDegree neighbours whose draws a warp can make is
// queued for hub_draw_kernel instead (temporal draws in time-sorted columns stay with
// the thread: a binary search, then draws as uniform ones).
template <bool kFiltered>
__device__ __forceinline__ void draw_one(const HopArgs& a, int64_t i, bool live) {
  int64_t k = 0, o = 0, id = 0, start = 0, degree = 0;
  bool all = false;
  if (live) {
    k = step(a.offsets, i);
    o = a.offsets[i] - k;
    id = a.c.node_start[a.hop] + i;
    if (k > 0) {
      edge_range(a, a.out->node[id], start, degree);
      all = !kFiltered && node_draw(a, start, degree, 0).takes_all(k);
      if (a.fanout >= 0) {
        for (int64_t j = 0; j < k; ++j) a.seg[o + j] = i;
        if (all) {
          for (int64_t j = 0; j < k; ++j) a.drawn[o + j] = start + j;
        }
      }
    }
  }
  const bool draws = live && k > 0 && !all;  // (fanout -1, all: expand fills the positions in, edge-parallel)
  const NodeDraw d = draws && kFiltered ? node_draw(a, start, degree, tree_of(a, id)) : NodeDraw{};
  const bool heavy = kFiltered && draws && warp_draws(d, k);
  if (draws && !heavy) {
    const uint64_t key = slot_key(hop_key(*a.c.random_seed, a.hop), i);
    if (!kFiltered) {
      draw_uniform(start, degree, k, a.replace, key, a.drawn + o);
    } else {
      d.draw(key, k, a.drawn + o, a.drawn_key != nullptr ? a.drawn_key + o : nullptr);
    }
  }
  if constexpr (kFiltered) {
    enqueue_hub(heavy, is_giant(d), i, a.c.hubs + a.hop, a.c.giants + a.hop, a.hub_queue, a.hub_queue_len);
  }
}

// A hop's queued frontier nodes, for hub_draw_kernel (sample_hub_draw.cuh): the queue
// draw_one filled, and where a queued node's draws come from and go.
struct QueuedNodes {
  HopArgs a;
  __device__ HubQueue queue() const {
    return {a.hub_queue, a.hub_queue_len, a.c.hubs + a.hop, a.c.giants + a.hop, a.c.claimed + 2 * a.hop};
  }
  __device__ QueuedDraw queued(int64_t i) const {
    const int64_t k = step(a.offsets, i), o = a.offsets[i] - k;
    const int64_t id = a.c.node_start[a.hop] + i;
    int64_t start, degree;
    edge_range(a, a.out->node[id], start, degree);
    return {node_draw(a, start, degree, tree_of(a, id)), slot_key(hop_key(*a.c.random_seed, a.hop), i), k,
            a.drawn + o};
  }
};

// The frontier's live size (its bound, or the nodes the level actually got).
__device__ __forceinline__ int64_t frontier_count(const HopArgs& a, int64_t frontier_len) {
  return frontier_len < a.c.nodes[a.hop] ? frontier_len : a.c.nodes[a.hop];
}

template <bool kFiltered>
__global__ void draw_kernel(HopArgs a, int64_t frontier_len, RowsArgs rows) {
  after_previous_kernel();
  const int64_t m = frontier_count(a, frontier_len), num_rows = rows_count(rows);
  const int64_t n = m > num_rows ? m : num_rows;
  PYG_ACCEL_FOR_BLOCK_STRIDE(i, n) {
    write_row(rows, a.out, i, num_rows);
    draw_one<kFiltered>(a, i, i < m);
  }
}

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
__device__ __forceinline__ GroupDraw group_draw(const HopArgs& a, int64_t m, int64_t t, int width) {
  const int warp_lane = static_cast<int>(t & 31), per_warp = 32 / width, group = warp_lane / width;
  const int base = group * width, lane = warp_lane - base;  // the group's first warp lane; this lane's draw
  const int64_t i = (t >> 5) * per_warp + group;
  const bool live = group < per_warp && i < m;
  const unsigned group_mask = group >= per_warp ? 0u : width == 32 ? 0xffffffffu : ((1u << width) - 1u) << base;
  int64_t k = 0, o = 0, start = 0, degree = 0;
  if (live) {
    k = step(a.offsets, i);
    o = a.offsets[i] - k;
    edge_range(a, a.out->node[a.c.node_start[a.hop] + i], start, degree);
  }
  const bool floyd = live && k > 0 && !a.replace && k < degree;
  int64_t mine = 0;  // this lane's draw
  if (live && lane < k) {
    const uint64_t key = slot_key(hop_key(*a.c.random_seed, a.hop), i);
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

// Inserts `key` and claims it for edge p, once per distinct key of the warp: lanes
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

struct ExpandArgs {
  bool disjoint;
  int64_t stride;  // key = tree * stride + node in disjoint mode
  int64_t len;     // buffer length of the per-edge scratch
  Table t;
  int64_t* nbr;
  int64_t* tree;
  int64_t* slot_of;
};

// Edge p of the hop (if `live`): frontier node i drew CSC position pos. Its neighbour
// (and tree) go into the dedup table, the edge's col and id into the outputs. Every
// lane of the warp calls it.
__device__ __forceinline__ void expand_edge(const HopArgs& a, const ExpandArgs& x, bool live, int64_t i, int64_t pos,
                                            int64_t p) {
  const Outputs out = *a.out;
  int64_t id = 0, u = 0, b = 0;
  int64_t key = -1 - static_cast<int64_t>(threadIdx.x % 32);  // dead lanes: a key no one else has
  if (live) {
    id = a.c.node_start[a.hop] + i;
    u = a.g.row[pos];
    if (u < 0 || u >= a.g.num_nodes) {  // (noted, and stands in as node 0: see edge_range)
      *a.c.bad_graph = -1 - pos;
      u = 0;
    }
    if (x.disjoint) b = out.batch[id];  // trees matter only in disjoint mode
    key = x.disjoint ? b * x.stride + u : u;
  }
  const int64_t slot = claim_in_warp(x.t, static_cast<uint64_t>(*a.c.epoch), key, live, p);
  if (!live) return;
  x.slot_of[p] = slot;
  x.nbr[p] = u;
  if (x.disjoint) x.tree[p] = b;
  const int64_t e = a.c.edge_start[a.hop] + p;
  out.col[e] = id;
  out.edge[e] = pos;
}

#ifndef PYG_ACCEL_EXPAND_MIN_BLOCKS
#define PYG_ACCEL_EXPAND_MIN_BLOCKS 1  // resident blocks per SM asked of the compiler (8: registers capped, spills)
#endif

// expand_kernel (draws made by draw_kernel / draw_group_kernel<false>): one thread per
// sampled edge, so a node's edges spread over as many threads as it has draws. Edge
// p's frontier node comes from seg (bounded fanouts) or, for fanout -1 (a hub takes
// all its edges), from a binary search over the offsets. Every lane of the warp calls
// it (p < count: a live edge).
__device__ __forceinline__ void expand_one(const HopArgs& a, const ExpandArgs& x, int64_t count, int64_t p) {
  const bool live = p < count;
  int64_t i = 0, pos = 0;
  if (live) {
    if (a.fanout >= 0) {
      i = a.seg[p];
      pos = a.drawn[p];
    } else {
      int64_t lo = 0, hi = a.c.nodes[a.hop] - 1;
      while (lo < hi) {
        const int64_t mid = (lo + hi) >> 1;
        if (a.offsets[mid] > p) hi = mid; else lo = mid + 1;
      }
      i = lo;
      const int64_t k = step(a.offsets, i);
      int64_t start, degree;
      edge_range(a, a.out->node[a.c.node_start[a.hop] + i], start, degree);
      pos = a.bias == Bias::kUniform && node_draw(a, start, degree, 0).takes_all(k) ? start + p - (a.offsets[i] - k)
                                                                                  : a.drawn[p];
    }
  }
  expand_edge(a, x, live, i, pos, p);
}

__global__ void __launch_bounds__(kBlock, PYG_ACCEL_EXPAND_MIN_BLOCKS) expand_kernel(HopArgs a, ExpandArgs x) {
  after_previous_kernel();
  const int64_t count = x.len < a.c.edges[a.hop] ? x.len : a.c.edges[a.hop];
  PYG_ACCEL_FOR_BLOCK_STRIDE(p, count) expand_one(a, x, count, p);
}

#ifndef PYG_ACCEL_SAMPLER_FUSED_EXPAND
#define PYG_ACCEL_SAMPLER_FUSED_EXPAND 1
#endif
// Uniform bounded-fanout draws, a group of `width` lanes per node. kExpand (the
// default): each lane's draw is expanded where it is made, so a hop is one kernel with
// no drawn/seg round trip through memory. Without it (PYG_ACCEL_SAMPLER_FUSED_EXPAND=0,
// a variant for comparison) the draws go to drawn/seg for expand_kernel. The grid also
// writes the previous hop's rows, from the other slot_of buffer.
template <bool kExpand>
__global__ void __launch_bounds__(kBlock) draw_group_kernel(HopArgs a, ExpandArgs x, int64_t frontier_len,
                                                            RowsArgs rows, int width) {
  after_previous_kernel();
  const int64_t m = frontier_count(a, frontier_len), num_rows = rows_count(rows);
  const int64_t n = std::max(group_threads(m, width), num_rows);
  PYG_ACCEL_FOR_BLOCK_STRIDE(t, n) {
    write_row(rows, a.out, t, num_rows);
    if (!warp_has_nodes(m, t, width)) continue;
    const GroupDraw d = group_draw(a, m, t, width);
    if constexpr (kExpand) {
      expand_edge(a, x, d.drawn, d.i, d.pos, d.p);
    } else if (d.drawn) {
      a.drawn[d.p] = d.pos;
      a.seg[d.p] = d.i;
    }
  }
}

// The last hop's rows (grid-stride: the grid is capped at what the GPU holds at once),
// then the last block to finish publishes the counters, which every other block has
// read by then.
__global__ void rows_publish_kernel(RowsArgs r, const Outputs* out, PublishArgs p) {
  after_previous_kernel();
  const int64_t num_rows = rows_count(r);
  PYG_ACCEL_FOR_BLOCK_STRIDE(e, num_rows) write_row(r, out, e, num_rows);
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
