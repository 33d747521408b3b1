// CUDA multi-hop neighbour sampling with PyG's semantics (schema: csrc/ops.cpp).
//
// A sample is a fixed sequence of kernels with no host synchronisation: every buffer
// is sized by host-side upper bounds (batch x product of fanouts) and the kernels
// read the actual sizes from device counters. The sequence lives in a SamplePlan,
// one per (graph, batch size, fanouts, options), which owns its buffers, so from the
// second call of a plan on the sequence is replayed as one CUDA graph: per batch the
// host sets the call's parameters (output and seed addresses) as the argument of the
// graph's first kernel, launches the graph (whose last kernel writes the per-hop
// counts to pinned memory) and waits for it; the kernels write straight into the
// call's output tensors.
//
// Levels are numbered in first-seen order: level 0 = the seeds, level h + 1 = the
// nodes hop h discovered (a contiguous range of local ids, the next frontier).
// Numbering a level is one kernel (number_kernel): an edge is new if it is the first
// to reach a node without a local id; new nodes get consecutive local ids in
// first-seen order (CPU order), and the inclusive sums of their draw counts (each
// node's edge range at the next hop), both summed across blocks by decoupled
// look-back. Per hop:
//   draw    one thread (or lane group) per frontier node: the CSC positions it draws
//           (Floyd without replacement, uniform with, weighted or temporal draws;
//           NodeDraw, node_draw.h, shared with the CPU); weighted and temporal nodes with many neighbours are
//           queued and drawn by the next kernel (hub_draw_kernel: a warp each, or a
//           block for weighted ones of more than kBlockDegree, taken by whichever is
//           free), and temporal columns in time order are binary-searched;
//   expand  one thread per sampled edge (degree-balanced: a hub's edges spread over
//           as many threads as it has draws): neighbour, tree, and a dedup-table
//           insert that remembers the first edge reaching each node (sample_table.cuh);
//           (Uniform draws with fanouts up to 32, the common case, are expanded by the
//           kernel that draws them: one launch per hop less, no drawn/seg round trip.)
//   number  the next level, as above;
//   rows    each edge's neighbour becomes its local id (written by the next hop's
//           draw kernel; the last hop's by the last kernel, which also publishes
//           the counts).
// Up to kSeedTile seeds, level 0 (insert and number the seeds) is one kernel of one
// block.
// Draws use the CPU kernel's counter-based RNG and algorithms, and relabelling keeps
// first-seen order, so a seed gives the same sample on both devices.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/EmptyTensor.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdlib>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "../sampler_inputs.h"
#include "../sampling_seed.h"
#include "../started_sample.h"
#include "sample_kernels.cuh"
#include "sample_table.cuh"
#include "sample_plan.h"
#include "../time_order.h"
#include "../../common/tensor_id.h"

