// CPU multi-hop neighbour sampling with PyG's semantics (see csrc/ops.cpp).
//
// Per hop: the number of neighbours of every frontier node is fixed first, then
// the draws run in parallel (Floyd's algorithm: O(fanout) work per node without
// replacement, whatever the degree), then one sequential pass deduplicates and
// relabels in first-seen order so the output is independent of the thread count.
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
#include "../time_order.h"
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

// Edge weights as the host's draws read them: finite and non-negative, or an error.
// (Checked where read rather than once per graph: the caller's tensor may change
// between calls, also through numpy, which no version counter sees.)
void check_weights(EdgeWeights weight, int64_t start, int64_t degree, const char* op) {
  for (int64_t e = start; e < start + degree; ++e) {
    const double w = weight[e];
    TORCH_CHECK_VALUE(w >= 0 && w < std::numeric_limits<double>::infinity(), op, ": edge_weight must be finite and ",
                      "non-negative, got ", std::to_string(w), " at edge ", std::to_string(e));
  }
}

// One node's draws (NodeDraw's, shared with the CUDA samplers) into out; returns their
// count. The host also checks the weights it reads, and in a column taken as sorted by
// time (a fact remembered about the caller's tensors, which numpy writes can change
// unseen) that every edge drawn is eligible; if one is not, the column is scanned
// instead: a tree never reaches a node or an edge later than its seed's time. `keys`:
// scratch, grown as needed.
int64_t draw_node(NodeDraw d, uint64_t key, int64_t* out, std::vector<double>& keys, const char* op) {
  if (d.weighted()) check_weights(d.weight, d.start, d.degree, op);
  int64_t k = d.count();
  if (static_cast<int64_t>(keys.size()) < k) keys.resize(k);
  d.draw(key, k, out, keys.data());
  if (d.temporal() && d.time_sorted) {
    for (int64_t j = 0; j < k; ++j) {
      if (!d.time(out[j])) {
        d.time_sorted = false;
        k = d.count();
        if (static_cast<int64_t>(keys.size()) < k) keys.resize(k);
        d.draw(key, k, out, keys.data());
        break;
      }
    }
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

using SampleOutput = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

SampleOutput neighbor_sample_cpu(const at::Tensor& colptr_t, const at::Tensor& row_t, const at::Tensor& seed_t,
                                 at::IntArrayRef num_neighbors, bool replace, bool disjoint,
                                 std::optional<int64_t> random_seed_arg,
                                 const std::optional<at::Tensor>& edge_weight,
                                 const std::optional<at::Tensor>& node_time_t,
                                 const std::optional<at::Tensor>& edge_time_t,
                                 const std::optional<at::Tensor>& seed_time_t, c10::string_view temporal_strategy) {
  const bool temporal = check_neighbor_sample_inputs(colptr_t, row_t, seed_t, edge_weight, node_time_t, edge_time_t,
                                                     seed_time_t, disjoint, temporal_strategy, std::nullopt);
  const int64_t random_seed = resolve_random_seed(random_seed_arg);
  const at::Tensor colptr_c = colptr_t.contiguous(), row_c = row_t.contiguous(), seed_c = seed_t.contiguous();
  const int64_t* colptr = colptr_c.data_ptr<int64_t>();
  const int64_t* row = row_c.data_ptr<int64_t>();
  const int64_t* seeds = seed_c.data_ptr<int64_t>();
  const int64_t num_dst = colptr_c.numel() - 1;
  const int64_t num_edges = row_c.numel();
  const int64_t num_seeds = seed_c.numel();
  at::Tensor weight_c;
  if (edge_weight.has_value()) {
    weight_c = edge_weight->to(sampler_weight_dtype(edge_weight->scalar_type())).contiguous();  // (float32: no copy)
  }
  const EdgeWeights weight = edge_weights_of(weight_c);
  auto as_long = [](const std::optional<at::Tensor>& t) {
    return t.has_value() ? t->to(at::kLong).contiguous() : at::Tensor();
  };
  const at::Tensor node_time_c = as_long(node_time_t), edge_time_c = as_long(edge_time_t),
                   seed_time_c = as_long(seed_time_t);
  const int64_t* node_time = node_time_c.defined() ? node_time_c.data_ptr<int64_t>() : nullptr;
  const int64_t* edge_time = edge_time_c.defined() ? edge_time_c.data_ptr<int64_t>() : nullptr;
  const auto given = [](const std::optional<at::Tensor>& t) { return t.has_value() ? *t : at::Tensor(); };
  const bool time_sorted = temporal && remembered_columns_sorted_by_time(
                                           {colptr_t, row_t, given(node_time_t), given(edge_time_t)}, colptr_c, row_c,
                                           node_time_c, edge_time_c);
  const int64_t* seed_time = seed_time_c.defined() ? seed_time_c.data_ptr<int64_t>() : nullptr;
  const bool last = temporal_strategy == "last";

  std::vector<int64_t> node, batch, out_row, out_col, out_edge, nodes_per_hop, edges_per_hop;
  FlatMap local_of(num_seeds);  // (batch, global id) or global id -> local id
  const int64_t key_stride = std::max<int64_t>(num_dst, 1);
  auto map_key = [&](int64_t b, int64_t v) { return disjoint ? b * key_stride + v : v; };

  // The seeds as given, repeats included (as PyG lists them: a loader's first
  // batch_size outputs are the seeds'); each is expanded, and a later hop reaching a
  // repeated seed's node links to its first occurrence.
  std::vector<int64_t> frontier;  // local ids of the nodes to expand next
  for (int64_t i = 0; i < num_seeds; ++i) {
    const int64_t v = seeds[i];
    TORCH_CHECK(v >= 0 && v < num_dst, "neighbor_sample: seed ", std::to_string(v), " is out of range for ",
                std::to_string(num_dst), " nodes");
    local_of.emplace(map_key(i, v), i);
    frontier.push_back(i);
    node.push_back(v);
    batch.push_back(i);
  }
  nodes_per_hop.push_back(static_cast<int64_t>(node.size()));

  for (size_t hop = 0; hop < num_neighbors.size(); ++hop) {
    const int64_t fanout = num_neighbors[hop];
    const int64_t m = static_cast<int64_t>(frontier.size());
    // Room for each node's draws (exact for uniform sampling; an upper bound when
    // zero weights make a weighted node draw fewer).
    std::vector<int64_t> offset(m + 1, 0), count(m, 0);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t v = node[frontier[i]];
      offset[i + 1] = offset[i] + num_to_draw(fanout, checked_degree(colptr, v, num_edges, "neighbor_sample"),
                                              replace);
      check_hop_size(offset[i + 1], hop, "neighbor_sample");
    }
    // CSC positions drawn, their sources, and (disjoint: a node's key is tree and id)
    // those sources' dedup keys; otherwise a node's key is its id, nbr itself
    std::vector<int64_t> drawn(offset[m]), nbr(offset[m]), tree_key(disjoint ? offset[m] : 0);
    const std::vector<int64_t>& key = disjoint ? tree_key : nbr;
    const uint64_t key_of_hop = hop_key(random_seed, static_cast<int64_t>(hop));
    at::parallel_for(0, m, 256, [&](int64_t begin, int64_t end) {
      std::vector<double> keys;
      for (int64_t i = begin; i < end; ++i) {
        const int64_t v = node[frontier[i]];
        NodeDraw d;
        d.start = colptr[v], d.degree = colptr[v + 1] - d.start, d.fanout = fanout, d.replace = replace;
        d.weight = weight, d.last = last, d.time_sorted = time_sorted;
        if (temporal) d.time = {seed_time[batch[frontier[i]]], row, node_time, edge_time, num_dst};
        count[i] = draw_node(d, slot_key(key_of_hop, i), drawn.data() + offset[i], keys, "neighbor_sample");
        // the neighbours' ids and keys too: these random reads run in parallel, not in the pass below
        for (int64_t p = offset[i]; p < offset[i] + count[i]; ++p) {
          nbr[p] = row[drawn[p]];
          if (disjoint) tree_key[p] = map_key(batch[frontier[i]], nbr[p]);
        }
      }
    });
    // One sequential pass numbers new nodes in first-seen order (thread-count independent).
    int64_t hop_edges = 0;
    std::vector<int64_t> next;
    local_of.reserve_more(offset[m]);
    for (std::vector<int64_t>* out : {&out_row, &out_col, &out_edge}) out->reserve(out->size() + offset[m]);
    for (int64_t i = 0; i < m; ++i) {
      const int64_t dst_local = frontier[i];
      const int64_t b = batch[dst_local];
      hop_edges += count[i];
      for (int64_t p = offset[i]; p < offset[i] + count[i]; ++p) {
        // (positions weighted or temporal draws left unused hold key 0: a harmless prefetch)
        if (p + kPrefetch < offset[m]) local_of.prefetch(key[p + kPrefetch]);
        const int64_t u = nbr[p];
        TORCH_CHECK_INDEX(u >= 0 && u < num_dst, "neighbor_sample: row holds node ", std::to_string(u),
                          ", outside the ", std::to_string(num_dst), " nodes of colptr (homogeneous graphs only)");
        const auto [local, inserted] = local_of.emplace(key[p], static_cast<int64_t>(node.size()));
        if (inserted) {
          next.push_back(local);
          node.push_back(u);
          batch.push_back(b);
        }
        out_row.push_back(local);
        out_col.push_back(dst_local);
        out_edge.push_back(drawn[p]);
      }
    }
    nodes_per_hop.push_back(static_cast<int64_t>(next.size()));
    edges_per_hop.push_back(hop_edges);
    frontier.swap(next);
  }

  auto to_tensor = [](const std::vector<int64_t>& v) {
    return at::tensor(at::ArrayRef<int64_t>(v), at::TensorOptions().dtype(at::kLong));
  };
  return {to_tensor(node), to_tensor(out_row), to_tensor(out_col), to_tensor(out_edge),
          disjoint ? to_tensor(batch) : at::empty({0}, at::kLong), to_tensor(nodes_per_hop), to_tensor(edges_per_hop)};
}

using HeteroOutput = std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, at::Tensor, at::Tensor, at::Tensor,
                                at::Tensor, at::Tensor>;

// The per-edge-type vectors, one after another, in one tensor.
at::Tensor concatenated(const std::vector<std::vector<int64_t>>& parts) {
  int64_t total = 0;
  for (const auto& part : parts) total += static_cast<int64_t>(part.size());
  at::Tensor out = at::empty({total}, at::TensorOptions().dtype(at::kLong));
  int64_t* at_ = out.data_ptr<int64_t>();
  for (const auto& part : parts) at_ = std::copy(part.begin(), part.end(), at_);
  return out;
}

template <typename T>
const T* data_or_null(const at::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

HeteroOutput hetero_neighbor_sample_cpu(at::IntArrayRef num_nodes, at::IntArrayRef src_type, at::IntArrayRef dst_type,
                                        at::TensorList colptr_list, at::TensorList row_list, at::TensorList seed_list,
                                        at::IntArrayRef num_neighbors, int64_t num_hops, bool replace, bool disjoint,
                                        std::optional<int64_t> random_seed_arg,
                                        const c10::List<std::optional<at::Tensor>>& edge_weight,
                                        const c10::List<std::optional<at::Tensor>>& node_time_list,
                                        const c10::List<std::optional<at::Tensor>>& edge_time_list,
                                        const c10::List<std::optional<at::Tensor>>& seed_time_list,
                                        c10::string_view temporal_strategy) {
  const int64_t T = static_cast<int64_t>(num_nodes.size()), R = static_cast<int64_t>(src_type.size());
  const HeteroInputs in = read_hetero_inputs(num_nodes, src_type, dst_type, colptr_list, row_list, seed_list,
                                             num_neighbors, num_hops, disjoint, edge_weight, node_time_list,
                                             edge_time_list, seed_time_list, temporal_strategy, std::nullopt);
  const auto &colptrs = in.colptrs, &rows = in.rows, &weights = in.weights, &edge_times = in.edge_times;
  const auto &node_times = in.node_times, &seed_times = in.seed_times;
  const bool temporal = in.temporal;
  const int64_t random_seed = resolve_random_seed(random_seed_arg);
  const bool last = temporal_strategy == "last";
  std::vector<std::vector<int64_t>> node(T), batch(T), out_row(R), out_col(R), out_edge(R), frontier(T);
  std::vector<FlatMap> local_of(T);
  std::vector<int64_t> nodes_per_hop(T * (num_hops + 1), 0), edges_per_hop(R * std::max<int64_t>(num_hops, 1), 0);
  std::vector<int64_t> tree_time;  // temporal: the time of each tree's seed
  int64_t tree = 0;  // seed index across all types (disjoint trees)
  for (int64_t t = 0; t < T; ++t) {
    const at::Tensor seeds = seed_list[t].to(at::kLong).contiguous();
    const int64_t* s = seeds.data_ptr<int64_t>();
    const int64_t stride = std::max<int64_t>(num_nodes[t], 1);
    for (int64_t i = 0; i < seeds.numel(); ++i, ++tree) {
      TORCH_CHECK(s[i] >= 0 && s[i] < num_nodes[t], "hetero_neighbor_sample: seed ", std::to_string(s[i]),
                  " is out of range for node type ", std::to_string(t));
      if (temporal) tree_time.push_back(seed_times[t].data_ptr<int64_t>()[i]);
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
      const int64_t* colptr = colptrs[r].data_ptr<int64_t>();
      const int64_t* row = rows[r].data_ptr<int64_t>();
      const EdgeWeights weight = edge_weights_of(weights[r]);
      const int64_t* node_time = data_or_null<int64_t>(node_times[s_t]);
      const int64_t* edge_time = data_or_null<int64_t>(edge_times[r]);
      const std::vector<int64_t>& from = frontier[d_t];
      const int64_t m = static_cast<int64_t>(from.size());
      // Room for each node's draws (exact for uniform draws; an upper bound for weighted
      // and temporal ones, which may draw fewer).
      std::vector<int64_t> offset(m + 1, 0), count(m, 0);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t v = node[d_t][from[i]];
        offset[i + 1] = offset[i] + num_to_draw(
                                        fanout, checked_degree(colptr, v, rows[r].numel(), "hetero_neighbor_sample"),
                                        replace);
        check_hop_size(offset[i + 1], hop, "hetero_neighbor_sample");
      }
      // CSC positions drawn, their sources, and (disjoint) their dedup keys; else nbr is the key
      std::vector<int64_t> drawn(offset[m]), nbr(offset[m]), tree_key(disjoint ? offset[m] : 0);
      const std::vector<int64_t>& key = disjoint ? tree_key : nbr;
      const int64_t stride = std::max<int64_t>(num_nodes[s_t], 1);
      const uint64_t type_key = mix64(key_of_hop ^ mix64(static_cast<uint64_t>(r) + 0x51ED270B27E1D3A9ull));
      at::parallel_for(0, m, 256, [&](int64_t begin, int64_t end) {
        std::vector<double> keys;
        for (int64_t i = begin; i < end; ++i) {
          const int64_t v = node[d_t][from[i]];
          NodeDraw d;
          d.start = colptr[v], d.degree = colptr[v + 1] - d.start, d.fanout = fanout, d.replace = replace;
          d.weight = weight, d.last = last, d.time_sorted = in.time_sorted[r];
          if (temporal) d.time = {tree_time[batch[d_t][from[i]]], row, node_time, edge_time, num_nodes[s_t]};
          count[i] = draw_node(d, slot_key(type_key, i), drawn.data() + offset[i], keys, "hetero_neighbor_sample");
          for (int64_t p = offset[i]; p < offset[i] + count[i]; ++p) {  // (random reads, in parallel)
            nbr[p] = row[drawn[p]];
            if (disjoint) tree_key[p] = batch[d_t][from[i]] * stride + nbr[p];
          }
        }
      });
      local_of[s_t].reserve_more(offset[m]);
      for (int64_t i = 0; i < m; ++i) {
        const int64_t dst_local = from[i];
        const int64_t b = batch[d_t][dst_local];
        for (int64_t p = offset[i]; p < offset[i] + count[i]; ++p) {
          if (p + kPrefetch < offset[m]) local_of[s_t].prefetch(key[p + kPrefetch]);
          const int64_t u = nbr[p];
          TORCH_CHECK_INDEX(u >= 0 && u < num_nodes[s_t], "hetero_neighbor_sample: row of edge type ",
                            std::to_string(r), " holds node ", std::to_string(u), ", out of range");
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

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CPU, m) {
  m.impl("neighbor_sample", &neighbor_sample_cpu);
  m.impl("hetero_neighbor_sample", &hetero_neighbor_sample_cpu);
}

}  // namespace pyg_accel
