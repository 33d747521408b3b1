// Shared by the CPU and CUDA heterogeneous samplers: the per-type inputs of
// hetero_neighbor_sample, checked and converted once (schema: csrc/ops.cpp).
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <vector>

namespace pyg_accel {

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

}  // namespace pyg_accel
