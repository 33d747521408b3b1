#include "sampler_inputs.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <string>

#include "edge_weights.h"
#include "time_order.h"

namespace pyg_accel {
namespace {

// The dtype times are read in, whatever they are given in.
at::ScalarType as_long(at::ScalarType) { return at::kLong; }

// Each bias input: its name (the Python argument's) and the dtype it is read in.
struct BiasInput {
  const char* name;
  at::ScalarType (*dtype_of)(at::ScalarType);
};
constexpr BiasInput kEdgeInputs[kEdgeBiasInputs] = {{"edge_weight", sampler_weight_dtype}, {"edge_time", as_long}};
constexpr BiasInput kNodeInputs[kNodeBiasInputs] = {{"node_time", as_long}};

// The list's size: `per_type` entries per type of `types`, or none.
void check_list_size(const OptionalTensors& list, int64_t types, int64_t per_type, const char* list_name,
                     const char* op) {
  TORCH_CHECK(list.size() == 0 || static_cast<int64_t>(list.size()) == types * per_type, op, ": ", list_name,
              " must have ", std::to_string(types * per_type), " entries (", std::to_string(per_type),
              " per type) or none");
}

// `t` as a contiguous tensor of `dtype`: `t` itself when it is one (no dispatch: the
// heterogeneous op reads two tensors per edge type on every call).
at::Tensor as_contiguous(const at::Tensor& t, at::ScalarType dtype) {
  return t.scalar_type() == dtype && t.is_contiguous() ? t : t.to(dtype).contiguous();
}

// Entry i of an optional per-type tensor list as given, or an undefined tensor.
at::Tensor list_entry(const OptionalTensors& list, int64_t i) {
  if (i >= static_cast<int64_t>(list.size())) return at::Tensor();
  const std::optional<at::Tensor> t = list.get(i);
  return t.has_value() ? *t : at::Tensor();
}

// Entry i of an optional per-type tensor list as a contiguous tensor of input.dtype_of(its
// dtype), or an undefined tensor (no entry, or None).
at::Tensor read_input(const OptionalTensors& list, int64_t i, const BiasInput& input, const char* op,
                      const std::optional<at::Device>& device) {
  const at::Tensor t = list_entry(list, i);
  if (!t.defined()) return t;
  TORCH_CHECK(!device || t.device() == *device, op, ": ", input.name, " must be on the graph's GPU");
  return as_contiguous(t, input.dtype_of(t.scalar_type()));
}

const BiasInput kSeedTime{"seed_time", as_long};

}  // namespace

void check_sampling_modes(const char* op, bool weighted, bool temporal, bool disjoint,
                          c10::string_view temporal_strategy) {
  TORCH_CHECK(temporal_strategy == "uniform" || temporal_strategy == "last", op,
              ": temporal_strategy must be 'uniform' or 'last'");
  TORCH_CHECK(!temporal || disjoint, op, ": temporal sampling needs disjoint=True");
  TORCH_CHECK(!(temporal && weighted), op, ": weighted temporal sampling is not supported");
}

Bias check_neighbor_sample_inputs(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed,
                                  const OptionalTensors& edge_bias, const OptionalTensors& node_bias,
                                  const std::optional<at::Tensor>& seed_time, bool disjoint,
                                  c10::string_view temporal_strategy, std::optional<at::Device> device) {
  check_list_size(edge_bias, 1, kEdgeBiasInputs, "edge_bias", "neighbor_sample");
  check_list_size(node_bias, 1, kNodeBiasInputs, "node_bias", "neighbor_sample");
  const auto given = [](const OptionalTensors& list, int64_t i) {
    const at::Tensor t = list_entry(list, i);
    return t.defined() ? std::optional<at::Tensor>(t) : std::nullopt;
  };
  const std::optional<at::Tensor> edge_weight = given(edge_bias, kEdgeWeight), edge_time = given(edge_bias, kEdgeTime),
                                  node_time = given(node_bias, kNodeTime);
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
  return bias_of(edge_weight.has_value(), temporal);
}

HeteroInputs one_type_graph(const at::Tensor& colptr, const at::Tensor& row, const OptionalTensors& edge_bias,
                            const OptionalTensors& node_bias, bool temporal) {
  HeteroInputs in;
  in.temporal = temporal;
  in.colptrs = {colptr.contiguous()};
  in.rows = {row.contiguous()};
  in.weights = {read_input(edge_bias, kEdgeWeight, kEdgeInputs[kEdgeWeight], "neighbor_sample", std::nullopt)};
  in.edge_times = {read_input(edge_bias, kEdgeTime, kEdgeInputs[kEdgeTime], "neighbor_sample", std::nullopt)};
  in.node_times = {read_input(node_bias, kNodeTime, kNodeInputs[kNodeTime], "neighbor_sample", std::nullopt)};
  in.weighted = in.weights[0].defined();
  in.time_sorted = {temporal && remembered_columns_sorted_by_time(
                                    {colptr, row, list_entry(node_bias, kNodeTime), list_entry(edge_bias, kEdgeTime)},
                                    in.colptrs[0], in.rows[0], in.node_times[0], in.edge_times[0])};
  return in;
}

void check_bias_values(const HeteroInputs& in, const char* op) {
  for (const at::Tensor& w : in.weights) {
    TORCH_CHECK_VALUE(!w.defined() || w.numel() == 0 || (at::isfinite(w).all() & (w >= 0).all()).item<bool>(), op,
                      ": edge_weight must be finite and non-negative");
  }
}

std::vector<TensorId> graph_input_ids(at::TensorList colptr_list, at::TensorList row_list,
                                      const OptionalTensors& edge_bias, const OptionalTensors& node_bias) {
  std::vector<TensorId> ids;
  for (size_t r = 0; r < colptr_list.size(); ++r) {
    ids.push_back(TensorId::of(&colptr_list[r]));
    ids.push_back(TensorId::of(&row_list[r]));
  }
  for (const OptionalTensors* list : {&edge_bias, &node_bias}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const at::Tensor t = list_entry(*list, static_cast<int64_t>(i));
      ids.push_back(TensorId::of(&t));
    }
  }
  return ids;
}

