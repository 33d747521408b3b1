// CPU multi-hop neighbour sampling with PyG's semantics (see csrc/ops.cpp), one
// implementation for both ops: a homogeneous graph is the one-type case.
//
// Per hop and edge type: the number of neighbours of every frontier node is fixed
// first, then the draws run in parallel (NodeDraw, node_draw.h, which the CUDA samplers
// share), then one sequential pass deduplicates and relabels in first-seen order so
// the output is independent of the thread count.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <numeric>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "../edge_weights.h"
#include "../sampler_inputs.h"
#include "../sampling_rng.h"
#include "../sampling_seed.h"
#include "../started_sample.h"
#include "../node_draw.h"
#include "flat_map.h"

namespace pyg_accel {
namespace {

// How many edges ahead the numbering pass prefetches its dedup-table slot.
constexpr int64_t kPrefetch = 16;

// Node v's edge range [colptr[v], colptr[v + 1]), checked against the row's edges: the
// graph's tensors are the caller's and may have changed since any earlier check (also
// through numpy, which no version counter sees), so each node's range is checked where
// it is read, which costs nothing next to its draws.
inline int64_t checked_degree(const int64_t* colptr, int64_t v, int64_t num_edges, const char* op) {
  const int64_t start = colptr[v], end = colptr[v + 1];
  TORCH_CHECK_INDEX(start >= 0 && start <= end && end <= num_edges, op, ": colptr[", std::to_string(v), ":",
                    std::to_string(v + 2), "] = [", std::to_string(start), ", ", std::to_string(end),
                    "] is not a valid edge range for ", std::to_string(num_edges),
                    " edges (colptr must start at 0, never decrease and end at len(row))");
  return end - start;
}

// One node's draws (NodeDraw's, shared with the CUDA samplers) into out; returns their
// count. The host also checks the values it reads (NodeDraw::check_values), and in a
// column taken as sorted by time (a fact remembered about the caller's tensors, which
// numpy writes can change unseen) that every edge drawn is eligible; if one is not, the
// column is scanned instead: a tree never reaches a node or an edge later than its
// seed's time. `keys`: scratch, grown as needed.
int64_t draw_node(NodeDraw d, uint64_t key, int64_t* out, std::vector<double>& keys, const char* op) {
  d.check_values(op);
  const auto draw = [&] {
    const int64_t k = d.count();
    if (static_cast<int64_t>(keys.size()) < k) keys.resize(k);
    d.draw(key, k, out, keys.data());
    return k;
  };
  int64_t k = draw();
  if (d.temporal() && d.time_sorted && !std::all_of(out, out + k, d.time)) {
    d.time_sorted = false;
    k = draw();
  }
  return k;
}

// The most draws one hop's buffers are made for (4 x 8 bytes each): a fanout drawn
// with replacement over a large frontier asks for more before anything is drawn.
constexpr int64_t kMaxHopDraws = int64_t{1} << 34;

inline void check_hop_size(int64_t draws, int64_t hop, const char* op) {
  TORCH_CHECK_VALUE(draws <= kMaxHopDraws, op, ": hop ", std::to_string(hop), " would draw more than ",
                    std::to_string(kMaxHopDraws), " neighbours (fanout x frontier); use smaller fanouts or batches");
}

// The per-edge-type vectors, one after another, in one tensor.
at::Tensor concatenated(const std::vector<std::vector<int64_t>>& parts) {
  int64_t total = 0;
  for (const auto& part : parts) total += static_cast<int64_t>(part.size());
  at::Tensor out = at::empty({total}, at::TensorOptions().dtype(at::kLong));
  int64_t* at_ = out.data_ptr<int64_t>();
  for (const auto& part : parts) at_ = std::copy(part.begin(), part.end(), at_);
  return out;
}

// The CPU sampler, for a graph of T node types and R edge types with its inputs read by
// read_hetero_inputs; a homogeneous graph is the one-type case (`homogeneous`: checked
// by check_neighbor_sample_inputs and read by one_type_graph, with neighbor_sample's
// random keys, which the CUDA sampler shares, and its messages). Returns
// hetero_neighbor_sample's outputs.
HeteroOutput sample_cpu(const HeteroInputs& in, at::IntArrayRef num_nodes, at::IntArrayRef src_type,
                        at::IntArrayRef dst_type, at::TensorList seed_list, at::IntArrayRef num_neighbors,
                        int64_t num_hops, bool replace, bool disjoint, int64_t random_seed, bool last,
                        bool homogeneous) {
  const char* op = homogeneous ? "neighbor_sample" : "hetero_neighbor_sample";
  const int64_t T = static_cast<int64_t>(num_nodes.size()), R = static_cast<int64_t>(src_type.size());
  std::vector<std::vector<int64_t>> node(T), batch(T), out_row(R), out_col(R), out_edge(R), frontier(T);
  std::vector<FlatMap> local_of(T);
  std::vector<int64_t> nodes_per_hop(T * (num_hops + 1), 0), edges_per_hop(R * std::max<int64_t>(num_hops, 1), 0);
  std::vector<int64_t> tree_time;  // temporal: the time of each tree's seed
  const std::vector<BiasView> biases = bias_views(in, src_type, num_nodes);
  // The seeds as given, repeats included (as PyG lists them: a loader's first
  // batch_size outputs are the seeds'); each is expanded, and a later hop reaching a
  // repeated seed's node links to its first occurrence. Trees are numbered across types.
  int64_t tree = 0;
  for (int64_t t = 0; t < T; ++t) {
    const at::Tensor seeds = seed_list[t].to(at::kLong).contiguous();
    const int64_t* s = seeds.data_ptr<int64_t>();
    const int64_t stride = std::max<int64_t>(num_nodes[t], 1);
    local_of[t].reserve_more(seeds.numel());
    for (int64_t i = 0; i < seeds.numel(); ++i, ++tree) {
      TORCH_CHECK(s[i] >= 0 && s[i] < num_nodes[t], op, ": seed ", std::to_string(s[i]), " is out of range for ",
                  homogeneous ? std::to_string(num_nodes[t]) + " nodes" : "node type " + std::to_string(t));
      if (in.temporal) tree_time.push_back(in.seed_times[t].data_ptr<int64_t>()[i]);
      const int64_t key = disjoint ? tree * stride + s[i] : s[i];
      local_of[t].emplace(key, static_cast<int64_t>(node[t].size()));  // (a repeat links to the first)
      frontier[t].push_back(static_cast<int64_t>(node[t].size()));
      node[t].push_back(s[i]);
      batch[t].push_back(tree);
    }
    nodes_per_hop[t * (num_hops + 1)] = static_cast<int64_t>(node[t].size());
  }
  for (int64_t hop = 0; hop < num_hops; ++hop) {
    std::vector<std::vector<int64_t>> next(T);
    const uint64_t key_of_hop = hop_key(random_seed, hop);
    for (int64_t r = 0; r < R; ++r) {
      const int64_t s_t = src_type[r], d_t = dst_type[r], fanout = num_neighbors[r * num_hops + hop];
      const int64_t* colptr = in.colptrs[r].data_ptr<int64_t>();
      const int64_t* row = in.rows[r].data_ptr<int64_t>();
      const int64_t num_edges = in.rows[r].numel();
      const std::vector<int64_t>& from = frontier[d_t];
      const int64_t m = static_cast<int64_t>(from.size());
      // Room for each node's draws (exact for uniform draws; an upper bound for weighted
      // and temporal ones, which may draw fewer).
      std::vector<int64_t> offset(m + 1, 0), count(m, 0);
      for (int64_t i = 0; i < m; ++i) {
        offset[i + 1] = offset[i] + num_to_draw(fanout, checked_degree(colptr, node[d_t][from[i]], num_edges, op),
                                                replace);
        check_hop_size(offset[i + 1], hop, op);
      }
      // CSC positions drawn, their sources, and (disjoint: a node's key is tree and id)
      // their dedup keys; otherwise a node's key is its id, nbr itself
      std::vector<int64_t> drawn(offset[m]), nbr(offset[m]), tree_key(disjoint ? offset[m] : 0);
      const std::vector<int64_t>& key = disjoint ? tree_key : nbr;
      const int64_t stride = std::max<int64_t>(num_nodes[s_t], 1);
      const uint64_t rel_key = type_key(key_of_hop, r, homogeneous);
      at::parallel_for(0, m, 256, [&](int64_t begin, int64_t end) {
        std::vector<double> keys;
        for (int64_t i = begin; i < end; ++i) {
          const int64_t v = node[d_t][from[i]], limit = in.temporal ? tree_time[batch[d_t][from[i]]] : 0;
          const NodeDraw d = node_draw_of(biases[r], row, colptr[v], colptr[v + 1] - colptr[v], fanout, replace, last,
                                          limit);
          count[i] = draw_node(d, slot_key(rel_key, i), drawn.data() + offset[i], keys, op);
          // the neighbours' ids and keys too: these random reads run in parallel, not in the pass below
          for (int64_t p = offset[i]; p < offset[i] + count[i]; ++p) {
            nbr[p] = row[drawn[p]];
            if (disjoint) tree_key[p] = batch[d_t][from[i]] * stride + nbr[p];
          }
        }
      });
      // One sequential pass numbers new nodes in first-seen order (thread-count independent).
      local_of[s_t].reserve_more(offset[m]);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t dst_local = from[i];
        const int64_t b = batch[d_t][dst_local];
        for (int64_t p = offset[i]; p < offset[i] + count[i]; ++p) {
          // (positions weighted or temporal draws left unused hold key 0: a harmless prefetch)
          if (p + kPrefetch < offset[m]) local_of[s_t].prefetch(key[p + kPrefetch]);
          const int64_t u = nbr[p];
          TORCH_CHECK_INDEX(u >= 0 && u < num_nodes[s_t], op, ": row ",
                            homogeneous ? "" : "of edge type " + std::to_string(r) + " ", "holds node ",
                            std::to_string(u), homogeneous ? ", outside the " + std::to_string(num_nodes[s_t]) +
                                                                 " nodes of colptr (homogeneous graphs only)"
                                                           : ", out of range");
          const auto [local, inserted] = local_of[s_t].emplace(key[p], static_cast<int64_t>(node[s_t].size()));
          if (inserted) {
            next[s_t].push_back(local);
            node[s_t].push_back(u);
            batch[s_t].push_back(b);
          }
          out_row[r].push_back(local);
          out_col[r].push_back(dst_local);
          out_edge[r].push_back(drawn[p]);
        }
      }
      edges_per_hop[r * num_hops + hop] = std::accumulate(count.begin(), count.end(), int64_t{0});
    }
    for (int64_t t = 0; t < T; ++t) nodes_per_hop[t * (num_hops + 1) + hop + 1] = static_cast<int64_t>(next[t].size());
    frontier.swap(next);
  }
  auto to_tensor = [](const std::vector<int64_t>& v) {
    return at::tensor(at::ArrayRef<int64_t>(v), at::TensorOptions().dtype(at::kLong));
  };
  std::vector<at::Tensor> node_t, batch_t;
  for (int64_t t = 0; t < T; ++t) {
    node_t.push_back(to_tensor(node[t]));
    if (disjoint) batch_t.push_back(to_tensor(batch[t]));
  }
  return {node_t, batch_t, concatenated(out_row), concatenated(out_col), concatenated(out_edge),
          to_tensor(nodes_per_hop).view({T, num_hops + 1}),
          to_tensor(edges_per_hop).slice(0, 0, R * num_hops).view({R, num_hops})};
}

SampleOutput neighbor_sample_cpu(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed,
                                 at::IntArrayRef num_neighbors, bool replace, bool disjoint,
                                 std::optional<int64_t> random_seed, const OptionalTensors& edge_bias,
                                 const OptionalTensors& node_bias, const std::optional<at::Tensor>& seed_time,
                                 c10::string_view temporal_strategy) {
  const Bias bias = check_neighbor_sample_inputs(colptr, row, seed, edge_bias, node_bias, seed_time, disjoint,
                                                 temporal_strategy, std::nullopt);
  HeteroInputs in = one_type_graph(colptr, row, edge_bias, node_bias, bias == Bias::kTemporal);
  in.seed_times = {seed_time.has_value() ? seed_time->to(at::kLong).contiguous() : at::Tensor()};
  const std::vector<int64_t> num_nodes{colptr.numel() - 1}, one_type{0};
  const std::vector<at::Tensor> seeds{seed};
  auto [node, batch, out_row, out_col, out_edge, nodes_per_hop, edges_per_hop] =
      sample_cpu(in, num_nodes, one_type, one_type, seeds, num_neighbors, static_cast<int64_t>(num_neighbors.size()),
                 replace, disjoint, resolve_random_seed(random_seed), temporal_strategy == "last", true);
  return {node[0], out_row, out_col, out_edge, disjoint ? batch[0] : at::empty({0}, at::kLong),
          nodes_per_hop.view({-1}), edges_per_hop.view({-1})};
}

HeteroOutput hetero_neighbor_sample_cpu(at::IntArrayRef num_nodes, at::IntArrayRef src_type, at::IntArrayRef dst_type,
                                        at::TensorList colptr_list, at::TensorList row_list, at::TensorList seed_list,
                                        at::IntArrayRef num_neighbors, int64_t num_hops, bool replace, bool disjoint,
                                        std::optional<int64_t> random_seed, const OptionalTensors& edge_bias,
                                        const OptionalTensors& node_bias, const OptionalTensors& seed_time,
                                        c10::string_view temporal_strategy) {
  const HeteroInputs in = read_hetero_inputs(num_nodes, src_type, dst_type, colptr_list, row_list, seed_list,
                                             num_neighbors, num_hops, disjoint, edge_bias, node_bias, seed_time,
                                             temporal_strategy, std::nullopt);
  return sample_cpu(in, num_nodes, src_type, dst_type, seed_list, num_neighbors, num_hops, replace, disjoint,
                    resolve_random_seed(random_seed), temporal_strategy == "last", false);
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CPU, m) {
  m.impl("neighbor_sample", &neighbor_sample_cpu);
  m.impl("hetero_neighbor_sample", &hetero_neighbor_sample_cpu);
  m.impl("neighbor_sample_start", &StartNow<&neighbor_sample_cpu>::call);
  m.impl("hetero_neighbor_sample_start", &StartNow<&hetero_neighbor_sample_cpu>::call);
}

}  // namespace pyg_accel