namespace pyg_accel {
namespace {

// Wall-clock microseconds this thread waited for the GPU in its last sample, of either
// sampler (SampleWait notes it).
thread_local double last_wait_us = 0.0;

// Everything one sampling configuration needs on the GPU: validated graph tensors,
// buffers sized by upper bounds, the hash table, and (after its second use) the
// captured CUDA graph of the kernel sequence.
class SamplePlan {
 public:
  SamplePlan(PlanKey key, Bias bias, const at::Tensor& colptr, const at::Tensor& row,
             const OptionalTensors& edge_bias, const OptionalTensors& node_bias)
      : key_(std::move(key)), bias_kind_(bias), hops_(key_.num_hops) {
    // The graph's own tensors are not held: the plan is only used while its key says
    // the caller passed these very tensors, unmodified (converted copies are held).
    colptr_ptr_ = colptr.data_ptr<int64_t>();
    row_ptr_ = row.data_ptr<int64_t>();
    num_nodes_ = colptr.numel() - 1;
    const int64_t num_edges = num_edges_ = row.numel();
    const auto opts = colptr.options().dtype(at::kLong);
    // One-time validation and conversion of the graph (each a sync, once per plan).
    if (num_edges > 0) {
      const auto [lo, hi] = at::aminmax(row);
      const int64_t lo_v = lo.item<int64_t>(), hi_v = hi.item<int64_t>();
      TORCH_CHECK_INDEX(lo_v >= 0 && hi_v < num_nodes_, "neighbor_sample: row holds node ",
                        std::to_string(lo_v < 0 ? lo_v : hi_v), ", outside the ", std::to_string(num_nodes_),
                        " nodes of colptr (homogeneous graphs only)");
    }
    // The graph as the one-type inputs every sampler reads (sampler_inputs.h; time order:
    // a pass over the edges), the draws' view of them, and the copies conversion made
    // (the caller's own tensors are not held).
    const HeteroInputs in = one_type_graph(colptr, row, edge_bias, node_bias, bias_kind_ == Bias::kTemporal);
    check_bias_values(in, "neighbor_sample");
    bias_ = bias_views(in, std::vector<int64_t>{0}, std::vector<int64_t>{num_nodes_})[0];
    converted_ = conversion_copies(in, colptr, row, edge_bias, node_bias);
    // (a node draws at most the row's edges: the kernels read a range outside the row as
    // empty, so a corrupt colptr cannot raise the bound past them)
    const bool takes_all = std::any_of(key_.fanouts.begin(), key_.fanouts.end(), [](int64_t f) { return f < 0; });
    const int64_t max_degree = max_degree_ =
        takes_all ? std::clamp<int64_t>(max_in_degree(colptr, colptr), 0, num_edges) : 0;
    // Upper bounds per level (frontier) and hop (edges).
    const int64_t S = key_.num_seeds[0];
    std::vector<int64_t> frontier{S};
    int64_t node_bound = S;
    for (int64_t h = 0; h < hops_; ++h) {
      const int64_t f = key_.fanouts[h];
      const int64_t per_node = f >= 0 ? f : max_degree;
      int64_t e = sat_mul(frontier.back(), per_node);  // (saturating: the check below then refuses it)
      // Past the seeds, the frontier's nodes are distinct: without disjoint trees or
      // replacement an edge is drawn at most once per hop. The seeds may repeat, and each
      // copy draws on its own, so hop 0 keeps the product.
      if (h > 0 && !key_.disjoint && !(key_.replace && f >= 0)) e = std::min(e, num_edges);
      edge_bound_.push_back(e);
      frontier.push_back(key_.disjoint ? e : std::min(e, num_nodes_));
      node_bound = sat_add(node_bound, frontier.back());
    }
    if (!key_.disjoint) node_bound = std::min(node_bound, S + num_nodes_);  // (the seeds, repeats included)
    frontier_bound_ = frontier;
    const int64_t max_frontier = std::max<int64_t>(1, *std::max_element(frontier.begin(), frontier.end() - 1));
    int64_t max_edges = std::max<int64_t>(1, S);
    int64_t total_edges = 0;
    for (int64_t e : edge_bound_) {
      max_edges = std::max(max_edges, e);
      total_edges += e;
    }
    TORCH_CHECK(max_edges < std::numeric_limits<int>::max() && max_frontier < std::numeric_limits<int>::max(),
                "neighbor_sample: a hop of this batch could sample ", std::to_string(max_edges),
                " edges, more than one CUDA sample supports (2^31); use smaller batches or fanouts");
    node_len_ = std::max<int64_t>(node_bound, 1);
    edge_len_ = max_edges;
    frontier_len_ = max_frontier;
    const double largest_key = static_cast<double>(key_.disjoint ? S : 1) * static_cast<double>(num_nodes_);
    TORCH_CHECK(largest_key < static_cast<double>(kLowMask) && edge_len_ < static_cast<int64_t>(kLowMask),
                "neighbor_sample: ", std::to_string(S), " disjoint trees over ", std::to_string(num_nodes_),
                " nodes exceed the CUDA sampler's 2^44 node keys; use smaller batches");
    int64_t capacity = 1;
    while (capacity < 2 * node_len_) capacity <<= 1;

    table_slots_ = at::zeros({capacity, 2}, opts);  // epoch 0: every slot free
    table_ = {reinterpret_cast<TableSlot*>(table_slots_.data_ptr<int64_t>()), capacity - 1};
    edge_out_len_ = std::max<int64_t>(total_edges, 1);
    static_assert(sizeof(OneCall) % sizeof(int64_t) == 0, "CallParams are copied as int64 words");
    params_dev_ = at::empty({static_cast<int64_t>(sizeof(OneCall) / sizeof(int64_t))}, opts);
    draw_scan_ = at::empty({frontier_len_}, opts);
    // Per-edge scratch: drawn positions and their owners only for hops drawn apart from
    // their expansion, trees only in disjoint mode.
    bool separate_draws = !kFusedExpand;
    for (int64_t h = 0; h < hops_; ++h) separate_draws = separate_draws || !group_draws(key_.fanouts[h]);
    drawn_ = at::empty({separate_draws ? edge_len_ : 1}, opts);
    owner_ = at::empty({separate_draws ? edge_len_ : 1}, opts);
    nbr_ = at::empty({edge_len_}, opts);
    tree_ = at::empty({key_.disjoint ? edge_len_ : 1}, opts);
    slot_of_ = at::empty({2 * edge_len_}, opts);  // two levels' worth (enqueue's slots())
    if (bias_kind_ == Bias::kWeighted) drawn_key_ = at::empty({edge_len_}, opts.dtype(at::kDouble));
    hub_queue_ = at::empty({warp_draws() ? frontier_len_ : 1}, opts);
    tree_time_ = at::empty({std::max<int64_t>(S, 1)}, opts);
    const int64_t counter_words = Counters::size(1, 1, hops_);
    counters_ = at::zeros({counter_words}, opts);
    blocks_done_ = at::zeros({1}, opts.dtype(at::kInt));
    host_counts_ = at::empty({counter_words}, opts.device(at::kCPU).pinned_memory(true));
    // Look-back words of each level's numbering: ids and draws, a tile each.
    int64_t status_words = 0;
    for (int64_t level = 0; level <= hops_; ++level) {
      status_start_.push_back(status_words);
      status_words += 2 * number_tiles(level);
    }
    status_ = at::zeros({status_words}, opts);  // epoch 0: nothing published
  }

