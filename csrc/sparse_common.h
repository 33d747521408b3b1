// Shared by the CPU and CUDA sparse kernels: argument checks and output shapes.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace pyg_accel {

// Checks the graph (ptr int64 [num_dst + 1]; dst, src one integer dtype, [E], on ptr's
// device) and returns E.
int64_t check_sparse_graph(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src, const char* op);

// Checks a node tensor [N, H, C] on the graph's device.
void check_node_values(const at::Tensor& t, const at::Tensor& ptr, const char* op, const char* name);

// Checks an edge tensor [E, H] on the graph's device.
void check_edge_values(const at::Tensor& t, const at::Tensor& ptr, int64_t num_edges, int64_t heads, const char* op,
                       const char* name);

}  // namespace pyg_accel
