// CUDA heterogeneous multi-hop neighbour sampling (schema: csrc/ops.cpp,
// hetero_neighbor_sample), sample for sample the CPU kernel's output
// (csrc/sampling/cpu/neighbor_sample.cpp): the same counter-based draws, the same first-seen
// order per node type.
//
// Node types get disjoint key ranges (type offset + id; in disjoint mode also tree x
// all nodes), so one dedup table (sample_table.cuh) serves every type. A level's
// positions are its seeds (type by type) or its hop's sampled edges (edge type by edge
// type, then frontier node, then draw: the CPU's loop order), so every node type's
// positions form a few contiguous segments (one per seed type or edge type) and a
// node's local id in its type is
//   (nodes of the type before this level) + (new nodes of the type in earlier
//   segments) + (new nodes before it in its segment),
// from one scan of the "first edge to reach a new node" flags. A hop's tasks are the
// previous level's nodes of each edge type's destination type, edge type by edge type.
// Per level: the flags' scan, a one-thread summary (per-segment bases, per-type counts,
// the next hop's task offsets) and assign; per hop: the draw counts' scan, summary,
// draw (weighted and temporal hubs queued for hub_draw_kernel), insert. Each scan is
// one kernel over the live positions only (decoupled look-back, tile_scan.cuh),
// computing its items on the fly. No host synchronisation
// until the counters are read at the end; buffers are sized by host-side upper bounds
// and the kernels read the live sizes from the counters. The output edges, grouped per
// hop in the position buffers, are then written edge type by edge type into one tensor
// each (row, col, edge) in one pass per hop. The per-type tables reach the device in
// one copy from host memory, without a pinned staging buffer (a copy of pageable memory
// returns once the driver has staged it).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <cub/cub.cuh>

#include "../sampler_inputs.h"
#include "../sampling_rng.h"
#include "../sampling_seed.h"
#include "../node_draw.h"
#include "sample_hub_queue.cuh"
#include "sample_warp_draws.cuh"
#include "sample_table.cuh"
#include "../../common/tensor_id.h"
#include "tile_scan.cuh"