  ~SamplePlan() {  // errors ignored: this may run while the process exits
    if (trace_start_ != nullptr) cudaEventDestroy(trace_start_);
    if (trace_end_ != nullptr) cudaEventDestroy(trace_end_);
  }

  const PlanKey& key() const { return key_; }

  // A sample's state between its start and its finish.
  struct Started {
    at::Tensor node, batch, row, col, edge;  // at their upper bounds until finished
    at::Tensor seed, seed_time;  // (held until the kernels have read them)
    std::shared_ptr<SampleCounts> counts;
    std::array<std::chrono::steady_clock::time_point, 6> marks;  // the trace's: entry .. next outputs
  };

  // One sample, started: its kernels enqueued on the current stream (after the counts
  // of this plan's previous sample are read, if they were not) into fresh outputs at
  // their upper bounds. `entry`: when the op was entered (for the trace).
  Started start(const at::Tensor& seed, const std::optional<at::Tensor>& seed_time, int64_t random_seed,
                std::chrono::steady_clock::time_point entry) {
    const WaitMode wait = wait_mode();  // (a bad setting raises before anything is enqueued)
    std::lock_guard<std::mutex> lock(mutex_);
    wait_.read_unread();
    Started started;
    auto& marks = started.marks;
    marks[0] = entry;
    marks[1] = std::chrono::steady_clock::now();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    const int64_t epoch = epoch_.next([&] {
      table_slots_.zero_();
      status_.zero_();
    });
    // This call's outputs: the spare set allocated after the previous call was enqueued,
    // if it was allocated on this stream (the caching allocator ties a block to its
    // allocation stream), else a fresh one.
    const c10::Device device = seed.device();
    OutputSet outputs = spare_.allocated && spare_.stream == stream ? std::move(spare_)
                                                                    : allocate_outputs(device, stream);
    spare_ = OutputSet{};
    started.node = outputs.node, started.batch = outputs.batch, started.row = outputs.row;
    started.col = outputs.col, started.edge = outputs.edge;
    marks[2] = std::chrono::steady_clock::now();
    started.seed = seed;
    started.seed_time = seed_time.has_value() ? seed_time->to(at::kLong).contiguous() : at::Tensor();
    seed_args_.call = OneCall{{started.node.data_ptr<int64_t>()},
                              {key_.disjoint ? started.batch.data_ptr<int64_t>() : nullptr},
                              {seed.data_ptr<int64_t>()},
                              {started.seed_time.defined() ? started.seed_time.data_ptr<int64_t>() : nullptr},
                              started.row.data_ptr<int64_t>(),
                              started.col.data_ptr<int64_t>(),
                              started.edge.data_ptr<int64_t>(),
                              random_seed,
                              epoch};
    const auto enqueue_on = [this](cudaStream_t s) { enqueue(s); };
    void* args[] = {&seed_args_, &level0_args_};  // the call's parameters (seed_kernel takes the first only)
    replay_.prepare({reinterpret_cast<const void*>(&seed_kernel<OneType>),
                     reinterpret_cast<const void*>(&seed_number_kernel<false>),
                     reinterpret_cast<const void*>(&seed_number_kernel<true>)},
                    args, enqueue_on);
    marks[3] = std::chrono::steady_clock::now();
    if (trace_enabled()) record_trace_event(trace_start_, stream);
    replay_.launch(stream, enqueue_on);
    marks[4] = std::chrono::steady_clock::now();
    if (trace_enabled()) record_trace_event(trace_end_, stream);
    started.counts = wait_.record(stream, wait, host_counts_);
    spare_ = allocate_outputs(device, stream);  // the next call's, while the GPU samples
    marks[5] = std::chrono::steady_clock::now();
    return started;
  }

