// Shared by the CPU and CUDA gather kernels: a logical table made of row
// shards, described by base pointers and row offsets.
#pragma once

#include <ATen/ATen.h>

#include <vector>

namespace pyg_accel {

// A logical [num_rows, *] table whose rows live in one or more shards.
struct ShardedTable {
  std::vector<at::Tensor> shards;   // each contiguous, same dtype and row shape
  std::vector<int64_t> row_begin;   // shard s holds rows [row_begin[s], row_begin[s+1])
  int64_t num_rows = 0;
  int64_t row_bytes = 0;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> row_shape;   // the trailing dims of one row
};

// Validates `shards` (non-empty, >=1-D, same dtype and trailing shape) and
// describes them. `what` names the argument in error messages.
ShardedTable describe_table(const std::vector<at::Tensor>& shards, const char* what);

// Validates the index: 1-D, int32 or int64.
void check_index(const at::Tensor& index);

// An uninitialised output [index.numel(), *row_shape] on `device`.
at::Tensor alloc_rows(const ShardedTable& table, int64_t num_out, at::Device device);

}  // namespace pyg_accel