namespace pyg_accel {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxTypes = 64;  // node types and edge types (the summaries keep per-type sums in registers)
constexpr uint64_t kEpoch = 1;  // the table is zeroed per call, so every slot of epoch 0 is free

// The graph and per-type tables, as device arrays (one int64 buffer; pointers stored
// as integers).
struct Meta {
  const int64_t* colptr;       // [R] pointers
  const int64_t* row;          // [R] pointers
  const BiasView* bias;        // [R] what each edge type's draws read besides (node_draw.h)
  const int64_t* src_type;     // [R]
  const int64_t* dst_type;     // [R]
  const int64_t* node_out;     // [T] pointers: global id per local id
  const int64_t* batch_out;    // [T] pointers: tree per local id (disjoint; else 0)
  const int64_t* type_offset;  // [T] key offset of each node type
  const int64_t* num_nodes;    // [T]
  const int64_t* seed_start;   // [T + 1] where each type's seeds begin among all seeds
  const int64_t* num_edges;    // [R]
};

template <typename T>
__device__ __forceinline__ T* ptr(const int64_t* table, int64_t i) {
  return reinterpret_cast<T*>(table[i]);
}

// The device counters (one int64 buffer):
//   level_count [T x (H + 1)]  new nodes per type and level (= num_sampled_nodes)
//   level_start [T x (H + 1)]  first local id of each type's level
//   edge_count  [R x H]        edges per edge type and hop (= num_sampled_edges)
//   rel_start   [H x (R + 1)]  each edge type's first position in its hop (last: the hop's edges)
//   task_start  [R + 1]        each edge type's first task in the current hop
//   seg_base    [max(T, R)]    new nodes of the segment's type in earlier segments (current level)
//   bad         [3]            1 + the position of an out-of-range seed; 1 + the edge type
//                              of an out-of-range row; 1 + the edge type of a colptr range
//                              outside its row (0: none)
//   hubs        [H]            tasks queued for warp draws per hop (hub_draw_kernel)
//   giants      [H]            tasks queued for block draws per hop (hub_draw_kernel)
//   claimed     [2H]           hubs / giants hub_draw_kernel has taken, per hop
struct Counters {
  int64_t* level_count;
  int64_t* level_start;
  int64_t* edge_count;
  int64_t* rel_start;
  int64_t* task_start;
  int64_t* seg_base;
  int64_t* bad;
  int64_t* hubs;
  int64_t* giants;
  int64_t* claimed;
  static int64_t size(int64_t T, int64_t R, int64_t H) {
    return 2 * T * (H + 1) + R * H + H * (R + 1) + (R + 1) + std::max(T, R) + 3 + 4 * H;
  }
  static Counters at(int64_t* base, int64_t T, int64_t R, int64_t H) {
    Counters c;
    c.level_count = base;
    c.level_start = c.level_count + T * (H + 1);
    c.edge_count = c.level_start + T * (H + 1);
    c.rel_start = c.edge_count + R * H;
    c.task_start = c.rel_start + H * (R + 1);
    c.seg_base = c.task_start + R + 1;
    c.bad = c.seg_base + std::max(T, R);
    c.hubs = c.bad + 3;
    c.giants = c.hubs + H;
    c.claimed = c.giants + H;
    return c;
  }
};

// Per-position state of a level: the table slot of the node it reached, the node
// (global id within its type) and, in disjoint mode, its tree.
struct Positions {
  int64_t* slot;
  int64_t* node;
  int64_t* tree;  // null unless disjoint
};

// A level's segments: segment s covers positions [start[s], start[s + 1]) of node
// type type[s] (seeds: one segment per node type; a hop: one per edge type, typed by
// its source type).
struct Segments {
  const int64_t* start;  // [S + 1] (device)
  const int64_t* type;   // [S] (device), or null: segment s has type s
  int64_t count;         // S
  __device__ int64_t type_of(int64_t s) const { return type == nullptr ? s : type[s]; }
  // The segment of position p (p < start[count]): the last s with start[s] <= p.
  __device__ int64_t find(int64_t p) const {
    int64_t lo = 0, hi = count;  // start[lo] <= p < start[hi]
    while (hi - lo > 1) {
      const int64_t mid = (lo + hi) / 2;
      if (start[mid] <= p) lo = mid; else hi = mid;
    }
    return lo;
  }
};

__device__ __forceinline__ int64_t thread_index() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t thread_count() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ uint64_t node_key(int64_t type_offset, int64_t node, int64_t tree, int64_t tree_stride) {
  return static_cast<uint64_t>(tree * tree_stride + type_offset + node);
}

// Level 0: every seed (types in order) is inserted at its position; an out-of-range
// seed is noted and stands in as node 0 (the call raises once the counters are read).
__global__ void seed_kernel(Meta m, Counters c, Table table, Positions pos, const int64_t* seeds, int64_t num_seeds,
                            int64_t num_types, bool disjoint, int64_t tree_stride) {
  const Segments seg{m.seed_start, nullptr, num_types};
  for (int64_t p = thread_index(); p < num_seeds; p += thread_count()) {
    const int64_t t = seg.find(p);
    int64_t v = seeds[p];
    if (v < 0 || v >= m.num_nodes[t]) {
      atomicCAS(reinterpret_cast<unsigned long long*>(c.bad), 0ull, static_cast<unsigned long long>(p + 1));
      v = 0;
    }
    const int64_t tree = disjoint ? p : 0;  // a tree per seed, numbered across types
    pos.slot[p] = table_insert_claim(table, kEpoch, node_key(m.type_offset[t], v, tree, tree_stride), p);
    pos.node[p] = v;
    if (pos.tree != nullptr) pos.tree[p] = tree;
  }
}

// Inclusive sums of item(p) over the live positions [0, live) into incl, one tile of
// kScanTile positions per block: the block's sum, then its prefix by decoupled
// look-back over the earlier tiles' status words (scan number `epoch` of the call).
// Blocks past the live positions return at once, so a grid sized by the upper bound
// costs only their launch.
constexpr int kScanItems = 4;
constexpr int64_t kScanTile = static_cast<int64_t>(kThreads) * kScanItems;

template <typename Item>
__global__ void __launch_bounds__(kThreads) live_scan_kernel(Item item, const int64_t* live_ptr, int64_t* incl,
                                                             unsigned long long* status, uint64_t epoch) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage storage;
  __shared__ int64_t tile_before;
  const int64_t live = *live_ptr, tile = blockIdx.x, first = tile * kScanTile;
  if (first >= live) return;
  const int64_t mine = first + static_cast<int64_t>(threadIdx.x) * kScanItems;
  int64_t value[kScanItems], sum = 0;
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    value[k] = item(mine + k, mine + k < live);  // (every lane: an item may be computed by a warp)
    sum += value[k];
  }
  int64_t before = 0, total = 0;
  Scan(storage).ExclusiveSum(sum, before, total);
  if (threadIdx.x < 32) {  // one warp publishes the tile's total, looks back, publishes its prefix
    int64_t earlier = 0;
    if (threadIdx.x == 0) publish_status(status + tile, epoch, tile == 0 ? kStatusInclusive : kStatusAggregate, total);
    if (tile > 0) earlier = look_back(status, tile, epoch);
    if (threadIdx.x == 0) {
      if (tile > 0) publish_status(status + tile, epoch, kStatusInclusive, earlier + total);
      tile_before = earlier;
    }
  }
  __syncthreads();
  int64_t running = tile_before + before;
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    if (mine + k < live) incl[mine + k] = running += value[k];
  }
}

// 1 if position p is the first to reach a node without a local id.
struct FirstReach {
  Table table;
  const int64_t* slot;
  __device__ int64_t operator()(int64_t p, bool valid) const {
    return valid && table_is_first(table, slot[p], kEpoch, p);
  }
};

// Element p of a sequence given by its inclusive sums.
__device__ __forceinline__ int64_t element(const int64_t* incl, int64_t p) {
  return incl[p] - (p > 0 ? incl[p - 1] : 0);
}