  // A started sample's outputs (waiting for its counts if they are unread), shrunk to
  // the entries used: views of the first N / E entries (PyG's loaders copy row/col/edge
  // into new tensors, so only the node (and batch) buffers outlive a batch; clone() them
  // to compact).
  SampleOutput finish(Started& started) {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool was_read = started.counts->read;
    const auto t1 = std::chrono::steady_clock::now();
    const double cpu1 = trace_enabled() ? thread_cpu_us() : 0.0;
    const SampleCounts& counts = wait_.counts(started.counts);
    const auto t2 = std::chrono::steady_clock::now();
    const double wait_cpu = trace_enabled() ? thread_cpu_us() - cpu1 : 0.0;
    const Counters c = Counters::at(const_cast<int64_t*>(counts.words.data()), 1, 1, hops_);
    raise_bad_input(
        c.bad, true, num_nodes_, num_edges_, [&](int64_t p) { return started.seed[p].item<int64_t>(); },
        [](int64_t) { return int64_t{0}; });
    int64_t num_out_nodes = 0, num_out_edges = 0;
    for (int64_t l = 0; l <= hops_; ++l) num_out_nodes += c.level_count[l];
    for (int64_t h = 0; h < hops_; ++h) num_out_edges += c.edge_count[h];
    // The fresh outputs, shrunk to their used prefixes.
    shrink_to(started.node, num_out_nodes);
    for (const at::Tensor* t : {&started.row, &started.col, &started.edge}) shrink_to(*t, num_out_edges);
    if (key_.disjoint) shrink_to(started.batch, num_out_nodes);
    at::Tensor nodes_per_hop = at::empty({hops_ + 1}, at::kLong), edges_per_hop = at::empty({hops_}, at::kLong);
    std::memcpy(nodes_per_hop.data_ptr<int64_t>(), c.level_count, (hops_ + 1) * sizeof(int64_t));
    std::memcpy(edges_per_hop.data_ptr<int64_t>(), c.edge_count, hops_ * sizeof(int64_t));
    if (trace_enabled()) {
      const auto t3 = std::chrono::steady_clock::now();
      const auto& m = started.marks;
      auto us = [](auto a, auto b) { return std::to_string(std::chrono::duration<double, std::micro>(b - a).count()); };
      float gpu_ms = 0.0f;  // from the stream reaching the launch to the sample's end
      C10_CUDA_CHECK(cudaEventElapsedTime(&gpu_ms, trace_start_, trace_end_));
      std::fprintf(stderr,
                   "pyg_accel sampler trace: lookup %s alloc %s params %s launch %s record+next outputs %s "
                   "until finish %s wait %s finish %s us (wait: cpu %.1f us, polls %d%s; GPU from launch to end "
                   "%.1f us)%s\n",
                   us(m[0], m[1]).c_str(), us(m[1], m[2]).c_str(), us(m[2], m[3]).c_str(), us(m[3], m[4]).c_str(),
                   us(m[4], m[5]).c_str(), us(m[5], t1).c_str(), us(t1, t2).c_str(), us(t2, t3).c_str(), wait_cpu,
                   counts.polls, was_read ? ", read before finish" : "", 1e3 * gpu_ms,
                   replay_.replays() ? " (graph)" : "");
    }
    return {started.node, started.row, started.col, started.edge, started.batch, nodes_per_hop, edges_per_hop};
  }

