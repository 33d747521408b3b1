// The samplers' one validation of their inputs (schemas: csrc/ops.cpp), shared by the
// CPU and CUDA kernels: the rules every sampling op obeys, neighbor_sample's inputs (a
// homogeneous graph, the one-type case) and hetero_neighbor_sample's per-type inputs,
// checked (and for the heterogeneous op converted) once.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/string_view.h>

#include <optional>
#include <vector>

#include "node_draw.h"

namespace pyg_accel {

// The rules of the sampling modes, whatever the op (`op` names it in the error):
// temporal_strategy 'uniform' or 'last'; temporal sampling needs disjoint trees; no
// weighted temporal sampling.
void check_sampling_modes(const char* op, bool weighted, bool temporal, bool disjoint,
                          c10::string_view temporal_strategy);

// neighbor_sample's inputs: colptr, row and seed int64 (with `device`, the CUDA kernel's
// GPU, every tensor on it), colptr of num_nodes + 1 entries, edge_weight and edge_time
// one entry per edge, node_time one per node, and for temporal sampling (node or edge
// times given) one seed_time per seed and the rules of check_sampling_modes. Returns
// whether the sample is temporal.
bool check_neighbor_sample_inputs(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed,
                                  const std::optional<at::Tensor>& edge_weight,
                                  const std::optional<at::Tensor>& node_time,
                                  const std::optional<at::Tensor>& edge_time,
                                  const std::optional<at::Tensor>& seed_time, bool disjoint,
                                  c10::string_view temporal_strategy, std::optional<at::Device> device);

// The graph and the optional per-type tensors, contiguous: colptr / row / edge_time /
// node_time / seed_time int64, edge_weight float32 or float64 (sampler_weight_dtype);
// undefined where a type has none.
struct HeteroInputs {
  std::vector<at::Tensor> colptrs, rows, weights, edge_times;  // [R]
  std::vector<at::Tensor> node_times, seed_times;               // [T]
  std::vector<bool> time_sorted;                                 // [R] temporal, columns in time order
  bool weighted = false, temporal = false;
};

// Checks the counts, types, sizes and modes as both kernels need them (temporal needs
// disjoint and seed times for every seeded type; no weighted temporal sampling). With
// `device` (the CUDA kernel) every tensor must be on it. time_sorted[r]: edge type r has
// times and its columns are in time order (remembered_columns_sorted_by_time), so both
// kernels binary-search them.
HeteroInputs read_hetero_inputs(at::IntArrayRef num_nodes, at::IntArrayRef src_type, at::IntArrayRef dst_type,
                                at::TensorList colptr_list, at::TensorList row_list, at::TensorList seed_list,
                                at::IntArrayRef num_neighbors, int64_t num_hops, bool disjoint,
                                const c10::List<std::optional<at::Tensor>>& edge_weight,
                                const c10::List<std::optional<at::Tensor>>& node_time,
                                const c10::List<std::optional<at::Tensor>>& edge_time,
                                const c10::List<std::optional<at::Tensor>>& seed_time,
                                c10::string_view temporal_strategy, std::optional<at::Device> device);

// The graph's tensors of neighbor_sample (no checks: check_neighbor_sample_inputs) as
// the one-type HeteroInputs, without seed times: converted as read_hetero_inputs
// converts them (each tensor the caller's own where it needed no conversion), and
// time_sorted as it finds it when `temporal`.
HeteroInputs one_type_graph(const at::Tensor& colptr, const at::Tensor& row,
                            const std::optional<at::Tensor>& edge_weight, const std::optional<at::Tensor>& node_time,
                            const std::optional<at::Tensor>& edge_time, bool temporal);

// Each edge type's BiasView over `in`'s tensors (pointers valid while they live).
std::vector<BiasView> bias_views(const HeteroInputs& in, at::IntArrayRef src_type, at::IntArrayRef num_nodes);

}  // namespace pyg_accel
