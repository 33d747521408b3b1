// Shared by the CPU and CUDA sparse kernels: argument checks and output shapes.
#pragma once

#include <ATen/ATen.h>

#include <c10/util/string_view.h>

#include <optional>
#include <string>
#include <type_traits>

#include "../common/host_device.h"

namespace pyg_accel {

// spmm's reductions (ops.cpp), defined here once: the kernels are templated over them
// (CPU: policies of reduce_rows; CUDA: the runs of spmm_vec_kernel and the generic
// kernels), and a reduction of an existing family costs its name and its rule below.
// - The sum family (sum, mean) adds w_e * x[src_e]; divides_by_degree: then scaled by
//   1 / max(1, in-degree).
// - The extremum family (max, min) keeps each feature's extremum (`beats`) and how many
//   edges reach it; a destination without edges gets 0.
enum class Reduce { Sum, Mean, Max, Min };

// `name` ('sum', 'mean', 'max', 'min') as a Reduce; anything else is an error naming `op`.
inline Reduce parse_reduce(c10::string_view name, const char* op) {
  if (name == "sum") return Reduce::Sum;
  if (name == "mean") return Reduce::Mean;
  if (name == "max") return Reduce::Max;
  TORCH_CHECK(name == "min", op, ": reduce must be 'sum', 'mean', 'max' or 'min', got '", std::string(name), "'");
  return Reduce::Min;
}

constexpr PYG_ACCEL_HD bool is_extremum(Reduce reduce) { return reduce == Reduce::Max || reduce == Reduce::Min; }
constexpr PYG_ACCEL_HD bool divides_by_degree(Reduce reduce) { return reduce == Reduce::Mean; }

// Whether v replaces the running extremum `best` of reduction R: beyond it, or a NaN over
// a number (NaN propagates whatever its position among a destination's edges, as PyG's
// scatter max / min).
template <Reduce R, typename acc_t>
PYG_ACCEL_HD bool beats(acc_t v, acc_t best) {
  static_assert(is_extremum(R), "beats: an extremum reduction");
  return (R == Reduce::Min ? v < best : v > best) || (v != v && best == best);
}

// f(std::integral_constant<Reduce, R>{}) for the R that `reduce` holds: one switch from
// the run-time reduction to the kernels' compile-time one.
template <typename F>
decltype(auto) dispatch_reduce(Reduce reduce, F&& f) {
  using std::integral_constant;
  switch (reduce) {
    case Reduce::Sum: return f(integral_constant<Reduce, Reduce::Sum>{});
    case Reduce::Mean: return f(integral_constant<Reduce, Reduce::Mean>{});
    case Reduce::Max: return f(integral_constant<Reduce, Reduce::Max>{});
    default: return f(integral_constant<Reduce, Reduce::Min>{});
  }
}

// Checks the graph (ptr int64 [num_dst + 1]; dst, src one integer dtype, [E], on ptr's
// device) and returns E.
int64_t check_sparse_graph(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src, const char* op);

// Checks a node tensor [N, H, C] on the graph's device.
void check_node_values(const at::Tensor& t, const at::Tensor& ptr, const char* op, const char* name);

// Checks an edge tensor [E, H] on the graph's device.
void check_edge_values(const at::Tensor& t, const at::Tensor& ptr, int64_t num_edges, int64_t heads, const char* op,
                       const char* name);

// Checks SpMM's inputs (graph, x [N, H, C], optional weight [E, H] in x's dtype; no
// weight for an extremum).
void check_spmm(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                const std::optional<at::Tensor>& weight, const at::Tensor& x, const char* op,
                Reduce reduce = Reduce::Sum);

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

// How many ways the gradient of an extremum (max or min) `best` reached by `ties` edges
// is split, as in PyG's scatter max / min (torch.scatter_reduce 'amax' / 'amin' into
// zeros, include_self=False): evenly among the ties, and where the extremum is exactly 0
// the zero the output started from counts as one more (its share is dropped).
// A NaN extremum (NaN propagates, as in torch's amax / amin) routes NaN to every source
// of its destination, as torch's scatter_reduce backward does.
template <typename acc_t>
PYG_ACCEL_HD acc_t extremum_share(acc_t best, int ties) {
  return best != best ? best : static_cast<acc_t>(ties + (best == acc_t(0) ? 1 : 0));
}

// Whether a source with value v gets a share of the gradient of a destination whose
// extremum is `best` (every source, when it is NaN).
template <typename acc_t>
PYG_ACCEL_HD bool extremum_reaches(acc_t v, acc_t best) {
  return v == best || best != best;
}

// Checks spmm_extremum_backward's inputs over the forward's graph (ptr over the
// destinations): out and grad [num_dst, H, C] with num_dst = ptr.numel() - 1, in x's
// dtype, and ties [num_dst, H, C] int32 (spmm's outputs for max / min); x
// [num_src, H, C]. Ids in src must be below num_src (not scanned here). Returns E.
int64_t check_extremum_backward(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                                const at::Tensor& x, const at::Tensor& out, const at::Tensor& ties,
                                const at::Tensor& grad);

}  // namespace pyg_accel