 private:
  // One call's output tensors (one storage each: outputs must not alias), allocated at
  // their upper bounds without a dispatch per tensor, on `stream`.
  struct OutputSet {
    at::Tensor node, batch, row, col, edge;
    cudaStream_t stream = nullptr;
    bool allocated = false;
  };
  OutputSet allocate_outputs(const c10::Device& device, cudaStream_t stream) const {
    auto fresh = [&](int64_t len) {
      return at::Tensor(at::detail::empty_cuda({len}, at::kLong, device, std::nullopt));
    };
    return {fresh(node_len_), fresh(key_.disjoint ? node_len_ : 0), fresh(edge_out_len_), fresh(edge_out_len_),
            fresh(edge_out_len_), stream, true};
  }

  // Whether a hop of fanout f draws in lane groups (uniform, 0 <= f <= 32), and so (with
  // kFusedExpand) expands its draws in the same kernel.
  bool group_draws(int64_t f) const { return bias_kind_ == Bias::kUniform && f >= 0 && f <= 32; }
  // Weighted and temporal draws look at every neighbour: their kernels let warps take hubs.
  bool filtered() const { return bias_kind_ != Bias::kUniform; }
  // Whether hubs are queued for warp draws (hub_draw_kernel): filtered draws, except
  // temporal ones in time-sorted columns (a binary search per node instead).
  bool warp_draws() const { return filtered() && !bias_.time_sorted; }
  static constexpr bool kFusedExpand = PYG_ACCEL_SAMPLER_FUSED_EXPAND;

  // Positions numbered at `level` (the seeds, or the edges of hop level - 1), at most.
  int64_t number_len(int64_t level) const {
    return std::max<int64_t>(level == 0 ? key_.num_seeds[0] : edge_bound_[level - 1], 1);
  }
  int64_t number_tiles(int64_t level) const { return (number_len(level) + kNumberTile - 1) / kNumberTile; }