// One thread, after the flags' inclusive scan: each segment's base among its type's
// new nodes, the level's count and first local id per type, and (if a hop follows)
// that hop's task offsets: edge type r expands the level's nodes of its destination
// type.
__global__ void level_summary_kernel(Meta m, Counters c, Segments seg, const int64_t* scan, int64_t level,
                                     int64_t num_types, int64_t num_rels, int64_t num_hops) {
  int64_t found[kMaxTypes];
  for (int64_t t = 0; t < num_types; ++t) found[t] = 0;
  for (int64_t s = 0; s < seg.count; ++s) {
    const int64_t begin = seg.start[s], end = seg.start[s + 1];
    const int64_t t = seg.type_of(s);
    c.seg_base[s] = found[t];
    if (end > begin) found[t] += scan[end - 1] - (begin > 0 ? scan[begin - 1] : 0);
  }
  const int64_t L = num_hops + 1;
  for (int64_t t = 0; t < num_types; ++t) {
    c.level_count[t * L + level] = found[t];
    c.level_start[t * L + level] =
        level == 0 ? 0 : c.level_start[t * L + level - 1] + c.level_count[t * L + level - 1];
  }
  if (level < num_hops) {
    c.task_start[0] = 0;
    for (int64_t r = 0; r < num_rels; ++r) {
      c.task_start[r + 1] = c.task_start[r] + found[m.dst_type[r]];
    }
  }
}

// Level 0: every seed position gets a local id (seeds are listed as given, repeats
// included, as PyG does).
struct EveryPosition {
  __device__ int64_t operator()(int64_t, bool valid) const { return valid; }
};

// New nodes get their local ids: node and tree recorded, the table slot assigned (at
// level 0 by the first of a repeated seed only: later hops reaching it link to that one).
__global__ void assign_kernel(Meta m, Counters c, Table table, Segments seg, Positions pos, const int64_t* scan,
                              int64_t level, int64_t num_hops, int64_t bound) {
  const int64_t live = seg.start[seg.count];
  const int64_t L = num_hops + 1;
  for (int64_t p = thread_index(); p < bound && p < live; p += thread_count()) {
    if (element(scan, p) == 0) continue;  // (the flags' inclusive sums)
    const int64_t s = seg.find(p);
    const int64_t t = seg.type_of(s), begin = seg.start[s];
    const int64_t rank = scan[p] - 1 - (begin > 0 ? scan[begin - 1] : 0) + c.seg_base[s];
    const int64_t id = c.level_start[t * L + level] + rank;
    ptr<int64_t>(m.node_out, t)[id] = pos.node[p];
    if (pos.tree != nullptr) ptr<int64_t>(m.batch_out, t)[id] = pos.tree[p];
    if (level > 0 || table_is_first(table, pos.slot[p], kEpoch, p)) table_assign(table, pos.slot[p], kEpoch, id);
  }
}

// A hop's task q: edge type r expands node i of the previous level's nodes of r's
// destination type.
struct Task {
  int64_t rel, index, local_id, node, tree;
};

struct HopArgs {
  Meta m;
  Counters c;
  int64_t hop, num_rels, num_hops;
  const int64_t* fanout;  // [R] this hop's fanouts (device)
  bool replace, disjoint, last;
  const int64_t* tree_time;  // [num trees] (temporal; else null)
  int64_t random_seed;
};

__device__ Task task_of(const HopArgs& a, int64_t q) {
  const Segments tasks{a.c.task_start, nullptr, a.num_rels};
  Task k;
  k.rel = tasks.find(q);
  k.index = q - a.c.task_start[k.rel];
  const int64_t d = a.m.dst_type[k.rel];
  k.local_id = a.c.level_start[d * (a.num_hops + 1) + a.hop] + k.index;
  k.node = ptr<const int64_t>(a.m.node_out, d)[k.local_id];
  k.tree = a.disjoint ? ptr<const int64_t>(a.m.batch_out, d)[k.local_id] : 0;
  return k;
}

// Task k's draw (node_draw.h: the policy the CPU and the homogeneous sampler share):
// its edge type's bias, temporal when the type has times, else weighted when it has
// weights, else uniform (bias_of).
__device__ NodeDraw draw_of(const HopArgs& a, const Task& k) {
  const int64_t* colptr = ptr<const int64_t>(a.m.colptr, k.rel);
  // (checked where read, as edge_range in sample_kernels.cuh: a range outside the row
  // is noted and read as empty; the call raises once the counters are back)
  int64_t start = colptr[k.node], end = colptr[k.node + 1];
  if (!(start >= 0 && start <= end && end <= a.m.num_edges[k.rel])) {
    atomicCAS(reinterpret_cast<unsigned long long*>(a.c.bad + 2), 0ull, static_cast<unsigned long long>(k.rel + 1));
    start = 0, end = 0;
  }
  return node_draw_of(a.m.bias[k.rel], ptr<const int64_t>(a.m.row, k.rel), start, end - start, a.fanout[k.rel],
                      a.replace, a.last, a.tree_time != nullptr ? a.tree_time[k.tree] : 0);
}

// The draws of task q (`valid`: the lane has one). kFiltered (some edge type has weights
// or times; uniform sampling keeps its lean kernels): every lane of the warp calls it,
// and a weighted or temporal node with more than kWarpDegree neighbours is counted by
// the whole warp.
template <bool kFiltered>
struct DrawCount {
  HopArgs a;
  __device__ int64_t operator()(int64_t q, bool valid) const {
    NodeDraw d{};
    if (valid) d = draw_of(a, task_of(a, q));
    if constexpr (!kFiltered) {
      return valid ? num_to_draw(d.fanout, d.degree, d.replace) : 0;
    } else {
      return warp_assisted_count(valid, d);
    }
  }
};

