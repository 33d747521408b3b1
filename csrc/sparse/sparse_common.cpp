#include "sparse_common.h"

#include <string>

namespace pyg_accel {

int64_t check_sparse_graph(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src, const char* op) {
  TORCH_CHECK(ptr.dim() == 1 && ptr.numel() >= 1 && ptr.scalar_type() == at::kLong, op,
              ": ptr must be a 1-D int64 tensor of num_dst + 1 entries");
  TORCH_CHECK(dst.dim() == 1 && src.dim() == 1 && dst.numel() == src.numel(), op,
              ": dst and src must be 1-D tensors of one length (one entry per edge)");
  TORCH_CHECK(dst.scalar_type() == src.scalar_type() &&
                  (src.scalar_type() == at::kInt || src.scalar_type() == at::kLong),
              op, ": dst and src must share one dtype, int32 or int64");
  TORCH_CHECK(dst.device() == ptr.device() && src.device() == ptr.device(), op,
              ": ptr, dst and src must be on one device");
  return src.numel();
}

void check_node_values(const at::Tensor& t, const at::Tensor& ptr, const char* op, const char* name) {
  TORCH_CHECK(t.dim() == 3, op, ": ", name, " must be [num_nodes, heads, channels], got ", std::to_string(t.dim()),
              " dimensions");
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": ", name, " must be a floating tensor");
  TORCH_CHECK(t.device() == ptr.device(), op, ": ", name, " must be on the graph's device");
}

void check_edge_values(const at::Tensor& t, const at::Tensor& ptr, int64_t num_edges, int64_t heads, const char* op,
                       const char* name) {
  TORCH_CHECK(t.dim() == 2 && t.size(0) == num_edges && (heads < 0 || t.size(1) == heads), op, ": ", name,
              " must be [num_edges, heads] = [", std::to_string(num_edges), ", ",
              heads < 0 ? std::string("H") : std::to_string(heads), "]");
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), op, ": ", name, " must be a floating tensor");
  TORCH_CHECK(t.device() == ptr.device(), op, ": ", name, " must be on the graph's device");
}

void check_spmm(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                const std::optional<at::Tensor>& weight, const at::Tensor& x, const char* op, Reduce reduce) {
  const int64_t E = check_sparse_graph(ptr, dst, src, op);
  check_node_values(x, ptr, op, "x");
  TORCH_CHECK(!(weight.has_value() && is_extremum(reduce)), op, ": reduce='",
              reduce == Reduce::Max ? "max" : "min", "' takes no edge weights");
  if (weight.has_value()) {
    check_edge_values(*weight, ptr, E, x.size(1), op, "weight");
    TORCH_CHECK(weight->scalar_type() == x.scalar_type(), op, ": weight and x must share one dtype");
  }
}

void check_csr_ptr(const at::Tensor& key, int64_t num_rows) {
  TORCH_CHECK(key.dim() == 1 && (key.scalar_type() == at::kInt || key.scalar_type() == at::kLong),
              "csr_ptr: key must be a 1-D int32 or int64 tensor");
  TORCH_CHECK(num_rows >= 0, "csr_ptr: num_rows must be non-negative");
}

void check_mean_edge_weight(const at::Tensor& ptr, const at::Tensor& dst, at::ScalarType dtype) {
  TORCH_CHECK(ptr.dim() == 1 && ptr.numel() >= 1 && ptr.scalar_type() == at::kLong,
              "mean_edge_weight: ptr must be a 1-D int64 tensor of num_dst + 1 entries");
  TORCH_CHECK(dst.dim() == 1 && (dst.scalar_type() == at::kInt || dst.scalar_type() == at::kLong),
              "mean_edge_weight: dst must be a 1-D int32 or int64 tensor");
  TORCH_CHECK(dst.device() == ptr.device(), "mean_edge_weight: ptr and dst must be on one device");
  TORCH_CHECK(at::isFloatingType(dtype), "mean_edge_weight: dtype must be floating");
}

void check_spmm_transposed(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                           const std::optional<at::Tensor>& weight, const at::Tensor& x, int64_t num_src) {
  check_spmm(ptr, dst, src, weight, x, "spmm_transposed");
  TORCH_CHECK(x.size(0) == ptr.numel() - 1, "spmm_transposed: x must have one row per destination (",
              std::to_string(ptr.numel() - 1), "), got ", std::to_string(x.size(0)));
  TORCH_CHECK(num_src >= 0, "spmm_transposed: num_src must be non-negative");
}

void check_accumulator(const at::Tensor& out, const at::Tensor& ptr, const at::Tensor& x, const char* op) {
  TORCH_CHECK(out.dim() == 3 && out.size(0) == ptr.numel() - 1 && out.size(1) == x.size(1) &&
                  out.size(2) == x.size(2),
              op, ": out must be [num_dst, heads, channels] = [", std::to_string(ptr.numel() - 1), ", ",
              std::to_string(x.size(1)), ", ", std::to_string(x.size(2)), "]");
  TORCH_CHECK(out.scalar_type() == x.scalar_type() && out.device() == x.device() && out.is_contiguous(), op,
              ": out must be a contiguous tensor of x's dtype on x's device");
}

int64_t check_extremum_backward(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                                const at::Tensor& x, const at::Tensor& out, const at::Tensor& ties,
                                const at::Tensor& grad) {
  const int64_t E = check_sparse_graph(ptr, dst, src, "spmm_extremum_backward");
  check_node_values(x, ptr, "spmm_extremum_backward", "x");
  check_node_values(out, ptr, "spmm_extremum_backward", "out");
  TORCH_CHECK(out.size(0) == ptr.numel() - 1, "spmm_extremum_backward: out needs a row per destination of the graph");
  TORCH_CHECK(out.size(1) == x.size(1) && out.size(2) == x.size(2) && out.scalar_type() == x.scalar_type(),
              "spmm_extremum_backward: out must share x's heads, channels and dtype");
  TORCH_CHECK(grad.sizes() == out.sizes() && grad.scalar_type() == out.scalar_type() && grad.device() == out.device(),
              "spmm_extremum_backward: grad must match out");
  TORCH_CHECK(ties.sizes() == out.sizes() && ties.scalar_type() == at::kInt && ties.device() == out.device(),
              "spmm_extremum_backward: ties must be spmm's int32 tie counts (max / min)");
  return E;
}

}  // namespace pyg_accel