  // The whole sample, a fixed kernel sequence (graph-capturable): the call's parameters
  // in, the hops, and the counts out to pinned memory (the call's one host read).
  void enqueue(cudaStream_t stream) {
    OneCall* call = reinterpret_cast<OneCall*>(params_dev_.data_ptr<int64_t>());
    const Counters c = Counters::at(counters_.data_ptr<int64_t>(), 1, 1, hops_);
    const int64_t S = key_.num_seeds[0], stride = std::max<int64_t>(num_nodes_, 1);
    // Each level's positions keep their table slots in one of two buffers, so a hop's
    // kernel can write its own while it writes the previous hop's rows from the other.
    auto slots = [&](int64_t level) { return slot_of_.data_ptr<int64_t>() + (level % 2) * edge_len_; };
    int64_t* nbr = nbr_.data_ptr<int64_t>();
    int64_t* tree = key_.disjoint ? tree_.data_ptr<int64_t>() : nullptr;
    int64_t* tree_time = bias_kind_ == Bias::kTemporal ? tree_time_.data_ptr<int64_t>() : nullptr;
    auto hop_args = [&](int64_t h) {
      const OneType g{colptr_ptr_, row_ptr_,    bias_, num_nodes_, num_edges_,
                      max_degree_, h < hops_ ? key_.fanouts[h] : 0};
      return OneHop{g, c, call, tree_time, h, hops_, key_.replace, key_.disjoint, key_.last,
                    draw_scan_.data_ptr<int64_t>(), drawn_.data_ptr<int64_t>(),
                    drawn_key_.defined() ? drawn_key_.data_ptr<double>() : nullptr, owner_.data_ptr<int64_t>(),
                    nullptr, hub_queue_.data_ptr<int64_t>(), hub_queue_.numel()};
    };
    // Numbers level `level`'s new nodes and sums their next-hop draws (one kernel).
    auto number_args = [&](const int64_t* count_ptr, int64_t static_count, int64_t level) {
      unsigned long long* status = reinterpret_cast<unsigned long long*>(status_.data_ptr<int64_t>()) +
                                   status_start_[level];
      return NumberArgs{slots(level), nbr, tree, count_ptr, static_count, level, key_.disjoint, table_, status,
                        status + number_tiles(level), level < hops_, hop_args(level),
                        draw_scan_.data_ptr<int64_t>()};
    };
    // (seed_args_.call is set by start())
    seed_args_.dev = call;
    seed_args_.g = hop_args(0).g;
    seed_args_.c = c;
    seed_args_.table = table_;
    seed_args_.slot = slots(0);
    seed_args_.node = nbr;
    seed_args_.tree = tree;
    seed_args_.tree_time = tree_time;
    seed_args_.num_seeds = S;
    seed_args_.disjoint = key_.disjoint;
    seed_args_.tree_stride = stride;
    level0_args_ = number_args(nullptr, S, 0);
    const auto number = filtered() ? number_kernel<true> : number_kernel<false>;
    if (S <= kSeedTile) {  // one block inserts and numbers the seeds
      (filtered() ? seed_number_kernel<true> : seed_number_kernel<false>)<<<1, kSeedBlock, 0, stream>>>(
          seed_args_, level0_args_);
    } else {
      seed_kernel<OneType><<<grid_for(S), kBlock, 0, stream>>>(seed_args_);
      launch_after(number, static_cast<unsigned>(number_tiles(0)), kBlock, stream, level0_args_);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    RowsArgs rows{slots(0), 0, 0, c, table_, call};
    for (int64_t h = 0; h < hops_; ++h) {
      const int64_t fl = std::max<int64_t>(frontier_bound_[h], 1), el = std::max<int64_t>(edge_bound_[h], 1);
      const OneHop a = hop_args(h);
      const ExpandArgs x{key_.disjoint, stride, el, table_, nbr, tree, slots(h + 1)};
      if (!launch_draw_expand(a, x, fl, rows, stream)) {  // (with the previous hop's rows)
        launch_after(expand_kernel, capped_grid(expand_kernel, el), kBlock, stream, a, x);
      }
      launch_after(number, static_cast<unsigned>(number_tiles(h + 1)), kBlock, stream,
                   number_args(c.edge_count + h, 0, h + 1));
      rows = RowsArgs{slots(h + 1), el, h, c, table_, call};
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    const PublishArgs publish{counters_.data_ptr<int64_t>(), host_counts_.data_ptr<int64_t>(), counters_.numel(),
                              reinterpret_cast<unsigned int*>(blocks_done_.data_ptr<int>())};
    if (rows.len > 0) {  // the last hop's rows, and the counters out
      launch_after(rows_publish_kernel, capped_grid(rows_publish_kernel, rows.len), kBlock, stream, rows, publish);
    } else {
      launch_after(publish_kernel, 1, 32, stream, publish);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }

  // The hop's draws (the grid also covers the previous hop's rows). Uniform draws with
  // fanouts up to 32 run a group of lanes per node and are expanded by the same kernel
  // (returns true); the rest draw a thread per node (the engine's draw_kernel; weighted
  // and temporal hubs: a warp per node, by hub_draw_kernel), for expand_kernel.
  // PYG_ACCEL_SAMPLER_FUSED_EXPAND=0 (compile time) keeps group draws and expand apart
  // (a variant for comparison).
  bool launch_draw_expand(const OneHop& a, const ExpandArgs& x, int64_t fl, const RowsArgs& rows,
                          cudaStream_t stream) {
    const int64_t f = a.g.fanout;
    if (!group_draws(f)) {
      const auto draw = filtered() ? draw_kernel<OneType, true, RowsArgs> : draw_kernel<OneType, false, RowsArgs>;
      launch_after(draw, capped_grid(draw, std::max(fl, rows.len)), kBlock, stream, a, fl, rows);
      if (warp_draws()) {
        constexpr auto hubs = hub_draw_kernel<QueuedTasks<OneType>>;
        launch_after(hubs, capped_grid(hubs, 32 * fl), kBlock, stream, QueuedTasks<OneType>{a});
      }
      return false;
    }
    const int width = static_cast<int>(std::max<int64_t>(f, 1));
    const int64_t threads = std::max(group_threads(fl, width), rows.len);
    constexpr auto kernel = draw_group_kernel<kFusedExpand>;
    launch_after(kernel, capped_grid(kernel, threads), kBlock, stream, a, x, fl, rows, width);
    return kFusedExpand;
  }

  // Records a timing event of the trace (created on first use).
  static void record_trace_event(cudaEvent_t& event, cudaStream_t stream) {
    if (event == nullptr) C10_CUDA_CHECK(cudaEventCreate(&event));
    C10_CUDA_CHECK(cudaEventRecord(event, stream));
  }

  PlanKey key_;
  Bias bias_kind_;  // the sample's (bias_of)
  int64_t hops_;
  int64_t num_nodes_ = 0, num_edges_ = 0;
  int64_t max_degree_ = 0;  // the bound on a degree that fanout -1 hops were sized by (0 if none)
  std::vector<int64_t> frontier_bound_, edge_bound_;
  int64_t node_len_ = 1, edge_len_ = 1, frontier_len_ = 1;
  const int64_t* colptr_ptr_ = nullptr;
  const int64_t* row_ptr_ = nullptr;
  BiasView bias_;                       // weights and times, as the draws read them
  std::vector<at::Tensor> converted_;  // the copies bias_ points into, where the inputs needed one
  at::Tensor table_slots_;  // [capacity, 2]: the TableSlot words
  Table table_{};
  SampleEpoch epoch_;
  int64_t edge_out_len_ = 1;
  at::Tensor params_dev_;  // the call's parameters, the device copy
  SeedArgs<OneType> seed_args_{};  // the first kernel's argument (its call field set per call)
  OutputSet spare_;        // the next call's outputs, allocated while this one samples
  NumberArgs level0_args_{};  // the fused first kernel's second argument
  at::Tensor draw_scan_;
  at::Tensor drawn_, drawn_key_, owner_, nbr_, tree_, slot_of_;
  at::Tensor tree_time_, counters_, host_counts_;
  at::Tensor hub_queue_;  // [frontier bound] (warp_draws(); else 1)
  at::Tensor blocks_done_;  // [1] int32: the last kernel's finished blocks
  at::Tensor status_;                  // look-back words (tile_scan.cuh) of every level's numbering
  std::vector<int64_t> status_start_;  // level -> its first word
  std::mutex mutex_;
  SampleReplay replay_;
  SampleWait wait_;
  cudaEvent_t trace_start_ = nullptr, trace_end_ = nullptr;  // PYG_ACCEL_SAMPLER_TRACE's GPU timing
};

// A neighbor_sample call's sample, started, and its plan (made on first use).
std::pair<std::shared_ptr<SamplePlan>, SamplePlan::Started> start_sample(
    const at::Tensor& colptr_t, const at::Tensor& row_t, const at::Tensor& seed_t, at::IntArrayRef num_neighbors,
    bool replace, bool disjoint, std::optional<int64_t> random_seed, const OptionalTensors& edge_bias,
    const OptionalTensors& node_bias, const std::optional<at::Tensor>& seed_time, c10::string_view temporal_strategy) {
  const auto entry = std::chrono::steady_clock::now();
  TORCH_CHECK(colptr_t.is_cuda(), "neighbor_sample: colptr, row and seed must be on one GPU");
  const Bias bias = check_neighbor_sample_inputs(colptr_t, row_t, seed_t, edge_bias, node_bias, seed_time, disjoint,
                                                 temporal_strategy, colptr_t.device());
  const c10::cuda::CUDAGuard guard(colptr_t.device());
  const at::Tensor colptr = colptr_t.contiguous(), row = row_t.contiguous(), seed = seed_t.contiguous();
  // (the bias is the inputs': given or None, which the ids tell apart)
  PlanKey key{colptr.get_device(), {colptr.numel() - 1}, {0}, {0}, num_neighbors.vec(), {seed.numel()},
              static_cast<int64_t>(num_neighbors.size()), replace, disjoint, temporal_strategy == "last",
              graph_input_ids(colptr, row, edge_bias, node_bias)};
  auto plan = PlanCache<SamplePlan>::instance().get(std::move(key), [&](PlanKey k) {
    return std::make_shared<SamplePlan>(std::move(k), bias, colptr, row, edge_bias, node_bias);
  });
  SamplePlan::Started started = plan->start(seed, seed_time, resolve_random_seed(random_seed), entry);
  return {std::move(plan), std::move(started)};
}

SampleOutput neighbor_sample_cuda(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed,
                                  at::IntArrayRef num_neighbors, bool replace, bool disjoint,
                                  std::optional<int64_t> random_seed, const OptionalTensors& edge_bias,
                                  const OptionalTensors& node_bias, const std::optional<at::Tensor>& seed_time,
                                  c10::string_view temporal_strategy) {
  auto [plan, started] = start_sample(colptr, row, seed, num_neighbors, replace, disjoint, random_seed, edge_bias,
                                      node_bias, seed_time, temporal_strategy);
  return plan->finish(started);
}

c10::intrusive_ptr<StartedNeighborSample> neighbor_sample_start_cuda(
    const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed, at::IntArrayRef num_neighbors,
    bool replace, bool disjoint, std::optional<int64_t> random_seed, const OptionalTensors& edge_bias,
    const OptionalTensors& node_bias, const std::optional<at::Tensor>& seed_time, c10::string_view temporal_strategy) {
  auto [plan, started] = start_sample(colptr, row, seed, num_neighbors, replace, disjoint, random_seed, edge_bias,
                                      node_bias, seed_time, temporal_strategy);
  return c10::make_intrusive<StartedNeighborSample>(
      [plan = std::move(plan), started = std::make_shared<SamplePlan::Started>(std::move(started))] {
        return plan->finish(*started);
      });
}

}  // namespace

DerivedMemo<int64_t>& sampler_degree_memo() {
  static DerivedMemo<int64_t>* memo = new DerivedMemo<int64_t>();  // (never destroyed: no work at exit)
  return *memo;
}

int64_t clear_sampler_plans() {
  sampler_degree_memo().clear();  // (a graph edited in place, unseen by its version counter, is read afresh)
  return PlanCache<SamplePlan>::instance().clear() + clear_hetero_sampler_plans();
}

void note_sample_wait_us(double us) { last_wait_us = us; }

double sampler_last_wait_us() { return last_wait_us; }

TORCH_LIBRARY_IMPL(pyg_accel, CUDA, m) {
  m.impl("neighbor_sample", &neighbor_sample_cuda);
  m.impl("neighbor_sample_start", &neighbor_sample_start_cuda);
}

TORCH_LIBRARY_IMPL(pyg_accel, CompositeExplicitAutograd, m) {
  m.impl("clear_sampler_plans", &clear_sampler_plans);
  m.impl("sampler_last_wait_us", &sampler_last_wait_us);
}

}  // namespace pyg_accel