std::vector<at::Tensor> conversion_copies(const HeteroInputs& in, at::TensorList colptr_list,
                                          at::TensorList row_list, const OptionalTensors& edge_bias,
                                          const OptionalTensors& node_bias) {
  std::vector<const void*> callers;
  for (size_t r = 0; r < colptr_list.size(); ++r) {
    callers.push_back(colptr_list[r].data_ptr());
    callers.push_back(row_list[r].data_ptr());
  }
  for (const OptionalTensors* list : {&edge_bias, &node_bias}) {
    for (size_t i = 0; i < list->size(); ++i) {
      const at::Tensor t = list_entry(*list, static_cast<int64_t>(i));
      if (t.defined()) callers.push_back(t.data_ptr());
    }
  }
  std::vector<at::Tensor> copies;
  for (const std::vector<at::Tensor>* held : {&in.colptrs, &in.rows, &in.weights, &in.edge_times, &in.node_times}) {
    for (const at::Tensor& t : *held) {
      if (t.defined() && std::find(callers.begin(), callers.end(), t.data_ptr()) == callers.end()) {
        copies.push_back(t);
      }
    }
  }
  return copies;
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
                                const OptionalTensors& edge_bias, const OptionalTensors& node_bias,
                                const OptionalTensors& seed_time, c10::string_view temporal_strategy,
                                std::optional<at::Device> device) {
  constexpr const char* op = "hetero_neighbor_sample";
  const int64_t T = static_cast<int64_t>(num_nodes.size()), R = static_cast<int64_t>(src_type.size());
  TORCH_CHECK(static_cast<int64_t>(dst_type.size()) == R && static_cast<int64_t>(colptr_list.size()) == R &&
                  static_cast<int64_t>(row_list.size()) == R && static_cast<int64_t>(seed_list.size()) == T &&
                  num_hops >= 0 && static_cast<int64_t>(num_neighbors.size()) == R * num_hops,
              "hetero_neighbor_sample: inconsistent numbers of node types, edge types or fanouts");
  check_list_size(edge_bias, R, kEdgeBiasInputs, "edge_bias", op);
  check_list_size(node_bias, T, kNodeBiasInputs, "node_bias", op);
  check_list_size(seed_time, T, 1, "seed_time", op);
  HeteroInputs in;
  for (auto* list : {&in.colptrs, &in.rows, &in.weights, &in.edge_times}) list->reserve(R);
  for (auto* list : {&in.node_times, &in.seed_times}) list->reserve(T);
  for (int64_t r = 0; r < R; ++r) {
    TORCH_CHECK(src_type[r] >= 0 && src_type[r] < T && dst_type[r] >= 0 && dst_type[r] < T,
                "hetero_neighbor_sample: edge type ", std::to_string(r), " names an unknown node type");
    TORCH_CHECK(!device || (colptr_list[r].device() == *device && row_list[r].device() == *device),
                "hetero_neighbor_sample: every edge type's colptr and row must be on one GPU");
    in.colptrs.push_back(as_contiguous(colptr_list[r], at::kLong));
    in.rows.push_back(as_contiguous(row_list[r], at::kLong));
    TORCH_CHECK(in.colptrs[r].numel() == num_nodes[dst_type[r]] + 1, "hetero_neighbor_sample: colptr of edge type ",
                std::to_string(r), " must have ", std::to_string(num_nodes[dst_type[r]] + 1), " entries");
    const int64_t e = r * kEdgeBiasInputs;
    in.weights.push_back(read_input(edge_bias, e + kEdgeWeight, kEdgeInputs[kEdgeWeight], op, device));
    in.edge_times.push_back(read_input(edge_bias, e + kEdgeTime, kEdgeInputs[kEdgeTime], op, device));
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
    in.node_times.push_back(read_input(node_bias, t * kNodeBiasInputs + kNodeTime, kNodeInputs[kNodeTime], op, device));
    in.seed_times.push_back(read_input(seed_time, t, kSeedTime, op, device));
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
        {colptr_list[r], row_list[r], list_entry(node_bias, s * kNodeBiasInputs + kNodeTime),
         list_entry(edge_bias, r * kEdgeBiasInputs + kEdgeTime)},
        in.colptrs[r], in.rows[r], in.node_times[s], in.edge_times[r]);
  }
  return in;
}

}  // namespace pyg_accel
