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

// Checks SpMM's inputs (graph, x [N, H, C], optional weight [E, H] in x's dtype).
void check_spmm(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                const std::optional<at::Tensor>& weight, const at::Tensor& x, const char* op);

// Checks csr_ptr's inputs: key 1-D int32 / int64, num_rows >= 0.
void check_csr_ptr(const at::Tensor& key, int64_t num_rows);

// Checks mean_edge_weight's inputs: ptr 1-D int64, dst 1-D int32 / int64 on ptr's
// device, dtype floating.
void check_mean_edge_weight(const at::Tensor& ptr, const at::Tensor& dst, at::ScalarType dtype);

// Checks spmm_transposed's inputs: SpMM's, with x [num_dst, H, C] and num_src >= 0.
void check_spmm_transposed(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                           const std::optional<at::Tensor>& weight, const at::Tensor& x, int64_t num_src);

// Checks the output spmm_add_ adds into: [num_dst, H, C], x's dtype and device, contiguous.
void check_accumulator(const at::Tensor& out, const at::Tensor& ptr, const at::Tensor& x, const char* op);

// How many ways spmm_max's gradient at a maximum `best` reached by `ties` edges is split,
// as in PyG's scatter max (torch.scatter_reduce 'amax' into zeros, include_self=False):
// evenly among the ties, and where the maximum is exactly 0 the zero the output started
// from counts as one more (its share is dropped).
// A NaN maximum (NaN propagates, as in torch's amax) routes NaN to every source of its
// destination, as torch's scatter_reduce backward does.
#ifdef __CUDACC__
#define PYG_ACCEL_HOST_DEVICE __host__ __device__
#else
#define PYG_ACCEL_HOST_DEVICE
#endif
template <typename acc_t>
inline PYG_ACCEL_HOST_DEVICE acc_t max_share(acc_t best, int ties) {
  return best != best ? best : static_cast<acc_t>(ties + (best == acc_t(0) ? 1 : 0));
}

// Whether v replaces the running maximum `best`: larger, or a NaN over a number (NaN
// propagates whatever its position among a destination's edges, as PyG's scatter max).
template <typename acc_t>
inline PYG_ACCEL_HOST_DEVICE bool max_above(acc_t v, acc_t best) {
  return v > best || (v != v && best == best);
}

// Whether a source with value v gets a share of the gradient of a destination whose
// maximum is `best` (every source, when the maximum is NaN).
template <typename acc_t>
inline PYG_ACCEL_HOST_DEVICE bool max_reaches(acc_t v, acc_t best) {
  return v == best || best != best;
}

// Checks spmm_max_backward's inputs over spmm_max's graph (ptr over the destinations):
// out and grad [num_dst, H, C] with num_dst = ptr.numel() - 1, in x's dtype, and ties
// [num_dst, H, C] int32 (spmm_max's outputs); x [num_src, H, C]. Ids in src must be
// below num_src (not scanned here). Returns E.
int64_t check_max_backward(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src, const at::Tensor& x,
                           const at::Tensor& out, const at::Tensor& ties, const at::Tensor& grad);

}  // namespace pyg_accel
