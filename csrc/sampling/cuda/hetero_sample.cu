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
// computing its items on the fly. The output edges, grouped per hop in the position
// buffers, are then written edge type by edge type into one tensor each (row, col,
// edge) in one pass per hop, and the last kernel publishes the counters to pinned host
// memory: the call's one host synchronisation.
//
// As the homogeneous sampler does (sample_plan.h), a HeteroPlan per configuration
// (graph tensors, seeds per type, fanouts, options) owns every buffer, sized by
// host-side upper bounds (the kernels read the live sizes from the counters), and the
// per-type tables on the device; the call's parameters (seeds, output addresses, random
// seed, epoch) are the first kernel's argument, which it copies to device memory for
// the others, so from the plan's second call on the sample is one CUDA graph's replay.
// The dedup table and the scans' look-back words carry the call's epoch and are never
// cleared between calls.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <cub/cub.cuh>

#include "../../common/tensor_id.h"
#include "../sampler_inputs.h"
#include "../sampling_seed.h"
#include "../started_sample.h"
#include "sample_engine.cuh"
#include "sample_launch.cuh"
#include "sample_plan.h"
#include "sample_publish.cuh"
#include "sample_table.cuh"
#include "tile_scan.cuh"

namespace pyg_accel {
namespace {

using HeteroCall = CallParams<kMaxTypes>;
using TypedHop = HopArgs<ManyTypes>;

// Per-position state of a level: the table slot of the node it reached, the node
// (global id within its type) and, in disjoint mode, its tree.
struct Positions {
  int64_t* slot;
  int64_t* node;
  int64_t* tree;  // null unless disjoint
};

// Inclusive sums of item(p) over the live positions [0, live) into incl, one tile of
// kScanTile positions per block: the block's sum, then its prefix by decoupled
// look-back over the earlier tiles' status words (the scan's own, of the call's epoch).
// Blocks past the live positions return at once, so a grid sized by the upper bound
// costs only their launch.
constexpr int kScanItems = 4;
constexpr int64_t kScanTile = static_cast<int64_t>(kBlock) * kScanItems;

template <typename Item>
__global__ void __launch_bounds__(kBlock) live_scan_kernel(Item item, const int64_t* live_ptr, int64_t* incl,
                                                             unsigned long long* status, const HeteroCall* call) {
  using Scan = cub::BlockScan<int64_t, kBlock>;
  __shared__ typename Scan::TempStorage storage;
  __shared__ int64_t tile_before;
  const int64_t live = *live_ptr, tile = blockIdx.x, first = tile * kScanTile;
  if (first >= live) return;
  const uint64_t epoch = static_cast<uint64_t>(call->epoch);
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
  const HeteroCall* call;
  Table table;
  const int64_t* slot;
  __device__ int64_t operator()(int64_t p, bool valid) const {
    return valid && table_is_first(table, slot[p], static_cast<uint64_t>(call->epoch), p);
  }
};

// One thread, after the flags' inclusive scan: each segment's base among its type's
// new nodes, the level's count and first local id per type, and (if a hop follows)
// that hop's task offsets: edge type r expands the level's nodes of its destination
// type.
__global__ void level_summary_kernel(ManyTypes g, Counters c, Segments seg, const int64_t* scan, int64_t level,
                                     int64_t num_hops) {
  int64_t found[kMaxTypes];
  for (int64_t t = 0; t < g.num_types; ++t) found[t] = 0;
  for (int64_t s = 0; s < seg.count; ++s) {
    const int64_t begin = seg.start[s], end = seg.start[s + 1];
    const int64_t t = seg.type_of(s);
    c.seg_base[s] = found[t];
    if (end > begin) found[t] += scan[end - 1] - (begin > 0 ? scan[begin - 1] : 0);
  }
  const int64_t L = num_hops + 1;
  for (int64_t t = 0; t < g.num_types; ++t) {
    c.level_count[t * L + level] = found[t];
    c.level_start[t * L + level] =
        level == 0 ? 0 : c.level_start[t * L + level - 1] + c.level_count[t * L + level - 1];
  }
  if (level < num_hops) {
    c.task_start[0] = 0;
    for (int64_t r = 0; r < g.num_rels; ++r) {
      c.task_start[r + 1] = c.task_start[r] + found[g.dst_type[r]];
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
__global__ void assign_kernel(const HeteroCall* call, Counters c, Table table, Segments seg, Positions pos,
                              const int64_t* scan, int64_t level, int64_t num_hops, int64_t bound) {
  const int64_t live = seg.start[seg.count];
  const int64_t L = num_hops + 1;
  const uint64_t epoch = static_cast<uint64_t>(call->epoch);
  for (int64_t p = global_thread(); p < bound && p < live; p += thread_count()) {
    if (step(scan, p) == 0) continue;  // (the flags' inclusive sums)
    const int64_t s = seg.find(p);
    const int64_t t = seg.type_of(s), begin = seg.start[s];
    const int64_t rank = scan[p] - 1 - (begin > 0 ? scan[begin - 1] : 0) + c.seg_base[s];
    const int64_t id = c.level_start[t * L + level] + rank;
    call->node_out[t][id] = pos.node[p];
    if (pos.tree != nullptr) call->batch_out[t][id] = pos.tree[p];
    if (level > 0 || table_is_first(table, pos.slot[p], epoch, p)) table_assign(table, pos.slot[p], epoch, id);
  }
}

// The draw count of task q (`valid`: the lane has one); see count_draws.
template <bool kFiltered>
struct DrawCount {
  TypedHop a;
  __device__ int64_t operator()(int64_t q, bool valid) const {
    const Task t = valid ? task_of(a, q) : Task{};
    return count_draws<kFiltered>(a, valid, t.rel, t.node, t.tree);
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

// A position per thread (balanced whatever the degrees): the neighbour the drawn edge
// leads to, inserted into the table (the smallest position per node wins; repeats of a
// node within a warp make one insert: claim_in_warp). An out-of-range row is noted and
// stands in as node 0.
__global__ void insert_kernel(ManyTypes g, const HeteroCall* call, Counters c, Table table, Segments seg,
                              const int64_t* edge, Positions pos, int64_t bound, int64_t tree_stride) {
  const int64_t live = seg.start[seg.count] < bound ? seg.start[seg.count] : bound;
  const uint64_t epoch = static_cast<uint64_t>(call->epoch);
  PYG_ACCEL_FOR_BLOCK_STRIDE(p, live) {  // (whole warps step together: claim_in_warp needs every lane)
    const bool valid = p < live;
    int64_t u = 0;
    int64_t key = -1 - static_cast<int64_t>(threadIdx.x % 32);  // dead lanes: a key no one else has
    if (valid) {
      const int64_t r = seg.find(p), s = g.src_type[r];
      u = g.row_of(r)[edge[p]];
      if (u < 0 || u >= g.num_nodes[s]) {
        note_bad(c.bad, kBadRowType, r, edge[p]);
        u = 0;
      }
      const int64_t tree = pos.tree != nullptr ? pos.tree[p] : 0;
      key = static_cast<int64_t>(node_key(g.type_offset[s], u, tree, tree_stride));
    }
    const int64_t slot = claim_in_warp(table, epoch, key, valid, p);
    if (valid) {
      pos.slot[p] = slot;
      pos.node[p] = u;
    }
  }
}

// A hop's edges (at most `bound`) into the outputs, which hold edge type 0's edges (hop
// by hop), then edge type 1's, ...: edge type r's edges of this hop start after every
// edge of the types before r and r's edges of the earlier hops (from the counters).
__global__ void emit_kernel(const HeteroCall* call, Table table, Counters c, Segments seg, int64_t hop,
                            int64_t num_hops, const int64_t* slot, const int64_t* col, const int64_t* edge,
                            int64_t bound) {
  __shared__ int64_t shift[kMaxTypes];  // output index of position q of edge type r: shift[r] + q
  const int64_t R = seg.count;
  const int64_t count = seg.start[R] < bound ? seg.start[R] : bound;
  for (int64_t r = threadIdx.x; r < R; r += blockDim.x) {
    int64_t before = -seg.start[r];
    for (int64_t i = 0; i < r * num_hops + hop; ++i) before += c.edge_count[i];
    shift[r] = before;
  }
  __syncthreads();
  for (int64_t q = global_thread(); q < count; q += thread_count()) {
    const int64_t j = shift[seg.find(q)] + q;
    call->row_out[j] = table_local_id(table, slot[q]);
    call->col_out[j] = col[q];
    call->edge_out[j] = edge[q];
  }
}

// Host side ###########################################################################

// Launches a grid-stride kernel over n items, its grid capped at what the GPU holds at
// once; nothing for n = 0. (Plain launches: as programmatic dependent launches, as the
// homogeneous sampler's are, a [15, 10, 5] sample of the ogbn-mag-like graph took 11%
// longer on an H200, 0.89 ms against 0.80.)
template <typename... Params, typename... Args>
void launch(void (*kernel)(Params...), int64_t n, cudaStream_t stream, Args... args) {
  if (n == 0) return;
  kernel<<<capped_grid(kernel, n), kBlock, 0, stream>>>(args...);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

int64_t address(const at::Tensor& t) { return t.defined() ? reinterpret_cast<int64_t>(t.data_ptr()) : 0; }
int64_t* long_ptr(const at::Tensor& t) { return t.defined() ? t.data_ptr<int64_t>() : nullptr; }

// Everything one configuration needs on the GPU (see the top of the file).
class HeteroPlan {
 public:
  // `in`: the call's checked inputs (read_hetero_inputs) of the caller's `colptr_list`;
  // `copies`: those of its tensors that conversion made (the plan keeps them; the
  // caller's own are not held).
  HeteroPlan(PlanKey key, const HeteroInputs& in, at::TensorList colptr_list, std::vector<at::Tensor> copies)
      : key_(std::move(key)),
        T_(static_cast<int64_t>(key_.num_nodes.size())),
        R_(static_cast<int64_t>(key_.src_type.size())),
        H_(key_.num_hops),
        weighted_(in.weighted),
        temporal_(in.temporal),
        converted_(std::move(copies)) {
    const auto& num_nodes = key_.num_nodes;
    // Seeds' places, key ranges per type.
    seed_start_.assign(T_ + 1, 0);
    std::vector<int64_t> type_offset(T_, 0);
    int64_t total_nodes = 0;
    for (int64_t t = 0; t < T_; ++t) {
      seed_start_[t + 1] = seed_start_[t] + key_.num_seeds[t];
      type_offset[t] = total_nodes;
      total_nodes = sat_add(total_nodes, std::max<int64_t>(num_nodes[t], 0));
    }
    num_seeds_ = seed_start_[T_];
    tree_stride_ = std::max<int64_t>(total_nodes, 1);
    TORCH_CHECK(sat_mul(std::max<int64_t>(key_.disjoint ? num_seeds_ : 1, 1), tree_stride_) < (int64_t{1} << 43),
                "hetero_neighbor_sample: too many nodes (x seeds in disjoint mode) for the CUDA kernel's table keys");

    // Upper bounds: nodes per type and level, tasks and edges per hop.
    std::vector<int64_t> fanout_by_hop(static_cast<size_t>(H_ * R_));  // [H][R]
    std::vector<int64_t> max_degree(R_, -1);
    auto fan_bound = [&](int64_t r, int64_t h) {
      const int64_t f = key_.fanouts[r * H_ + h];
      if (f >= 0) return f;
      if (max_degree[r] < 0) {  // (at most the row's edges: see node_range)
        max_degree[r] = std::clamp<int64_t>(max_in_degree(colptr_list[r], in.colptrs[r]), 0, in.rows[r].numel());
      }
      return max_degree[r];
    };
    std::vector<std::vector<int64_t>> level_bound(T_, std::vector<int64_t>(H_ + 1, 0));
    task_bound_.assign(H_, 0);
    edge_bound_.assign(H_, 0);
    for (int64_t t = 0; t < T_; ++t) level_bound[t][0] = key_.num_seeds[t];  // (every seed, repeats included)
    for (int64_t h = 0; h < H_; ++h) {
      for (int64_t r = 0; r < R_; ++r) {
        fanout_by_hop[h * R_ + r] = key_.fanouts[r * H_ + h];
        const int64_t from = level_bound[key_.dst_type[r]][h], drawn = sat_mul(from, fan_bound(r, h));
        task_bound_[h] = sat_add(task_bound_[h], from);
        edge_bound_[h] = sat_add(edge_bound_[h], drawn);
        level_bound[key_.src_type[r]][h + 1] = sat_add(level_bound[key_.src_type[r]][h + 1], drawn);
      }
      for (int64_t t = 0; t < T_; ++t) {
        if (!key_.disjoint) level_bound[t][h + 1] = std::min<int64_t>(level_bound[t][h + 1], num_nodes[t]);
      }
    }
    node_bound_.assign(T_, 0);
    int64_t all_nodes = 0, max_positions = num_seeds_, max_tasks = 0;
    for (int64_t t = 0; t < T_; ++t) {
      for (int64_t l = 0; l <= H_; ++l) node_bound_[t] = sat_add(node_bound_[t], level_bound[t][l]);
      if (!key_.disjoint) node_bound_[t] = std::min<int64_t>(node_bound_[t], key_.num_seeds[t] + num_nodes[t]);
      all_nodes = sat_add(all_nodes, node_bound_[t]);
    }
    for (int64_t h = 0; h < H_; ++h) {
      max_positions = std::max(max_positions, edge_bound_[h]);
      max_tasks = std::max(max_tasks, task_bound_[h]);
      edge_out_len_ = sat_add(edge_out_len_, edge_bound_[h]);
    }
    constexpr int64_t kLimit = int64_t{1} << 36;
    TORCH_CHECK(all_nodes < kLimit && max_positions < kLimit && edge_out_len_ < kLimit,
                "hetero_neighbor_sample: the sample's upper bound (",
                std::to_string(std::max(all_nodes, max_positions)),
                " nodes or edges) is too large for the CUDA kernel's buffers; use smaller fanouts or batches");

    // Zeroed state in one allocation: the table, the counters, each scan's look-back
    // words (epoch 0: every slot free, nothing published).
    const auto long_opts = in.colptrs.empty() ? at::TensorOptions().device(at::kCUDA, key_.device).dtype(at::kLong)
                                              : in.colptrs[0].options().dtype(at::kLong);
    int64_t capacity = 1024;
    while (capacity < 2 * all_nodes) capacity *= 2;
    counter_words_ = Counters::size(T_, R_, H_);
    int64_t status_words = 0;
    auto status_region = [&](int64_t bound) {
      const int64_t at_ = status_words;
      status_words += bound / kScanTile + 1;
      return at_;
    };
    for (int64_t l = 0; l <= H_; ++l) level_status_.push_back(status_region(l == 0 ? num_seeds_ : edge_bound_[l - 1]));
    for (int64_t h = 0; h < H_; ++h) draw_status_.push_back(status_region(task_bound_[h]));
    state_ = at::zeros({2 * capacity + counter_words_ + status_words}, long_opts);
    table_ = Table{reinterpret_cast<TableSlot*>(state_.data_ptr<int64_t>()), capacity - 1};
    status_offset_ = 2 * capacity + counter_words_;
    host_counts_ = at::empty({counter_words_}, long_opts.device(at::kCPU).pinned_memory(true));

    // The per-type tables (colptr, row, ... pointers per edge type; offsets, sizes per
    // node type; fanouts per hop) and the device copy of the call's parameters.
    std::vector<int64_t> meta_host;
    auto append = [&](const std::vector<int64_t>& values) {
      const int64_t at_ = static_cast<int64_t>(meta_host.size());
      meta_host.insert(meta_host.end(), values.begin(), values.end());
      return at_;
    };
    std::vector<int64_t> colptr_a(R_), row_a(R_), num_edges_a(R_), max_degree_a(R_);
    for (int64_t r = 0; r < R_; ++r) {
      colptr_a[r] = address(in.colptrs[r]);
      row_a[r] = address(in.rows[r]);
      num_edges_a[r] = in.rows[r].numel();
      // (-1: no hop takes every neighbour, and none reads the bound)
      max_degree_a[r] = max_degree[r] < 0 ? std::numeric_limits<int64_t>::max() : max_degree[r];
    }
    // Each edge type's BiasView, as int64 words (the struct holds pointers, integers and flags).
    static_assert(sizeof(BiasView) % sizeof(int64_t) == 0 && alignof(BiasView) <= alignof(int64_t),
                  "BiasView is copied as int64 words");
    static_assert(sizeof(HeteroCall) % sizeof(int64_t) == 0, "CallParams are copied as int64 words");
    const std::vector<BiasView> views = bias_views(in, key_.src_type, num_nodes);
    std::vector<int64_t> bias_a(views.size() * sizeof(BiasView) / sizeof(int64_t));
    if (!views.empty()) std::memcpy(bias_a.data(), views.data(), views.size() * sizeof(BiasView));
    const int64_t o_colptr = append(colptr_a), o_row = append(row_a), o_bias = append(bias_a),
                  o_src = append(key_.src_type), o_dst = append(key_.dst_type), o_offset = append(type_offset),
                  o_num_nodes = append(num_nodes), o_seed_start = append(seed_start_),
                  o_fanout = append(fanout_by_hop), o_num_edges = append(num_edges_a),
                  o_max_degree = append(max_degree_a),
                  o_params = append(std::vector<int64_t>(sizeof(HeteroCall) / sizeof(int64_t), 0));
    meta_ = at::empty({static_cast<int64_t>(meta_host.size())}, long_opts);
    // (From pageable memory: the call returns once the driver has staged the bytes.)
    C10_CUDA_CHECK(cudaMemcpyAsync(meta_.data_ptr<int64_t>(), meta_host.data(), meta_host.size() * sizeof(int64_t),
                                   cudaMemcpyHostToDevice, at::cuda::getCurrentCUDAStream()));
    const int64_t* md = meta_.data_ptr<int64_t>();
    params_dev_ = reinterpret_cast<HeteroCall*>(meta_.data_ptr<int64_t>() + o_params);
    fanout_dev_ = md + o_fanout;

    // Scratch.
    int64_t scratch_words = 0;
    auto carve = [&](int64_t n) {
      const int64_t at_ = scratch_words;
      scratch_words = sat_add(scratch_words, n);
      return at_;
    };
    o_scan_ = carve(max_positions), o_node_ = carve(max_positions), o_tree_ = carve(key_.disjoint ? max_positions : 0);
    o_seed_slot_ = carve(num_seeds_), o_task_scan_ = carve(max_tasks), o_keys_ = carve(weighted_ ? max_positions : 0);
    o_hub_queue_ = carve(weighted_ || temporal_ ? max_tasks : 0);
    o_tree_time_ = carve(temporal_ ? num_seeds_ : 0);
    for (int64_t h = 0; h < H_; ++h) {
      o_hop_slot_.push_back(carve(edge_bound_[h]));
      o_hop_edge_.push_back(carve(edge_bound_[h]));
      o_hop_col_.push_back(carve(edge_bound_[h]));
    }
    scratch_ = at::empty({std::max<int64_t>(scratch_words, 1)}, long_opts);
    g_ = ManyTypes{md + o_colptr,    md + o_row,       reinterpret_cast<const BiasView*>(md + o_bias),
                   md + o_src,       md + o_dst,       md + o_offset,
                   md + o_num_nodes, md + o_seed_start, md + o_num_edges,
                   md + o_max_degree, T_,               R_,
                   nullptr};
  }

  const PlanKey& key() const { return key_; }

  // A sample's state between its start and its finish.
  struct Started {
    std::vector<at::Tensor> node, batch;  // per node type, at their upper bounds until finished
    at::Tensor row, col, edge;
    std::vector<at::Tensor> seeds, seed_times;  // (held until the kernels have read them)
    std::shared_ptr<SampleCounts> counts;
  };

  // One sample of `seeds` (one int64 tensor per node type, as many as the key says),
  // started: its kernels enqueued on the current stream (after the counts of this plan's
  // previous sample are read, if they were not) into fresh outputs at their upper bounds.
  Started start(const std::vector<at::Tensor>& seeds, const std::vector<at::Tensor>& seed_times,
                int64_t random_seed) {
    const WaitMode wait = wait_mode();  // (a bad setting raises before anything is enqueued)
    std::lock_guard<std::mutex> lock(mutex_);
    wait_.read_unread();
    const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int64_t epoch = epoch_.next([&] {
      state_.narrow(0, 0, 2 * (table_.mask + 1)).zero_();
      state_.narrow(0, status_offset_, state_.numel() - status_offset_).zero_();
    });
    const c10::Device device = state_.device();
    auto fresh = [&](int64_t len) {
      return at::Tensor(at::detail::empty_cuda({len}, at::kLong, device, std::nullopt));
    };
    Started started{std::vector<at::Tensor>(T_), std::vector<at::Tensor>(key_.disjoint ? T_ : 0)};
    started.seeds = seeds;
    started.seed_times = seed_times;
    HeteroCall& call = seed_args_.call;
    call = HeteroCall{};
    for (int64_t t = 0; t < T_; ++t) {
      started.node[t] = fresh(node_bound_[t]);
      call.node_out[t] = long_ptr(started.node[t]);
      if (key_.disjoint) {
        started.batch[t] = fresh(node_bound_[t]);
        call.batch_out[t] = long_ptr(started.batch[t]);
      }
      call.seed[t] = long_ptr(seeds[t]);
      call.seed_time[t] = temporal_ && seeds[t].numel() > 0 ? long_ptr(seed_times[t]) : nullptr;
    }
    started.row = fresh(edge_out_len_), started.col = fresh(edge_out_len_), started.edge = fresh(edge_out_len_);
    call.row_out = long_ptr(started.row), call.col_out = long_ptr(started.col), call.edge_out = long_ptr(started.edge);
    call.random_seed = random_seed;
    call.epoch = epoch;
    const auto enqueue_on = [this](cudaStream_t s) { enqueue(s); };
    void* args[] = {&seed_args_};
    replay_.prepare({reinterpret_cast<const void*>(&seed_kernel<ManyTypes>)}, args, enqueue_on);
    replay_.launch(stream, enqueue_on);
    started.counts = wait_.record(stream, wait, host_counts_);
    return started;
  }

  // A started sample's outputs (waiting for its counts if they are unread), returned as
  // views of their used prefixes.
  HeteroOutput finish(Started& started) {
    std::lock_guard<std::mutex> lock(mutex_);
    const SampleCounts& counts = wait_.counts(started.counts);
    const Counters hc = Counters::at(const_cast<int64_t*>(counts.words.data()), T_, R_, H_);
    const auto type_of_seed = [&](int64_t p) {
      return std::upper_bound(seed_start_.begin(), seed_start_.end(), p) - seed_start_.begin() - 1;
    };
    const std::vector<at::Tensor>& seeds = started.seeds;
    raise_bad_input(
        hc.bad, false, 0, 0,
        [&](int64_t p) { return seeds[type_of_seed(p)][p - seed_start_[type_of_seed(p)]].item<int64_t>(); },
        type_of_seed);
    // The fresh outputs, shrunk to their used prefixes.
    for (int64_t t = 0; t < T_; ++t) {
      int64_t n = 0;
      for (int64_t l = 0; l <= H_; ++l) n += hc.level_count[t * (H_ + 1) + l];
      shrink_to(started.node[t], n);
      if (key_.disjoint) shrink_to(started.batch[t], n);
    }
    int64_t total_edges = 0;
    for (int64_t i = 0; i < R_ * H_; ++i) total_edges += hc.edge_count[i];
    for (const at::Tensor* t : {&started.row, &started.col, &started.edge}) shrink_to(*t, total_edges);
    at::Tensor nodes_per_hop = at::empty({T_, H_ + 1}, at::kLong), edges_per_hop = at::empty({R_, H_}, at::kLong);
    std::memcpy(nodes_per_hop.data_ptr<int64_t>(), hc.level_count, T_ * (H_ + 1) * sizeof(int64_t));
    std::memcpy(edges_per_hop.data_ptr<int64_t>(), hc.edge_count, R_ * H_ * sizeof(int64_t));
    return {started.node, started.batch, started.row, started.col, started.edge, nodes_per_hop, edges_per_hop};
  }

 private:
  // The whole sample, a fixed kernel sequence (graph-capturable): the call's parameters
  // in (seed_args_.call), the levels and hops, the edges out, the counters to pinned memory.
  void enqueue(cudaStream_t stream) {
    int64_t* const state = state_.data_ptr<int64_t>();
    const Counters c = Counters::at(state + 2 * (table_.mask + 1), T_, R_, H_);
    auto* const status = reinterpret_cast<unsigned long long*>(state + status_offset_);
    int64_t* const base = scratch_.data_ptr<int64_t>();
    int64_t* const scan = base + o_scan_;
    int64_t* const task_scan = base + o_task_scan_;
    int64_t* const tree_ptr = key_.disjoint ? base + o_tree_ : nullptr;
    int64_t* const tree_time = temporal_ ? base + o_tree_time_ : nullptr;
    double* const keys = weighted_ ? reinterpret_cast<double*>(base + o_keys_) : nullptr;
    const HeteroCall* call = params_dev_;
    const Table table = table_;

    // Inclusive sums of item over the live positions (at most `bound`), one kernel.
    auto live_scan = [&](auto item, const int64_t* live, int64_t* incl, int64_t bound, int64_t status_at) {
      if (bound == 0) return;
      live_scan_kernel<<<static_cast<unsigned>((bound + kScanTile - 1) / kScanTile), kBlock, 0, stream>>>(
          item, live, incl, status + status_at, call);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    // Numbers a level whose positions are in pos (scan of the first reaches, summary, assign).
    auto number_level = [&](const Segments& seg, const Positions& pos, int64_t level, int64_t bound) {
      if (level == 0) {
        live_scan(EveryPosition{}, seg.start + seg.count, scan, bound, level_status_[0]);
      } else {
        live_scan(FirstReach{call, table, pos.slot}, seg.start + seg.count, scan, bound, level_status_[level]);
      }
      level_summary_kernel<<<1, 1, 0, stream>>>(g_, c, seg, scan, level, H_);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      launch(assign_kernel, bound, stream, call, c, table, seg, pos, scan, level, H_, bound);
    };

    const Positions seed_pos{base + o_seed_slot_, base + o_node_, tree_ptr};
    seed_args_.dev = params_dev_;
    seed_args_.g = g_;
    seed_args_.c = c;
    seed_args_.table = table;
    seed_args_.slot = seed_pos.slot;
    seed_args_.node = seed_pos.node;
    seed_args_.tree = seed_pos.tree;
    seed_args_.tree_time = tree_time;
    seed_args_.num_seeds = num_seeds_;
    seed_args_.disjoint = key_.disjoint;
    seed_args_.tree_stride = tree_stride_;
    // (always launched, if only to copy the call's parameters)
    seed_kernel<ManyTypes><<<capped_grid(seed_kernel<ManyTypes>, num_seeds_), kBlock, 0, stream>>>(seed_args_);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    number_level(Segments{g_.seed_start, nullptr, T_}, seed_pos, 0, num_seeds_);
    const bool filtered = weighted_ || temporal_;  // (kernels whose warps take the hubs of weighted and temporal types)
    for (int64_t h = 0; h < H_; ++h) {
      ManyTypes g = g_;
      g.fanout = fanout_dev_ + h * R_;
      int64_t* const edge = base + o_hop_edge_[h];
      const TypedHop a{g,     c,    call, tree_time, h, H_, key_.replace, key_.disjoint, key_.last, task_scan, edge,
                       keys, base + o_hop_col_[h], tree_ptr, base + o_hub_queue_, task_bound_[h]};
      if (filtered) {
        live_scan(DrawCount<true>{a}, c.task_start + R_, task_scan, task_bound_[h], draw_status_[h]);
      } else {
        live_scan(DrawCount<false>{a}, c.task_start + R_, task_scan, task_bound_[h], draw_status_[h]);
      }
      hop_summary_kernel<<<1, 1, 0, stream>>>(c, task_scan, h, R_, H_);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      launch(filtered ? draw_kernel<ManyTypes, true, NoSideWork> : draw_kernel<ManyTypes, false, NoSideWork>,
             task_bound_[h], stream, a, task_bound_[h], NoSideWork{});
      if (filtered) {
        launch(hub_draw_kernel<QueuedTasks<ManyTypes>>, 32 * task_bound_[h], stream, QueuedTasks<ManyTypes>{a});
      }
      const Segments seg{c.rel_start + h * (R_ + 1), g_.src_type, R_};
      const Positions pos{base + o_hop_slot_[h], base + o_node_, tree_ptr};
      launch(insert_kernel, edge_bound_[h], stream, g_, call, c, table, seg, edge, pos, edge_bound_[h], tree_stride_);
      number_level(seg, pos, h + 1, edge_bound_[h]);
    }
    for (int64_t h = 0; h < H_; ++h) {  // the edges, edge type by edge type
      launch(emit_kernel, edge_bound_[h], stream, call, table, c, Segments{c.rel_start + h * (R_ + 1), nullptr, R_},
             h, H_, base + o_hop_slot_[h], base + o_hop_col_[h], base + o_hop_edge_[h], edge_bound_[h]);
    }
    publish_kernel<<<1, kBlock, 0, stream>>>(
        PublishArgs{c.level_count, host_counts_.data_ptr<int64_t>(), counter_words_, nullptr});
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }

  PlanKey key_;
  int64_t T_, R_, H_;
  bool weighted_, temporal_;
  std::vector<at::Tensor> converted_;  // the inputs' int64 / contiguous copies the tables point into
  std::vector<int64_t> seed_start_, task_bound_, edge_bound_, node_bound_;
  int64_t num_seeds_ = 0, tree_stride_ = 1, edge_out_len_ = 1, counter_words_ = 0;
  at::Tensor state_;       // [table | counters | look-back words], zeroed once
  Table table_{};
  int64_t status_offset_ = 0;
  std::vector<int64_t> level_status_, draw_status_;  // each scan's first look-back word (after status_offset_)
  at::Tensor host_counts_;  // pinned: the counters as the last kernel publishes them
  at::Tensor meta_;         // the per-type tables, then the call parameters (device copy)
  HeteroCall* params_dev_ = nullptr;
  const int64_t* fanout_dev_ = nullptr;  // [H][R]
  ManyTypes g_{};  // the graph's tables (device), without a hop's fanouts
  at::Tensor scratch_;
  int64_t o_scan_ = 0, o_node_ = 0, o_tree_ = 0, o_seed_slot_ = 0, o_task_scan_ = 0, o_keys_ = 0, o_hub_queue_ = 0,
          o_tree_time_ = 0;
  std::vector<int64_t> o_hop_slot_, o_hop_edge_, o_hop_col_;
  SeedArgs<ManyTypes> seed_args_{};  // the first kernel's argument (its call field set per call)
  SampleEpoch epoch_;
  std::mutex mutex_;
  SampleReplay replay_;
  SampleWait wait_;
};

// A hetero_neighbor_sample call's sample, started, and its plan (made on first use).
std::pair<std::shared_ptr<HeteroPlan>, HeteroPlan::Started> start_sample(
    at::IntArrayRef num_nodes, at::IntArrayRef src_type, at::IntArrayRef dst_type, at::TensorList colptr_list,
    at::TensorList row_list, at::TensorList seed_list, at::IntArrayRef num_neighbors, int64_t num_hops, bool replace,
    bool disjoint, std::optional<int64_t> random_seed, const OptionalTensors& edge_bias,
    const OptionalTensors& node_bias, const OptionalTensors& seed_time_list, c10::string_view temporal_strategy) {
  const int64_t T = static_cast<int64_t>(num_nodes.size()), R = static_cast<int64_t>(src_type.size());
  TORCH_CHECK(T > 0, "hetero_neighbor_sample: no node types");
  TORCH_CHECK(T <= kMaxTypes && R <= kMaxTypes, "hetero_neighbor_sample: the CUDA kernel takes up to ",
              std::to_string(kMaxTypes), " node types and edge types");
  const at::Device device = R > 0 ? colptr_list[0].device() : seed_list[0].device();
  TORCH_CHECK(device.is_cuda(), "hetero_neighbor_sample: the CUDA kernel needs the graph on a GPU");
  const c10::cuda::CUDAGuard guard(device);
  const HeteroInputs in = read_hetero_inputs(num_nodes, src_type, dst_type, colptr_list, row_list, seed_list,
                                             num_neighbors, num_hops, disjoint, edge_bias, node_bias, seed_time_list,
                                             temporal_strategy, device);
  std::vector<at::Tensor> seeds(T);
  std::vector<int64_t> num_seeds(T);
  for (int64_t t = 0; t < T; ++t) {
    TORCH_CHECK(seed_list[t].numel() == 0 || num_nodes[t] > 0, "hetero_neighbor_sample: seeds of node type ",
                std::to_string(t), " are out of range (the type has no nodes)");
    const at::Tensor& s = seed_list[t];  // (the Python wrapper passes 1-D int64 seeds: no dispatch then)
    seeds[t] = s.scalar_type() == at::kLong && s.dim() == 1 ? s.contiguous()
                                                             : s.to(at::kLong).reshape({-1}).contiguous();
    num_seeds[t] = seeds[t].numel();
  }
  // The plan's key: the caller's graph tensors by identity (a plan holds only the copies
  // conversion made of them).
  PlanKey key{device.index(), num_nodes.vec(), src_type.vec(), dst_type.vec(), num_neighbors.vec(), num_seeds,
              num_hops, replace, disjoint, temporal_strategy == "last",
              graph_input_ids(colptr_list, row_list, edge_bias, node_bias)};
  auto plan = PlanCache<HeteroPlan>::instance().get(std::move(key), [&](PlanKey k) {
    return std::make_shared<HeteroPlan>(std::move(k), in, colptr_list,
                                        conversion_copies(in, colptr_list, row_list, edge_bias, node_bias));
  });
  HeteroPlan::Started started = plan->start(seeds, in.seed_times, resolve_random_seed(random_seed));
  return {std::move(plan), std::move(started)};
}


HeteroOutput hetero_neighbor_sample_cuda(at::IntArrayRef num_nodes, at::IntArrayRef src_type, at::IntArrayRef dst_type,
                                         at::TensorList colptr_list, at::TensorList row_list,
                                         at::TensorList seed_list, at::IntArrayRef num_neighbors, int64_t num_hops,
                                         bool replace, bool disjoint, std::optional<int64_t> random_seed,
                                         const OptionalTensors& edge_bias, const OptionalTensors& node_bias,
                                         const OptionalTensors& seed_time_list, c10::string_view temporal_strategy) {
  auto [plan, started] = start_sample(num_nodes, src_type, dst_type, colptr_list, row_list, seed_list, num_neighbors,
                                      num_hops, replace, disjoint, random_seed, edge_bias, node_bias, seed_time_list,
                                      temporal_strategy);
  return plan->finish(started);
}

c10::intrusive_ptr<StartedHeteroSample> hetero_neighbor_sample_start_cuda(
    at::IntArrayRef num_nodes, at::IntArrayRef src_type, at::IntArrayRef dst_type, at::TensorList colptr_list,
    at::TensorList row_list, at::TensorList seed_list, at::IntArrayRef num_neighbors, int64_t num_hops, bool replace,
    bool disjoint, std::optional<int64_t> random_seed, const OptionalTensors& edge_bias,
    const OptionalTensors& node_bias, const OptionalTensors& seed_time_list, c10::string_view temporal_strategy) {
  auto [plan, started] = start_sample(num_nodes, src_type, dst_type, colptr_list, row_list, seed_list, num_neighbors,
                                      num_hops, replace, disjoint, random_seed, edge_bias, node_bias, seed_time_list,
                                      temporal_strategy);
  return c10::make_intrusive<StartedHeteroSample>(
      [plan = std::move(plan), started = std::make_shared<HeteroPlan::Started>(std::move(started))] {
        return plan->finish(*started);
      });
}

}  // namespace

int64_t clear_hetero_sampler_plans() { return PlanCache<HeteroPlan>::instance().clear(); }

TORCH_LIBRARY_IMPL(pyg_accel, CUDA, m) {
  m.impl("hetero_neighbor_sample", &hetero_neighbor_sample_cuda);
  m.impl("hetero_neighbor_sample_start", &hetero_neighbor_sample_start_cuda);
}

}  // namespace pyg_accel
