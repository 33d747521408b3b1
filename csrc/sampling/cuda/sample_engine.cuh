// The CUDA sampling engine's shared parts: one set of call parameters, counters, hop
// arguments, seed kernel, draw kernel and hub-queue policy for every graph. A graph is
// seen through a type view: OneType (a homogeneous graph, neighbor_sample.cu) or
// ManyTypes (a heterogeneous one, hetero_sample.cu), each telling the shared kernels
// where a node type's seeds are, where a hop's task (a frontier node of an edge type's
// destination type) reads its node, and how that node draws (node_draw.h, the policy
// the CPU sampler shares). What differs between the two is only how a level is numbered
// and where the edges go: one type numbers a level in one fused kernel and expands its
// uniform draws where they are made (sample_kernels.cuh); many types number by segment
// and write the edges edge type by edge type (hetero_sample.cu).
#pragma once

#include <c10/util/Exception.h>

#include <cstdint>
#include <string>

#include "../node_draw.h"
#include "../sampling_rng.h"
#include "sample_hub_draw.cuh"
#include "sample_hub_queue.cuh"
#include "sample_launch.cuh"
#include "sample_table.cuh"
#include "sample_warp_draws.cuh"

namespace pyg_accel {
namespace {

constexpr int kMaxTypes = 64;  // node types and edge types of a heterogeneous sample

// What changes from call to call, per node type: the first kernel's argument, which it
// copies to device memory for the others (a replayed graph updates that kernel node).
// (Copy nodes from or to host memory made a graph launch cost the host ~10 us more;
// reading the parameters from pinned memory cost the first kernel ~4 us.)
template <int kTypes>
struct CallParams {
  int64_t* node_out[kTypes];          // where the type's nodes go (global id per local id)
  int64_t* batch_out[kTypes];         // where their trees go (disjoint; else null)
  const int64_t* seed[kTypes];        // the type's seeds
  const int64_t* seed_time[kTypes];   // their times (temporal; else null)
  int64_t* row_out;                   // the sample's edges (local ids of the neighbour and
  int64_t* col_out;                   // of the node drawn for, and the CSC position)
  int64_t* edge_out;
  int64_t random_seed;
  int64_t epoch;  // the call's table and look-back epoch
};

// The words of Counters::bad: 1 + the position of an out-of-range seed; 1 + the edge
// type and 1 + the CSC position of a row entry that is not a node; 1 + the edge type
// and 1 + the node of a colptr range outside its row; 1 + the edge type and 1 + the
// node of a range longer than the plan's bound on a degree (0: none). Each pair's first
// word is claimed before its second is written (note_bad).
enum BadWord : int {
  kBadSeed,
  kBadRowType,
  kBadRowEdge,
  kBadRangeType,
  kBadRangeNode,
  kBadDegreeType,
  kBadDegreeNode,
  kBadWords
};

// The device counters of one sample in one int64 buffer, zeroed by the last kernel of
// the previous sample after it published them to the host (T node types, R edge types,
// H hops; a homogeneous graph has T = R = 1):
//   level_count [T x (H + 1)]  new nodes per type and level (= num_sampled_nodes)
//   level_start [T x (H + 1)]  first local id of each type's level
//   edge_count  [R x H]        edges per edge type and hop (= num_sampled_edges)
//   edge_start  [H + 1]        first output slot of each hop's edges (one edge type)
//   rel_start   [H x (R + 1)]  each edge type's first position in its hop (many types)
//   task_start  [R + 1]        each edge type's first task in the current hop (many types)
//   seg_base    [max(T, R)]    new nodes of a segment's type in earlier segments (many types)
//   bad         [kBadWords]    see BadWord
//   hubs        [H]            tasks queued for warp draws per hop (hub_draw_kernel)
//   giants      [H]            tasks queued for block draws per hop
//   claimed     [2H]           hubs / giants hub_draw_kernel has taken, per hop
struct Counters {
  int64_t* level_count;
  int64_t* level_start;
  int64_t* edge_count;
  int64_t* edge_start;
  int64_t* rel_start;
  int64_t* task_start;
  int64_t* seg_base;
  int64_t* bad;
  int64_t* hubs;
  int64_t* giants;
  int64_t* claimed;
  static int64_t size(int64_t T, int64_t R, int64_t H) {
    return 2 * T * (H + 1) + R * H + (H + 1) + H * (R + 1) + (R + 1) + (T > R ? T : R) + kBadWords + 4 * H;
  }
  static Counters at(int64_t* base, int64_t T, int64_t R, int64_t H) {
    Counters c;
    c.level_count = base;
    c.level_start = c.level_count + T * (H + 1);
    c.edge_count = c.level_start + T * (H + 1);
    c.edge_start = c.edge_count + R * H;
    c.rel_start = c.edge_start + H + 1;
    c.task_start = c.rel_start + H * (R + 1);
    c.seg_base = c.task_start + R + 1;
    c.bad = c.seg_base + (T > R ? T : R);
    c.hubs = c.bad + kBadWords;
    c.giants = c.hubs + H;
    c.claimed = c.giants + H;
    return c;
  }
};

// Notes a bad input where a kernel read it (any one will do: the call raises once the
// counters are back); the pair's first word is claimed, so its second matches it.
__device__ __forceinline__ void note_bad(int64_t* bad, BadWord first, int64_t type, int64_t where) {
  auto* word = reinterpret_cast<unsigned long long*>(bad + first);
  if (atomicCAS(word, 0ull, static_cast<unsigned long long>(type + 1)) == 0ull) bad[first + 1] = where + 1;
}

// Segments of positions: segment s covers [start[s], start[s + 1]) of type type[s]
// (seeds: one per node type; a hop's draws: one per edge type).
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

// A homogeneous graph as a hop reads it: one node type, one edge type.
struct OneType {
  static constexpr int kTypes = 1;
  static constexpr bool kHomogeneous = true;
  // Drawn positions' owners are written only for bounded fanouts (a node taking all of
  // a hub's edges leaves them to the edge-parallel expand, sample_kernels.cuh).
  static constexpr bool kOwnerOfEveryDraw = false;
  const int64_t* colptr;
  const int64_t* row;
  BiasView bias;
  int64_t num_nodes, num_edges;
  int64_t max_degree;  // the plan's bound on a degree (read where the hop's fanout is -1)
  int64_t fanout;      // the hop's
  __device__ int64_t fanout_of(int64_t) const { return fanout; }
  __device__ int64_t max_degree_of(int64_t) const { return max_degree; }
  __device__ const int64_t* colptr_of(int64_t) const { return colptr; }
  __device__ const int64_t* row_of(int64_t) const { return row; }
  __device__ const BiasView& bias_of(int64_t) const { return bias; }
  __device__ int64_t edges_of(int64_t) const { return num_edges; }
  __device__ int64_t nodes_of(int64_t) const { return num_nodes; }
  __device__ int64_t key_offset(int64_t) const { return 0; }
  __device__ int64_t seed_type(int64_t) const { return 0; }
  __device__ int64_t seed_begin(int64_t) const { return 0; }
};

// A heterogeneous graph as a hop reads it: per-type tables in device memory (the plan's
// int64 buffer; pointers stored as integers).
struct ManyTypes {
  static constexpr int kTypes = kMaxTypes;
  static constexpr bool kHomogeneous = false;
  static constexpr bool kOwnerOfEveryDraw = true;
  const int64_t* colptr;       // [R] pointers
  const int64_t* row;          // [R] pointers
  const BiasView* bias;        // [R] what each edge type's draws read besides (node_draw.h)
  const int64_t* src_type;     // [R]
  const int64_t* dst_type;     // [R]
  const int64_t* type_offset;  // [T] key offset of each node type
  const int64_t* num_nodes;    // [T]
  const int64_t* seed_start;   // [T + 1] where each type's seeds begin among all seeds
  const int64_t* num_edges;    // [R]
  const int64_t* max_degree;   // [R] the plan's bound on a degree (read where the hop's fanout is -1)
  int64_t num_types, num_rels;
  const int64_t* fanout;  // [R] the hop's
  __device__ int64_t fanout_of(int64_t r) const { return fanout[r]; }
  __device__ int64_t max_degree_of(int64_t r) const { return max_degree[r]; }
  __device__ const int64_t* colptr_of(int64_t r) const { return reinterpret_cast<const int64_t*>(colptr[r]); }
  __device__ const int64_t* row_of(int64_t r) const { return reinterpret_cast<const int64_t*>(row[r]); }
  __device__ const BiasView& bias_of(int64_t r) const { return bias[r]; }
  __device__ int64_t edges_of(int64_t r) const { return num_edges[r]; }
  __device__ int64_t nodes_of(int64_t t) const { return num_nodes[t]; }
  __device__ int64_t key_offset(int64_t t) const { return type_offset[t]; }
  __device__ int64_t seed_type(int64_t p) const { return Segments{seed_start, nullptr, num_types}.find(p); }
  __device__ int64_t seed_begin(int64_t t) const { return seed_start[t]; }
};

// The dedup table's key of `node` of a type whose keys start at `type_offset`, in tree
// `tree` (disjoint mode; else 0) when a tree spans `tree_stride` keys.
__device__ __forceinline__ uint64_t node_key(int64_t type_offset, int64_t node, int64_t tree, int64_t tree_stride) {
  return static_cast<uint64_t>(tree * tree_stride + type_offset + node);
}

// What a hop's kernels share. A hop's tasks are the previous level's nodes of each edge
// type's destination type, edge type by edge type (one type: the frontier); task q
// draws step(draw_scan, q) neighbours into drawn[draw_scan[q] - k, draw_scan[q]).
template <typename Types>
struct HopArgs {
  Types g;  // the graph, with this hop's fanouts
  Counters c;
  const CallParams<Types::kTypes>* call;  // the device copy
  const int64_t* tree_time;  // [trees] each tree's seed time (temporal; else null)
  int64_t hop, num_hops;
  bool replace, disjoint, last;
  const int64_t* draw_scan;  // [tasks] inclusive sums of the tasks' draw counts
  int64_t* drawn;            // [edges] the CSC position of each draw
  double* drawn_key;         // [edges] weighted draws' scratch (else null)
  int64_t* owner;            // [edges] local id of the node each draw is for (Types::kOwnerOfEveryDraw, or
                             // bounded fanouts), or null
  int64_t* owner_tree;       // [edges] its tree (disjoint, many types), or null
  int64_t* hub_queue;        // [hub_queue_len] tasks queued for warp draws from the front, block draws from the back
  int64_t hub_queue_len;
};

// A hop's task: edge type rel draws for the index-th node of its destination type's
// level, whose local id, global id and tree these are.
struct Task {
  int64_t rel, index, local_id, node, tree;
};

// The live tasks of the hop (one type: the frontier's new nodes).
__device__ __forceinline__ int64_t live_tasks(const HopArgs<OneType>& a) { return a.c.level_count[a.hop]; }
__device__ __forceinline__ int64_t live_tasks(const HopArgs<ManyTypes>& a) {
  return a.c.task_start[a.g.num_rels];
}

// Task q. (One type reads the tree only where draws need it: temporal.)
__device__ __forceinline__ Task task_of(const HopArgs<OneType>& a, int64_t q) {
  const int64_t id = a.c.level_start[a.hop] + q;
  return {0, q, id, a.call->node_out[0][id], a.tree_time != nullptr ? a.call->batch_out[0][id] : 0};
}
__device__ __forceinline__ Task task_of(const HopArgs<ManyTypes>& a, int64_t q) {
  Task k;
  k.rel = Segments{a.c.task_start, nullptr, a.g.num_rels}.find(q);
  k.index = q - a.c.task_start[k.rel];
  const int64_t d = a.g.dst_type[k.rel];
  k.local_id = a.c.level_start[d * (a.num_hops + 1) + a.hop] + k.index;
  k.node = a.call->node_out[d][k.local_id];
  k.tree = a.disjoint ? a.call->batch_out[d][k.local_id] : 0;
  return k;
}

// The edge range [start, start + degree) of `node` in edge type `rel`, checked where it
// is read: the graph's tensors are the caller's, and may have changed since the plan
// checked them in ways no version counter sees (a pinned graph written through numpy, a
// CUDA one through DLPack). A range outside the row's edges, or (where the hop takes
// every neighbour, fanout -1) longer than the plan's bound on a degree, which sized its
// buffers, is noted and read as empty, so no kernel reads or writes outside its
// buffers, and the call raises once the counters are back. Every site reads a range the
// same way, so draw counts and draws agree.
template <typename Types>
__device__ __forceinline__ void node_range(const HopArgs<Types>& a, int64_t rel, int64_t node, int64_t& start,
                                           int64_t& degree) {
  const int64_t* colptr = a.g.colptr_of(rel);
  const int64_t s = colptr[node], e = colptr[node + 1];
  start = 0, degree = 0;
  if (!(s >= 0 && s <= e && e <= a.g.edges_of(rel))) {
    note_bad(a.c.bad, kBadRangeType, rel, node);
  } else if (a.g.fanout_of(rel) < 0 && e - s > a.g.max_degree_of(rel)) {
    note_bad(a.c.bad, kBadDegreeType, rel, node);
  } else {
    start = s, degree = e - s;
  }
}

// The draw of `node` along edge type `rel` in tree `tree` at the hop of `a` (node_draw.h:
// the edge type's bias, temporal when it has times, else weighted when it has weights).
template <typename Types>
__device__ __forceinline__ NodeDraw draw_at(const HopArgs<Types>& a, int64_t rel, int64_t node, int64_t tree) {
  int64_t start, degree;
  node_range(a, rel, node, start, degree);
  return node_draw_of(a.g.bias_of(rel), a.g.row_of(rel), start, degree, a.g.fanout_of(rel), a.replace, a.last,
                      a.tree_time != nullptr ? a.tree_time[tree] : 0);
}

template <typename Types>
__device__ __forceinline__ NodeDraw draw_of(const HopArgs<Types>& a, const Task& t) {
  return draw_at(a, t.rel, t.node, t.tree);
}

// The key of a task's draws (sampling_rng.h: the CPU sampler's keys).
template <typename Types>
__device__ __forceinline__ uint64_t task_key(const HopArgs<Types>& a, const Task& t) {
  return slot_key(type_key(hop_key(a.call->random_seed, a.hop), t.rel, Types::kHomogeneous), t.index);
}

// How many neighbours `node` draws along edge type `rel` in tree `tree` at the hop of
// `a` (`live`: the lane has a node). kFiltered (weighted and temporal draws; the
// kernels are instantiated per kind, so uniform sampling keeps its lean kernels): every
// lane of the warp calls it, and a node with more than kWarpDegree neighbours is counted
// by the whole warp.
template <bool kFiltered, typename Types>
__device__ __forceinline__ int64_t count_draws(const HopArgs<Types>& a, bool live, int64_t rel, int64_t node,
                                               int64_t tree) {
  if constexpr (!kFiltered) {
    int64_t start = 0, degree = 0;
    if (live) node_range(a, rel, node, start, degree);
    return live ? num_to_draw(a.g.fanout_of(rel), degree, a.replace) : 0;
  } else {
    return warp_assisted_count(live, live ? draw_at(a, rel, node, tree) : NodeDraw{});
  }
}

// Everything the first kernel takes, as one argument (one kernel-node parameter).
template <typename Types>
struct SeedArgs {
  CallParams<Types::kTypes> call;
  CallParams<Types::kTypes>* dev;  // the device copy the later kernels read
  Types g;
  Counters c;
  Table table;
  int64_t* slot;       // [seeds] each seed's table slot
  int64_t* node;       // [seeds] its node
  int64_t* tree;       // [seeds] its tree (disjoint; else null)
  int64_t* tree_time;  // [seeds] its tree's time (temporal; else null)
  int64_t num_seeds;
  bool disjoint;
  int64_t tree_stride;  // keys per tree (disjoint mode)
};

// Level 0, and the call's parameters to the device: every seed (types in order, repeats
// included) is inserted at its position, a tree each (numbered across types), its time
// kept for its tree; an out-of-range seed is noted and stands in as node 0 (the call
// raises once the counters are read, and no kernel reads outside the graph). Thread
// `first` takes positions first, first + stride, ...
template <typename Types>
__device__ __forceinline__ void insert_seeds(const SeedArgs<Types>& a, int64_t first, int64_t stride) {
  if (first == 0) *a.dev = a.call;
  const uint64_t epoch = static_cast<uint64_t>(a.call.epoch);
  for (int64_t p = first; p < a.num_seeds; p += stride) {
    const int64_t t = a.g.seed_type(p), i = p - a.g.seed_begin(t);
    int64_t v = a.call.seed[t][i];
    if (a.tree_time != nullptr && a.call.seed_time[t] != nullptr) a.tree_time[p] = a.call.seed_time[t][i];
    if (v < 0 || v >= a.g.nodes_of(t)) {
      auto* word = reinterpret_cast<unsigned long long*>(a.c.bad + kBadSeed);
      atomicCAS(word, 0ull, static_cast<unsigned long long>(p + 1));  // (any one bad seed will do)
      v = 0;
    }
    const int64_t tree = a.disjoint ? p : 0;
    a.slot[p] = table_insert_claim(a.table, epoch, node_key(a.g.key_offset(t), v, tree, a.tree_stride), p);
    a.node[p] = v;
    if (a.tree != nullptr) a.tree[p] = tree;
  }
}

template <typename Types>
__global__ void seed_kernel(SeedArgs<Types> a) {
  after_previous_kernel();
  insert_seeds(a, global_thread(), thread_count());
}

// Task q's draws (`live`: the lane has a task): the CSC positions into drawn, and where
// asked each position's owner. kFiltered: every lane of the warp calls it, and a
// weighted or temporal node with more than kWarpDegree neighbours whose draws a warp can
// make is queued for hub_draw_kernel instead (temporal draws in time-sorted columns stay
// with the thread: a binary search, then draws as uniform ones). One type leaves a
// uniform node taking all of a hub's edges (fanout -1) to its edge-parallel expand.
template <typename Types, bool kFiltered>
__device__ __forceinline__ void draw_task(const HopArgs<Types>& a, int64_t q, bool live) {
  int64_t k = 0, base = 0;
  Task task{};
  NodeDraw d{};
  if (live) {
    k = step(a.draw_scan, q);
    base = a.draw_scan[q] - k;
    if (k > 0) task = task_of(a, q), d = draw_of(a, task);
  }
  if (k > 0 && a.owner != nullptr && (Types::kOwnerOfEveryDraw || d.fanout >= 0)) {
    for (int64_t j = 0; j < k; ++j) {
      a.owner[base + j] = task.local_id;
      if (a.owner_tree != nullptr) a.owner_tree[base + j] = task.tree;
    }
  }
  const bool by_expand = !Types::kOwnerOfEveryDraw && !kFiltered && d.fanout < 0;
  const bool heavy = kFiltered && k > 0 && warp_draws(d, k);
  if (k > 0 && !by_expand && !heavy) {
    d.draw(task_key(a, task), k, a.drawn + base, a.drawn_key != nullptr ? a.drawn_key + base : nullptr);
  }
  if constexpr (kFiltered) {
    enqueue_hub(heavy, is_giant(d), q, a.c.hubs + a.hop, a.c.giants + a.hop, a.hub_queue, a.hub_queue_len);
  }
}

// Work a draw kernel's grid does besides (one type: the previous hop's rows): none.
struct NoSideWork {
  __device__ int64_t count() const { return 0; }
  __device__ void operator()(int64_t, int64_t) const {}
};

// A hop's draws, a thread per task (at most `task_bound`); the grid also covers
// side.count() items of side work, item t by thread t.
template <typename Types, bool kFiltered, typename Side>
__global__ void draw_kernel(HopArgs<Types> a, int64_t task_bound, Side side) {
  after_previous_kernel();
  const int64_t live = live_tasks(a), m = task_bound < live ? task_bound : live, extra = side.count();
  const int64_t n = m > extra ? m : extra;
  PYG_ACCEL_FOR_BLOCK_STRIDE(q, n) {  // (whole warps step together: warp counts and queues need every lane)
    side(q, extra);
    draw_task<Types, kFiltered>(a, q, q < m);
  }
}

// A hop's queued tasks, for hub_draw_kernel (sample_hub_draw.cuh): the queue draw_task
// filled, and where a queued task's draws come from and go.
template <typename Types>
struct QueuedTasks {
  HopArgs<Types> a;
  __device__ HubQueue queue() const {
    return {a.hub_queue, a.hub_queue_len, a.c.hubs + a.hop, a.c.giants + a.hop, a.c.claimed + 2 * a.hop};
  }
  __device__ QueuedDraw queued(int64_t q) const {
    const int64_t k = step(a.draw_scan, q), base = a.draw_scan[q] - k;
    const Task t = task_of(a, q);
    return {draw_of(a, t), task_key(a, t), k, a.drawn + base};
  }
};

// Raises the error the counters `bad` (as published to the host) report, if any, for
// op `op` (homogeneous: neighbor_sample's messages, about one node and edge set).
// `seed_at(p)`: the p-th seed's value; `type_of_seed(p)`: its node type.
template <typename SeedAt, typename TypeOfSeed>
void raise_bad_input(const int64_t* bad, bool homogeneous, int64_t num_nodes, int64_t num_edges,
                     const SeedAt& seed_at, const TypeOfSeed& type_of_seed) {
  if (bad[kBadSeed] != 0) {
    const int64_t p = bad[kBadSeed] - 1;
    if (homogeneous) {
      TORCH_CHECK_INDEX(false, "neighbor_sample: seed ", std::to_string(seed_at(p)), " is out of range for ",
                        std::to_string(num_nodes), " nodes");
    }
    TORCH_CHECK(false, "hetero_neighbor_sample: seed ", std::to_string(seed_at(p)), " is out of range for node type ",
                std::to_string(type_of_seed(p)));
  }
  if (bad[kBadRangeType] != 0) {
    const int64_t v = bad[kBadRangeNode] - 1;
    if (homogeneous) {
      TORCH_CHECK_INDEX(false, "neighbor_sample: colptr[", std::to_string(v), ":", std::to_string(v + 2),
                        "] is not a valid edge range for ", std::to_string(num_edges),
                        " edges (colptr must start at 0, never decrease and end at len(row))");
    }
    TORCH_CHECK_INDEX(false, "hetero_neighbor_sample: colptr of edge type ", std::to_string(bad[kBadRangeType] - 1),
                      " holds a range outside its row's edges (colptr must start at 0, never decrease and end at "
                      "len(row))");
  }
  if (bad[kBadDegreeType] != 0) {
    TORCH_CHECK(false, homogeneous ? "neighbor_sample" : "hetero_neighbor_sample", ": node ",
                std::to_string(bad[kBadDegreeNode] - 1),
                homogeneous ? "" : " of edge type " + std::to_string(bad[kBadDegreeType] - 1) + "'s destination type",
                " has more neighbours than any had when this sampling configuration was first used: the graph's "
                "colptr changed in place without its version counter (as through numpy or DLPack); call "
                "pyg_accel.ops.clear_sampler_cache() after such an edit");
  }
  if (bad[kBadRowType] != 0) {
    if (homogeneous) {
      TORCH_CHECK_INDEX(false, "neighbor_sample: row[", std::to_string(bad[kBadRowEdge] - 1), "] is not one of the ",
                        std::to_string(num_nodes), " nodes of colptr");
    }
    TORCH_CHECK_INDEX(false, "hetero_neighbor_sample: row of edge type ", std::to_string(bad[kBadRowType] - 1),
                      " holds a node out of range");
  }
}

}  // namespace
}  // namespace pyg_accel