// One thread: each edge type's first position in this hop (from the tasks' inclusive
// draw sums) and its edge count.
__global__ void hop_summary_kernel(Counters c, const int64_t* scan, int64_t hop, int64_t num_rels, int64_t num_hops) {
  int64_t* rel_start = c.rel_start + hop * (num_rels + 1);
  for (int64_t r = 0; r <= num_rels; ++r) {
    const int64_t first_task = c.task_start[r];
    rel_start[r] = first_task > 0 ? scan[first_task - 1] : 0;
  }
  for (int64_t r = 0; r < num_rels; ++r) c.edge_count[r * num_hops + hop] = rel_start[r + 1] - rel_start[r];
}


// The key of task `task`'s draws at the hop keyed `key_of_hop`.
__device__ __forceinline__ uint64_t task_key(uint64_t key_of_hop, const Task& task) {
  const uint64_t type_key = mix64(key_of_hop ^ mix64(static_cast<uint64_t>(task.rel) + 0x51ED270B27E1D3A9ull));
  return slot_key(type_key, task.index);
}

// Each task's draws: the CSC positions (grouped by task, in task order), and per
// position the local id of the node drawn for (col) and, in disjoint mode, its tree.
// kFiltered: a weighted or temporal node with more than kWarpDegree neighbours whose
// draws a warp can make is queued (hub_queue, of `bound` entries; sample_hub_queue.cuh)
// for hub_draw_kernel instead.
template <bool kFiltered>
__global__ void draw_kernel(HopArgs a, const int64_t* scan, int64_t bound, int64_t* edge, int64_t* col,
                            int64_t* tree, double* keys, int64_t* hub_queue) {
  const int64_t live = a.c.task_start[a.num_rels], tasks = bound < live ? bound : live;
  const uint64_t key_of_hop = hop_key(a.random_seed, a.hop);
  // Whole warps step together (warp draws need every lane), lane by lane over the tasks.
  for (int64_t first = thread_index() - lane_id(); first < tasks; first += thread_count()) {
    const int64_t q = first + lane_id();
    const bool valid = q < tasks;
    int64_t k = 0, base = 0;
    Task task{};
    NodeDraw d{};
    if (valid) {
      k = element(scan, q), base = scan[q] - k;
      if (k > 0) task = task_of(a, q), d = draw_of(a, task);
    }
    const bool heavy = kFiltered && k > 0 && warp_draws(d, k);
    if (k > 0 && !heavy) d.draw(task_key(key_of_hop, task), k, edge + base, keys != nullptr ? keys + base : nullptr);
    if constexpr (kFiltered) {
      enqueue_hub(heavy, is_giant(d), q, a.c.hubs + a.hop, a.c.giants + a.hop,
                  hub_queue, bound);
    }
    for (int64_t j = 0; j < k; ++j) {
      col[base + j] = task.local_id;
      if (tree != nullptr) tree[base + j] = task.tree;
    }
  }
}

// The hop's queued tasks (draw_kernel; sample_hub_queue.cuh): giants by whole blocks,
// first, then the others a warp each, each taken by whichever is free. `bound`: the
// queue buffer's length.
__global__ void __launch_bounds__(kThreads) hub_draw_kernel(HopArgs a, const int64_t* scan, const int64_t* hub_queue,
                                                            int64_t bound, int64_t* edge) {
  const uint64_t key_of_hop = hop_key(a.random_seed, a.hop);
  auto draw = [&](int64_t q, bool by_block) {
    const int64_t k = element(scan, q), base = scan[q] - k;
    const Task t = task_of(a, q);
    const NodeDraw e = draw_of(a, t);
    if (by_block) {
      block_draw_weighted<kThreads / 32>(e.weight, e.start, e.degree, task_key(key_of_hop, t), k, edge + base);
    } else {
      warp_draw_filtered(e, task_key(key_of_hop, t), k, edge + base);
    }
  };
  draw_hub_queue<kThreads / 32>(
      hub_queue, a.c.hubs[a.hop], hub_queue + bound, a.c.giants[a.hop], a.c.claimed + 2 * a.hop,
      [&](int64_t q) { draw(q, true); }, [&](int64_t q) { draw(q, false); });
}

// A position per thread (balanced whatever the degrees): the neighbour the drawn edge
// leads to, inserted into the table (the smallest position per node wins). An
// out-of-range row is noted and stands in as node 0.
__global__ void insert_kernel(Meta m, Counters c, Table table, Segments seg, const int64_t* edge, Positions pos,
                              int64_t bound, int64_t tree_stride) {
  const int64_t live = seg.start[seg.count];
  for (int64_t p = thread_index(); p < bound && p < live; p += thread_count()) {
    const int64_t r = seg.find(p), s = m.src_type[r];
    int64_t u = ptr<const int64_t>(m.row, r)[edge[p]];
    if (u < 0 || u >= m.num_nodes[s]) {
      atomicCAS(reinterpret_cast<unsigned long long*>(c.bad + 1), 0ull, static_cast<unsigned long long>(r + 1));
      u = 0;
    }
    const int64_t tree = pos.tree != nullptr ? pos.tree[p] : 0;
    pos.slot[p] = table_insert_claim(table, kEpoch, node_key(m.type_offset[s], u, tree, tree_stride), p);
    pos.node[p] = u;
  }
}

