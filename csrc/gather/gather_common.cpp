#include "gather_common.h"

#include <c10/util/Exception.h>

#include <string>

#include "../common/check_format.h"

namespace pyg_accel {

ShardedTable describe_table(const std::vector<at::Tensor>& shards, const char* what) {
  TORCH_CHECK(!shards.empty(), what, ": expected at least one tensor");
  ShardedTable t;
  const at::Tensor& first = shards.front();
  TORCH_CHECK(first.dim() >= 1, what, ": expected a tensor with at least 1 dimension, got a scalar");
  t.dtype = first.scalar_type();
  t.row_shape.assign(first.sizes().begin() + 1, first.sizes().end());
  int64_t row_numel = 1;
  for (int64_t d : t.row_shape) row_numel *= d;
  t.row_bytes = row_numel * static_cast<int64_t>(first.element_size());
  t.row_begin.push_back(0);
  for (const at::Tensor& s : shards) {
    TORCH_CHECK(s.scalar_type() == t.dtype, what, ": all shards must share one dtype, got ",
                t.dtype, " and ", s.scalar_type());
    // (numbers in messages as strings: common/check_format.h)
    TORCH_CHECK(s.dim() == first.dim() && s.sizes().slice(1) == first.sizes().slice(1), what,
                ": all shards must share the row shape ", shape_str(first.sizes().slice(1)), ", got ",
                shape_str(s.sizes().slice(1)));
    TORCH_CHECK(s.is_contiguous(), what, ": expected contiguous tensors");
    t.shards.push_back(s);
    t.num_rows += s.size(0);
    t.row_begin.push_back(t.num_rows);
  }
  return t;
}

void check_index(const at::Tensor& index) {
  TORCH_CHECK(index.dim() == 1, "gather: index must be 1-D, got shape ", shape_str(index.sizes()));
  TORCH_CHECK(index.scalar_type() == at::kLong || index.scalar_type() == at::kInt,
              "gather: index must be int64 or int32, got ", index.scalar_type());
}

at::Tensor alloc_rows(const ShardedTable& table, int64_t num_out, at::Device device) {
  std::vector<int64_t> shape{num_out};
  shape.insert(shape.end(), table.row_shape.begin(), table.row_shape.end());
  return at::empty(shape, at::TensorOptions().dtype(table.dtype).device(device));
}

}  // namespace pyg_accel
