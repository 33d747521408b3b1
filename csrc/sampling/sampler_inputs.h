// The samplers' one validation of their inputs (schemas: csrc/ops.cpp), shared by the
// CPU and CUDA kernels: the rules every sampling op obeys, neighbor_sample's inputs (a
// homogeneous graph, the one-type case) and hetero_neighbor_sample's per-type inputs,
// checked (and for the heterogeneous op converted) once.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/string_view.h>

#include <optional>
#include <vector>

#include "../common/tensor_id.h"
#include "node_draw.h"

namespace pyg_accel {

// What the draws read besides the CSC, as both sampling ops take it (schemas:
// csrc/ops.cpp): `edge_bias` holds kEdgeBiasInputs tensors per edge type, input `kind`
// of edge type r at r * kEdgeBiasInputs + kind; `node_bias` kNodeBiasInputs per node
// type, likewise; None where a type has no such input, and a list may be empty (no
// type has any). The Python wrappers (pyg_accel/ops/sampling.py) pack them in this
// order; only this file and sampler_inputs.cpp know what each input is.
enum EdgeBiasInput : int64_t { kEdgeWeight, kEdgeTime, kEdgeBiasInputs };
enum NodeBiasInput : int64_t { kNodeTime, kNodeBiasInputs };
using OptionalTensors = c10::List<std::optional<at::Tensor>>;

// The rules of the sampling modes, whatever the op (`op` names it in the error):
// temporal_strategy 'uniform' or 'last'; temporal sampling needs disjoint trees; no
// weighted temporal sampling.
void check_sampling_modes(const char* op, bool weighted, bool temporal, bool disjoint,
                          c10::string_view temporal_strategy);

// neighbor_sample's inputs: colptr, row and seed int64 (with `device`, the CUDA kernel's
// GPU, every tensor on it), colptr of num_nodes + 1 entries, the bias inputs of one
// edge type and one node type (edge_weight and edge_time one entry per edge, node_time
// one per node), and for temporal sampling (node or edge times given) one seed_time per
// seed and the rules of check_sampling_modes. Returns the sample's bias (bias_of).
Bias check_neighbor_sample_inputs(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& seed,
                                  const OptionalTensors& edge_bias, const OptionalTensors& node_bias,
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
                                const OptionalTensors& edge_bias, const OptionalTensors& node_bias,
                                const OptionalTensors& seed_time, c10::string_view temporal_strategy,
                                std::optional<at::Device> device);

// The graph's tensors of neighbor_sample (no checks: check_neighbor_sample_inputs) as
// the one-type HeteroInputs, without seed times: converted as read_hetero_inputs
// converts them (each tensor the caller's own where it needed no conversion), and
// time_sorted as it finds it when `temporal`.
HeteroInputs one_type_graph(const at::Tensor& colptr, const at::Tensor& row, const OptionalTensors& edge_bias,
                            const OptionalTensors& node_bias, bool temporal);

// The one-time checks of the bias inputs' values (a host sync; the CUDA samplers run it
// once per plan, the CPU kernel checks each value as it reads it): edge weights finite
// and non-negative. `op` names the op in the error.
void check_bias_values(const HeteroInputs& in, const char* op);

// Identities of the caller's graph tensors (colptr and row per edge type, then the bias
// inputs), the key of what a CUDA sampler keeps for them (sample_plan.h).
std::vector<TensorId> graph_input_ids(at::TensorList colptr_list, at::TensorList row_list,
                                      const OptionalTensors& edge_bias, const OptionalTensors& node_bias);

// The tensors of `in` that are not the caller's own (made by conversion, as int32 to
// int64 or a non-contiguous tensor's copy): what a CUDA sampler's plan must keep alive.
std::vector<at::Tensor> conversion_copies(const HeteroInputs& in, at::TensorList colptr_list,
                                          at::TensorList row_list, const OptionalTensors& edge_bias,
                                          const OptionalTensors& node_bias);

// Each edge type's BiasView over `in`'s tensors (pointers valid while they live).
std::vector<BiasView> bias_views(const HeteroInputs& in, at::IntArrayRef src_type, at::IntArrayRef num_nodes);

}  // namespace pyg_accel