// A hop's edges into the outputs, which hold edge type 0's edges (hop by hop), then
// edge type 1's, ...: edge type r's edges of this hop start after every edge of the
// types before r and r's edges of the earlier hops (from the counters).
__global__ void emit_kernel(Table table, Counters c, Segments seg, int64_t hop, int64_t num_hops, const int64_t* slot,
                            const int64_t* col, const int64_t* edge, int64_t* row_out, int64_t* col_out,
                            int64_t* edge_out, int64_t count) {
  __shared__ int64_t shift[kMaxTypes];  // output index of position q of edge type r: shift[r] + q
  const int64_t R = seg.count;
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
    int64_t before = -seg.start[r];
    for (int64_t i = 0; i < r * num_hops + hop; ++i) before += c.edge_count[i];
    shift[r] = before;
  }
  __syncthreads();
  for (int64_t q = thread_index(); q < count; q += thread_count()) {
    const int64_t j = shift[seg.find(q)] + q;
    row_out[j] = table_local_id(table, slot[q]);
    col_out[j] = col[q];
    edge_out[j] = edge[q];
  }
}

// Host side ###########################################################################

// Saturating sums and products for the buffers' upper bounds.
int64_t sat_add(int64_t a, int64_t b) { return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b; }
int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : a * b;
}

// Enough blocks to cover n (grid-stride past what the GPU holds at once); 0 for n = 0.
int64_t blocks_for(int64_t n) {
  static const int64_t cap = static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * 8;
  return std::min((n + kThreads - 1) / kThreads, cap);
}

