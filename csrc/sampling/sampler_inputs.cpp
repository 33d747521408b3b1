#include "sampler_inputs.h"

#include <c10/util/Exception.h>

#include <string>

#include "edge_weights.h"
#include "time_order.h"

namespace pyg_accel {
namespace {

// The dtype times are read in, whatever they are given in.
at::ScalarType as_long(at::ScalarType) { return at::kLong; }

// Entry i of an optional per-type tensor list as a contiguous tensor of dtype_of(its
// dtype), or an undefined tensor (no entry, or None); `expected` entries when the list
// is not empty.
at::Tensor type_tensor(const c10::List<std::optional<at::Tensor>>& list, int64_t i, int64_t expected,
                       at::ScalarType (*dtype_of)(at::ScalarType), const char* name,
                       const std::optional<at::Device>& device) {
  if (list.size() == 0) return at::Tensor();
  TORCH_CHECK(static_cast<int64_t>(list.size()) == expected, "hetero_neighbor_sample: ", name, " must have ",
              std::to_string(expected), " entries (one per type) or none");
  const std::optional<at::Tensor> t = list.get(i);
  if (!t.has_value()) return at::Tensor();
  TORCH_CHECK(!device || t->device() == *device, "hetero_neighbor_sample: ", name, " must be on the graph's GPU");
  return t->to(dtype_of(t->scalar_type())).contiguous();
}

// Entry i of an optional per-type tensor list as given, or an undefined tensor.
at::Tensor list_entry(const c10::List<std::optional<at::Tensor>>& list, int64_t i) {
  if (i >= static_cast<int64_t>(list.size())) return at::Tensor();
  const std::optional<at::Tensor> t = list.get(i);
  return t.has_value() ? *t : at::Tensor();
}

}  // namespace

void check_sampling_modes(const char* op, bool weighted, bool temporal, bool disjoint,
                          c10::string_view temporal_strategy) {
  TORCH_CHECK(temporal_strategy == "uniform" || temporal_strategy == "last", op,
              ": temporal_strategy must be 'uniform' or 'last'");
  TORCH_CHECK(!temporal || disjoint, op, ": temporal sampling needs disjoint=True");
  TORCH_CHECK(!(temporal && weighted), op, ": weighted temporal sampling is not supported");
}

bool check_neighbor_sample_inputs(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed,
                                  const std::optional<at::Tensor>& edge_weight,
                                  const std::optional<at::Tensor>& node_time,
                                  const std::optional<at::Tensor>& edge_time,
                                  const std::optional<at::Tensor>& seed_time, bool disjoint,
                                  c10::string_view temporal_strategy, std::optional<at::Device> device) {
  TORCH_CHECK(!device || (colptr.device() == *device && row.device() == *device && seed.device() == *device),
              "neighbor_sample: colptr, row and seed must be on one GPU");
  TORCH_CHECK(colptr.scalar_type() == at::kLong && row.scalar_type() == at::kLong && seed.scalar_type() == at::kLong,
              "neighbor_sample: colptr, row and seed must be int64");
  TORCH_CHECK(colptr.dim() == 1 && colptr.numel() >= 1, "neighbor_sample: colptr must have num_nodes + 1 entries");
  for (const auto* t : {&edge_weight, &node_time, &edge_time, &seed_time}) {
    TORCH_CHECK(!device || !t->has_value() || (*t)->device() == *device,
                "neighbor_sample: edge_weight, node_time, edge_time and seed_time must be on the graph's GPU");
  }
  TORCH_CHECK(!edge_weight.has_value() || edge_weight->numel() == row.numel(),
              "neighbor_sample: edge_weight must have one entry per edge");
  TORCH_CHECK(!edge_time.has_value() || edge_time->numel() == row.numel(),
              "neighbor_sample: edge_time must have one entry per edge");
  TORCH_CHECK(!node_time.has_value() || node_time->numel() >= colptr.numel() - 1,
              "neighbor_sample: node_time must have one entry per node");
  const bool temporal = node_time.has_value() || edge_time.has_value();
  check_sampling_modes("neighbor_sample", edge_weight.has_value(), temporal, disjoint, temporal_strategy);
  TORCH_CHECK(!temporal || (seed_time.has_value() && seed_time->numel() == seed.numel()),
              "neighbor_sample: temporal sampling needs one seed_time per seed");
  return temporal;
}

HeteroInputs one_type_graph(const at::Tensor& colptr, const at::Tensor& row,
                            const std::optional<at::Tensor>& edge_weight, const std::optional<at::Tensor>& node_time,
                            const std::optional<at::Tensor>& edge_time, bool temporal) {
  HeteroInputs in;
  in.temporal = temporal;
  in.weighted = edge_weight.has_value();
  const auto converted = [](const std::optional<at::Tensor>& t, at::ScalarType (*dtype_of)(at::ScalarType)) {
    return t.has_value() ? t->to(dtype_of(t->scalar_type())).contiguous() : at::Tensor();
  };
  const auto given = [](const std::optional<at::Tensor>& t) { return t.has_value() ? *t : at::Tensor(); };
  in.colptrs = {colptr.contiguous()};
  in.rows = {row.contiguous()};
  in.weights = {converted(edge_weight, sampler_weight_dtype)};
  in.edge_times = {converted(edge_time, as_long)};
  in.node_times = {converted(node_time, as_long)};
  in.time_sorted = {temporal && remembered_columns_sorted_by_time({colptr, row, given(node_time), given(edge_time)},
                                                                  in.colptrs[0], in.rows[0], in.node_times[0],
                                                                  in.edge_times[0])};
  return in;
}

std::vector<BiasView> bias_views(const HeteroInputs& in, at::IntArrayRef src_type, at::IntArrayRef num_nodes) {
  const auto longs = [](const at::Tensor& t) { return t.defined() ? t.data_ptr<int64_t>() : nullptr; };
  std::vector<BiasView> views(src_type.size());
  for (size_t r = 0; r < views.size(); ++r) {
    const int64_t s = src_type[r];
    views[r].weight = edge_weights_of(in.weights[r]);
    views[r].node_time = longs(in.node_times[s]);
    views[r].edge_time = longs(in.edge_times[r]);
    views[r].num_src = num_nodes[s];
    views[r].time_sorted = in.time_sorted[r];
  }
  return views;
}

HeteroInputs read_hetero_inputs(at::IntArrayRef num_nodes, at::IntArrayRef src_type, at::IntArrayRef dst_type,
                                at::TensorList colptr_list, at::TensorList row_list, at::TensorList seed_list,
                                at::IntArrayRef num_neighbors, int64_t num_hops, bool disjoint,
                                const c10::List<std::optional<at::Tensor>>& edge_weight,
                                const c10::List<std::optional<at::Tensor>>& node_time,
                                const c10::List<std::optional<at::Tensor>>& edge_time,
                                const c10::List<std::optional<at::Tensor>>& seed_time,
                                c10::string_view temporal_strategy, std::optional<at::Device> device) {
  const int64_t T = static_cast<int64_t>(num_nodes.size()), R = static_cast<int64_t>(src_type.size());
  TORCH_CHECK(static_cast<int64_t>(dst_type.size()) == R && static_cast<int64_t>(colptr_list.size()) == R &&
                  static_cast<int64_t>(row_list.size()) == R && static_cast<int64_t>(seed_list.size()) == T &&
                  num_hops >= 0 && static_cast<int64_t>(num_neighbors.size()) == R * num_hops,
              "hetero_neighbor_sample: inconsistent numbers of node types, edge types or fanouts");
  HeteroInputs in;
  for (int64_t r = 0; r < R; ++r) {
    TORCH_CHECK(src_type[r] >= 0 && src_type[r] < T && dst_type[r] >= 0 && dst_type[r] < T,
                "hetero_neighbor_sample: edge type ", std::to_string(r), " names an unknown node type");
    TORCH_CHECK(!device || (colptr_list[r].device() == *device && row_list[r].device() == *device),
                "hetero_neighbor_sample: every edge type's colptr and row must be on one GPU");
    in.colptrs.push_back(colptr_list[r].to(at::kLong).contiguous());
    in.rows.push_back(row_list[r].to(at::kLong).contiguous());
    TORCH_CHECK(in.colptrs[r].numel() == num_nodes[dst_type[r]] + 1, "hetero_neighbor_sample: colptr of edge type ",
                std::to_string(r), " must have ", std::to_string(num_nodes[dst_type[r]] + 1), " entries");
    in.weights.push_back(type_tensor(edge_weight, r, R, sampler_weight_dtype, "edge_weight", device));
    in.edge_times.push_back(type_tensor(edge_time, r, R, as_long, "edge_time", device));
    for (const at::Tensor* t : {&in.weights[r], &in.edge_times[r]}) {
      TORCH_CHECK(!t->defined() || t->numel() == in.rows[r].numel(), "hetero_neighbor_sample: edge_weight and "
                  "edge_time of edge type ", std::to_string(r), " need one entry per edge");
    }
    in.weighted |= in.weights[r].defined();
    in.temporal |= in.edge_times[r].defined();
  }
  for (int64_t t = 0; t < T; ++t) {
    TORCH_CHECK(!device || seed_list[t].device() == *device,
                "hetero_neighbor_sample: the seeds must be on the graph's GPU");
    in.node_times.push_back(type_tensor(node_time, t, T, as_long, "node_time", device));
    in.seed_times.push_back(type_tensor(seed_time, t, T, as_long, "seed_time", device));
    TORCH_CHECK(!in.node_times[t].defined() || in.node_times[t].numel() >= num_nodes[t],
                "hetero_neighbor_sample: node_time of node type ", std::to_string(t), " needs one entry per node");
    TORCH_CHECK(!in.seed_times[t].defined() || in.seed_times[t].numel() == seed_list[t].numel(),
                "hetero_neighbor_sample: seed_time of node type ", std::to_string(t), " needs one entry per seed");
    in.temporal |= in.node_times[t].defined();
  }
  check_sampling_modes("hetero_neighbor_sample", in.weighted, in.temporal, disjoint, temporal_strategy);
  for (int64_t t = 0; t < T; ++t) {
    TORCH_CHECK(!in.temporal || seed_list[t].numel() == 0 || in.seed_times[t].defined(), "hetero_neighbor_sample: "
                "temporal sampling needs the seed times of node type ", std::to_string(t));
  }
  in.time_sorted.assign(R, false);
  for (int64_t r = 0; in.temporal && r < R; ++r) {
    const int64_t s = src_type[r];
    in.time_sorted[r] = remembered_columns_sorted_by_time(
        {colptr_list[r], row_list[r], list_entry(node_time, s), list_entry(edge_time, r)}, in.colptrs[r], in.rows[r],
        in.node_times[s], in.edge_times[r]);
  }
  return in;
}

}  // namespace pyg_accel