template <typename Kernel, typename... Args>
void launch(Kernel kernel, int64_t n, cudaStream_t stream, Args... args) {
  const int64_t blocks = blocks_for(n);
  if (blocks == 0) return;
  kernel<<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The largest in-degree of an edge type (fanout -1's bound on its draws): read from
// the device (a host sync) the first time a colptr tensor is seen, then remembered
// while the caller passes that same, unmodified tensor. `given` is the caller's
// tensor (the cache's key), `colptr` its int64 contiguous form.
int64_t max_in_degree(const at::Tensor& given, const at::Tensor& colptr) {
  if (colptr.numel() <= 1) return 0;
  static DerivedMemo<int64_t> memo;
  return memo.get({TensorId::of(&given)},
                  [&] { return (colptr.slice(0, 1) - colptr.slice(0, 0, -1)).max().item<int64_t>(); });
}

int64_t address(const at::Tensor& t) { return t.defined() ? reinterpret_cast<int64_t>(t.data_ptr()) : 0; }

using HeteroOutput = std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, at::Tensor, at::Tensor, at::Tensor,
                                at::Tensor, at::Tensor>;

HeteroOutput hetero_neighbor_sample_cuda(at::IntArrayRef num_nodes, at::IntArrayRef src_type, at::IntArrayRef dst_type,
                                         at::TensorList colptr_list, at::TensorList row_list,
                                         at::TensorList seed_list, at::IntArrayRef num_neighbors, int64_t num_hops,
                                         bool replace, bool disjoint, std::optional<int64_t> random_seed_arg,
                                         const c10::List<std::optional<at::Tensor>>& edge_weight,
                                         const c10::List<std::optional<at::Tensor>>& node_time_list,
                                         const c10::List<std::optional<at::Tensor>>& edge_time_list,
                                         const c10::List<std::optional<at::Tensor>>& seed_time_list,
                                         c10::string_view temporal_strategy) {
  const int64_t T = static_cast<int64_t>(num_nodes.size()), R = static_cast<int64_t>(src_type.size());
  const int64_t H = num_hops;
  TORCH_CHECK(T > 0, "hetero_neighbor_sample: no node types");
  TORCH_CHECK(T <= kMaxTypes && R <= kMaxTypes, "hetero_neighbor_sample: the CUDA kernel takes up to ",
              std::to_string(kMaxTypes), " node types and edge types");
  const at::Device device = R > 0 ? colptr_list[0].device() : seed_list[0].device();
  TORCH_CHECK(device.is_cuda(), "hetero_neighbor_sample: the CUDA kernel needs the graph on a GPU");
  const c10::cuda::CUDAGuard guard(device);
  const HeteroInputs in = read_hetero_inputs(num_nodes, src_type, dst_type, colptr_list, row_list, seed_list,
                                             num_neighbors, num_hops, disjoint, edge_weight, node_time_list,
                                             edge_time_list, seed_time_list, temporal_strategy, device);
  const auto &colptrs = in.colptrs, &rows = in.rows, &seed_times = in.seed_times;
  const bool weighted = in.weighted, temporal = in.temporal;
  const int64_t random_seed = resolve_random_seed(random_seed_arg);

  // Seeds of all types in one array, and (temporal) each tree's time.
  std::vector<at::Tensor> seed_parts;
  std::vector<int64_t> seed_start(T + 1, 0), type_offset(T, 0);
  int64_t total_nodes = 0;
  for (int64_t t = 0; t < T; ++t) {
    TORCH_CHECK(seed_list[t].numel() == 0 || num_nodes[t] > 0, "hetero_neighbor_sample: seeds of node type ",
                std::to_string(t), " are out of range (the type has no nodes)");
    const at::Tensor s = seed_list[t].to(at::kLong);
    seed_parts.push_back(s.dim() == 1 ? s : s.reshape({-1}));
    seed_start[t + 1] = seed_start[t] + seed_list[t].numel();
    type_offset[t] = total_nodes;
    total_nodes = sat_add(total_nodes, std::max<int64_t>(num_nodes[t], 0));
  }
  const int64_t num_seeds = seed_start[T];
  int64_t seeded_types = 0, seeded = 0;
  for (int64_t t = 0; t < T; ++t) {
    if (seed_parts[t].numel() > 0) ++seeded_types, seeded = t;
  }
  const at::Tensor seeds = seeded_types == 1 ? seed_parts[seeded].contiguous() : at::cat(seed_parts);
  at::Tensor tree_time;
  if (temporal) {
    std::vector<at::Tensor> parts;
    for (int64_t t = 0; t < T; ++t) {
      if (seed_list[t].numel() > 0) parts.push_back(seed_times[t].reshape({-1}));
    }
    tree_time = parts.empty() ? at::empty({0}, seeds.options()) : at::cat(parts);
  }
  const int64_t tree_stride = std::max<int64_t>(total_nodes, 1);
  TORCH_CHECK(sat_mul(std::max<int64_t>(disjoint ? num_seeds : 1, 1), tree_stride) < (int64_t{1} << 43),
              "hetero_neighbor_sample: too many nodes (x seeds in disjoint mode) for the CUDA kernel's table keys");

  // Upper bounds: nodes per type and level, tasks and edges per hop.
  std::vector<int64_t> fanout_by_hop(static_cast<size_t>(H * R));  // [H][R]
  std::vector<int64_t> max_degree(R, -1);
  auto fan_bound = [&](int64_t r, int64_t h) {
    const int64_t f = num_neighbors[r * H + h];
    if (f >= 0) return f;
    if (max_degree[r] < 0) {  // (at most the row's edges: see edge_range in draw_of)
      max_degree[r] = std::clamp<int64_t>(max_in_degree(colptr_list[r], colptrs[r]), 0, rows[r].numel());
    }
    return max_degree[r];
  };
  std::vector<std::vector<int64_t>> level_bound(T, std::vector<int64_t>(H + 1, 0));
  std::vector<int64_t> task_bound(H, 0), edge_bound(H, 0);
  for (int64_t t = 0; t < T; ++t) {
    level_bound[t][0] = seed_list[t].numel();  // (every seed, repeats included)
  }
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t r = 0; r < R; ++r) {
      fanout_by_hop[h * R + r] = num_neighbors[r * H + h];
      const int64_t from = level_bound[dst_type[r]][h], drawn = sat_mul(from, fan_bound(r, h));
      task_bound[h] = sat_add(task_bound[h], from);
      edge_bound[h] = sat_add(edge_bound[h], drawn);
      level_bound[src_type[r]][h + 1] = sat_add(level_bound[src_type[r]][h + 1], drawn);
    }
    for (int64_t t = 0; t < T; ++t) {
      if (!disjoint) level_bound[t][h + 1] = std::min<int64_t>(level_bound[t][h + 1], num_nodes[t]);
    }
  }
  std::vector<int64_t> node_bound(T, 0);
  int64_t all_nodes = 0, max_positions = num_seeds, max_tasks = 0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t l = 0; l <= H; ++l) node_bound[t] = sat_add(node_bound[t], level_bound[t][l]);
    if (!disjoint) node_bound[t] = std::min<int64_t>(node_bound[t], seed_list[t].numel() + num_nodes[t]);
    all_nodes = sat_add(all_nodes, node_bound[t]);
  }
  for (int64_t h = 0; h < H; ++h) {
    max_positions = std::max(max_positions, edge_bound[h]);
    max_tasks = std::max(max_tasks, task_bound[h]);
  }
  constexpr int64_t kLimit = int64_t{1} << 36;
  TORCH_CHECK(all_nodes < kLimit && max_positions < kLimit, "hetero_neighbor_sample: the sample's upper bound (",
              std::to_string(std::max(all_nodes, max_positions)), " nodes or edges) is too large for the CUDA "
              "kernel's buffers; use smaller fanouts or batches");

  // Buffers: zeroed state (table, counters, scan status words) and scratch in two
  // allocations; the node outputs, one per type.
  const auto long_opts = seeds.options().dtype(at::kLong);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  int64_t capacity = 1024;
  while (capacity < 2 * all_nodes) capacity *= 2;
  const int64_t counter_words = Counters::size(T, R, H);
  const int64_t tiles = std::max({max_positions, max_tasks, int64_t{1}}) / kScanTile + 1;
  const at::Tensor state = at::empty({2 * capacity + counter_words + tiles}, long_opts);
  C10_CUDA_CHECK(cudaMemsetAsync(state.data_ptr(), 0, state.nbytes(), stream));
  const Table table{reinterpret_cast<TableSlot*>(state.data_ptr<int64_t>()), capacity - 1};
  const Counters c = Counters::at(state.data_ptr<int64_t>() + 2 * capacity, T, R, H);
  auto* status = reinterpret_cast<unsigned long long*>(state.data_ptr<int64_t>() + 2 * capacity + counter_words);

  // One allocation per output (outputs of an op must not share storage), sized by the bound.
  std::vector<at::Tensor> node_buffer(T), batch_buffer(disjoint ? T : 0);
  for (int64_t t = 0; t < T; ++t) {
    node_buffer[t] = at::empty({node_bound[t]}, long_opts);
    if (disjoint) batch_buffer[t] = at::empty({node_bound[t]}, long_opts);
  }

  // The per-type tables (colptr, row, ... pointers per edge type; output pointers,
  // offsets, sizes per node type; fanouts per hop), copied to the scratch buffer below.
  std::vector<int64_t> meta_host;
  auto append = [&](const std::vector<int64_t>& values) {
    const int64_t at_ = static_cast<int64_t>(meta_host.size());
    meta_host.insert(meta_host.end(), values.begin(), values.end());
    return at_;
  };
  std::vector<int64_t> colptr_a(R), row_a(R), src_a(R), dst_a(R), num_edges_a(R);
  for (int64_t r = 0; r < R; ++r) {
    colptr_a[r] = address(colptrs[r]);
    num_edges_a[r] = rows[r].numel();
    row_a[r] = address(rows[r]);
    src_a[r] = src_type[r];
    dst_a[r] = dst_type[r];
  }
  std::vector<int64_t> node_out_a(T), batch_out_a(T), num_nodes_a(num_nodes.begin(), num_nodes.end());
  for (int64_t t = 0; t < T; ++t) {
    node_out_a[t] = address(node_buffer[t]);
    batch_out_a[t] = disjoint ? address(batch_buffer[t]) : 0;
  }
  // Each edge type's BiasView, as int64 words (the struct holds pointers, integers and flags).
  static_assert(sizeof(BiasView) % sizeof(int64_t) == 0 && alignof(BiasView) <= alignof(int64_t),
                "BiasView is copied as int64 words");
  const std::vector<BiasView> views = bias_views(in, src_type, num_nodes);
  std::vector<int64_t> bias_a(views.size() * sizeof(BiasView) / sizeof(int64_t));
  if (!views.empty()) std::memcpy(bias_a.data(), views.data(), views.size() * sizeof(BiasView));
  const int64_t o_colptr = append(colptr_a), o_row = append(row_a), o_bias = append(bias_a), o_src = append(src_a),
                o_dst = append(dst_a), o_node_out = append(node_out_a),
                o_batch_out = append(batch_out_a), o_offset = append(type_offset), o_num_nodes = append(num_nodes_a),
                o_seed_start = append(seed_start), o_fanout = append(fanout_by_hop),
                o_num_edges = append(num_edges_a);

  int64_t scratch_words = 0;
  auto carve = [&](int64_t n) {
    const int64_t at_ = scratch_words;
    scratch_words += n;
    return at_;
  };
  const int64_t o_scan = carve(max_positions), o_node = carve(max_positions),
                o_tree = carve(disjoint ? max_positions : 0), o_seed_slot = carve(num_seeds),
                o_task_scan = carve(max_tasks), o_keys = carve(weighted ? max_positions : 0),
                o_hub_queue = carve(weighted || temporal ? max_tasks : 0),
                o_meta = carve(static_cast<int64_t>(meta_host.size()));
  std::vector<int64_t> o_hop_slot(H), o_hop_edge(H), o_hop_col(H);
  for (int64_t h = 0; h < H; ++h) {
    o_hop_slot[h] = carve(edge_bound[h]);
    o_hop_edge[h] = carve(edge_bound[h]);
    o_hop_col[h] = carve(edge_bound[h]);
  }
  const at::Tensor scratch = at::empty({scratch_words}, long_opts);
  int64_t* const base = scratch.data_ptr<int64_t>();
  int64_t* const scan = base + o_scan;
  int64_t* const task_scan = base + o_task_scan;
  int64_t* const tree_ptr = disjoint ? base + o_tree : nullptr;
  double* const keys = weighted ? reinterpret_cast<double*>(base + o_keys) : nullptr;

  // (From pageable memory: the call returns once the driver has staged the bytes.)
  int64_t* const md = base + o_meta;
  C10_CUDA_CHECK(cudaMemcpyAsync(md, meta_host.data(), meta_host.size() * sizeof(int64_t), cudaMemcpyHostToDevice,
                                 stream));
  const Meta m{md + o_colptr,     md + o_row,        reinterpret_cast<const BiasView*>(md + o_bias),
               md + o_src,        md + o_dst,        md + o_node_out,
               md + o_batch_out,  md + o_offset,     md + o_num_nodes,
               md + o_seed_start, md + o_num_edges};

  // Inclusive sums of item over the live positions (at most `bound`), one kernel.
  uint64_t scan_epoch = 0;
  auto live_scan = [&](auto item, const int64_t* live, int64_t* incl, int64_t bound) {
    ++scan_epoch;  // (every scan of the call uses status words of its own epoch)
    if (bound == 0) return;
    live_scan_kernel<<<static_cast<unsigned>((bound + kScanTile - 1) / kScanTile), kThreads, 0, stream>>>(
        item, live, incl, status, scan_epoch);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  // Numbers a level whose positions are in pos (scan of the first reaches, summary, assign).
  auto number_level = [&](const Segments& seg, const Positions& pos, int64_t level, int64_t bound) {
    if (level == 0) {
      live_scan(EveryPosition{}, seg.start + seg.count, scan, bound);
    } else {
      live_scan(FirstReach{table, pos.slot}, seg.start + seg.count, scan, bound);
    }
    level_summary_kernel<<<1, 1, 0, stream>>>(m, c, seg, scan, level, T, R, H);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    launch(assign_kernel, bound, stream, m, c, table, seg, pos, scan, level, H, bound);
  };

  const Positions seed_pos{base + o_seed_slot, base + o_node, tree_ptr};
  launch(seed_kernel, num_seeds, stream, m, c, table, seed_pos, seeds.data_ptr<int64_t>(), num_seeds, T, disjoint,
         tree_stride);
  number_level(Segments{m.seed_start, nullptr, T}, seed_pos, 0, num_seeds);
  const bool last = temporal_strategy == "last";
  for (int64_t h = 0; h < H; ++h) {
    const HopArgs a{m, c, h, R, H, md + o_fanout + h * R, replace, disjoint, last,
                    temporal ? tree_time.data_ptr<int64_t>() : nullptr, random_seed};
    if (weighted || temporal) {  // (kernels whose warps take the hubs of weighted and temporal edge types)
      live_scan(DrawCount<true>{a}, c.task_start + R, task_scan, task_bound[h]);
    } else {
      live_scan(DrawCount<false>{a}, c.task_start + R, task_scan, task_bound[h]);
    }
    hop_summary_kernel<<<1, 1, 0, stream>>>(c, task_scan, h, R, H);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    launch(weighted || temporal ? draw_kernel<true> : draw_kernel<false>, task_bound[h], stream, a, task_scan,
           task_bound[h], base + o_hop_edge[h], base + o_hop_col[h], tree_ptr, keys, base + o_hub_queue);
    if (weighted || temporal) {
      launch(hub_draw_kernel, 32 * task_bound[h], stream, a, task_scan, base + o_hub_queue, task_bound[h],
             base + o_hop_edge[h]);
    }
    const Segments seg{c.rel_start + h * (R + 1), m.src_type, R};
    const Positions pos{base + o_hop_slot[h], base + o_node, tree_ptr};
    launch(insert_kernel, edge_bound[h], stream, m, c, table, seg, base + o_hop_edge[h], pos, edge_bound[h],
           tree_stride);
    number_level(seg, pos, h + 1, edge_bound[h]);
  }

  // The one host read: every counter.
  const at::Tensor host = state.narrow(0, 2 * capacity, counter_words).to(at::kCPU);
  const Counters hc = Counters::at(host.data_ptr<int64_t>(), T, R, H);
  if (hc.bad[0] != 0) {  // (1 + the position of an out-of-range seed)
    const int64_t p = hc.bad[0] - 1;
    const int64_t t = std::upper_bound(seed_start.begin(), seed_start.end(), p) - seed_start.begin() - 1;
    TORCH_CHECK(false, "hetero_neighbor_sample: seed ", std::to_string(seeds[p].item<int64_t>()),
                " is out of range for node type ", std::to_string(t));
  }
  TORCH_CHECK_INDEX(hc.bad[1] == 0, "hetero_neighbor_sample: row of edge type ", std::to_string(hc.bad[1] - 1),
                    " holds a node out of range");
  TORCH_CHECK_INDEX(hc.bad[2] == 0, "hetero_neighbor_sample: colptr of edge type ", std::to_string(hc.bad[2] - 1),
                    " holds a range outside its row's edges (colptr must start at 0, never decrease and end "
                    "at len(row))");

  // Outputs: nodes per type (prefixes of their bound-sized buffers); the edges of all
  // edge types in one tensor each (row, col, edge ids), sized by the counts.
  std::vector<at::Tensor> node_t(T), batch_t(disjoint ? T : 0);
  for (int64_t t = 0; t < T; ++t) {
    int64_t n = 0;
    for (int64_t l = 0; l <= H; ++l) n += hc.level_count[t * (H + 1) + l];
    node_t[t] = node_buffer[t].narrow(0, 0, n);
    if (disjoint) batch_t[t] = batch_buffer[t].narrow(0, 0, n);
  }
  int64_t total_edges = 0;
  for (int64_t i = 0; i < R * H; ++i) total_edges += hc.edge_count[i];
  const at::Tensor row_out = at::empty({total_edges}, long_opts), col_out = at::empty({total_edges}, long_opts),
                   edge_out = at::empty({total_edges}, long_opts);
  for (int64_t h = 0; h < H && total_edges > 0; ++h) {
    const int64_t edges = hc.rel_start[h * (R + 1) + R];
    launch(emit_kernel, edges, stream, table, c, Segments{c.rel_start + h * (R + 1), nullptr, R}, h, H,
           base + o_hop_slot[h], base + o_hop_col[h], base + o_hop_edge[h], row_out.data_ptr<int64_t>(),
           col_out.data_ptr<int64_t>(), edge_out.data_ptr<int64_t>(), edges);
  }
  const at::Tensor nodes_per_hop = host.narrow(0, 0, T * (H + 1)).clone().view({T, H + 1});
  const at::Tensor edges_per_hop = host.narrow(0, 2 * T * (H + 1), R * H).clone().view({R, H});
  return {node_t, batch_t, row_out, col_out, edge_out, nodes_per_hop, edges_per_hop};
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CUDA, m) { m.impl("hetero_neighbor_sample", &hetero_neighbor_sample_cuda); }

}  // namespace pyg_accel
