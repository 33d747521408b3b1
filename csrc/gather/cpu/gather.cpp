// CPU gather: rows copied with memcpy, parallel over output rows.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstring>
#include <string>

#include "../gather_common.h"

namespace pyg_accel {
namespace {

// kRowBytes > 0 fixes the row size at compile time so that memcpy becomes a few vector
// moves (narrow rows are otherwise dominated by the call); 0 reads it at run time.
template <typename index_t, int64_t kRowBytes>
void gather_rows(const ShardedTable& table, const at::Tensor& index, at::Tensor& out) {
  const index_t* idx = index.data_ptr<index_t>();
  const int64_t n = index.numel();
  const int64_t row_bytes = kRowBytes > 0 ? kRowBytes : table.row_bytes;
  char* dst = static_cast<char*>(out.data_ptr());
  std::vector<const char*> base;
  for (const at::Tensor& s : table.shards) base.push_back(static_cast<const char*>(s.data_ptr()));
  const int64_t grain = std::max<int64_t>(1, (1 << 16) / std::max<int64_t>(row_bytes, 1));
  at::parallel_for(0, n, grain, [&](int64_t begin, int64_t end) {
    size_t shard = 0;
    for (int64_t i = begin; i < end; ++i) {
      const int64_t row = static_cast<int64_t>(idx[i]);
      TORCH_CHECK(row >= 0 && row < table.num_rows, "gather: index ", std::to_string(row),
                  " is out of range for a table of ", std::to_string(table.num_rows), " rows");
      if (row < table.row_begin[shard] || row >= table.row_begin[shard + 1]) {
        shard = std::upper_bound(table.row_begin.begin(), table.row_begin.end(), row) -
                table.row_begin.begin() - 1;
      }
      std::memcpy(dst + i * row_bytes, base[shard] + (row - table.row_begin[shard]) * row_bytes,
                  row_bytes);
    }
  });
}

at::Tensor gather_table(const ShardedTable& table, const at::Tensor& index) {
  for (const at::Tensor& s : table.shards)
    TORCH_CHECK(s.device().is_cpu(), "gather: a CPU index needs CPU tables, got one on ", s.device().str());
  at::Tensor out = alloc_rows(table, index.numel(), at::kCPU);
  if (index.numel() == 0 || table.row_bytes == 0) return out;
  AT_DISPATCH_INDEX_TYPES(index.scalar_type(), "gather_cpu", [&] {
    switch (table.row_bytes) {
      case 4: gather_rows<index_t, 4>(table, index, out); break;
      case 8: gather_rows<index_t, 8>(table, index, out); break;
      case 16: gather_rows<index_t, 16>(table, index, out); break;
      case 32: gather_rows<index_t, 32>(table, index, out); break;
      case 64: gather_rows<index_t, 64>(table, index, out); break;
      case 128: gather_rows<index_t, 128>(table, index, out); break;
      case 256: gather_rows<index_t, 256>(table, index, out); break;
      default: gather_rows<index_t, 0>(table, index, out); break;
    }
  });
  return out;
}

at::Tensor gather_cpu(const at::Tensor& table, const at::Tensor& index) {
  check_index(index);
  return gather_table(describe_table({table}, "gather: table"), index.contiguous());
}

std::vector<at::Tensor> multi_gather_cpu(at::TensorList tables, const at::Tensor& index) {
  check_index(index);
  at::Tensor idx = index.contiguous();
  std::vector<at::Tensor> outs;
  for (const at::Tensor& t : tables) outs.push_back(gather_table(describe_table({t}, "multi_gather: table"), idx));
  return outs;
}

at::Tensor sharded_gather_cpu(at::TensorList shards, const at::Tensor& index) {
  check_index(index);
  return gather_table(describe_table(shards.vec(), "sharded_gather: shards"), index.contiguous());
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CPU, m) {
  m.impl("gather", &gather_cpu);
  m.impl("multi_gather", &multi_gather_cpu);
  m.impl("sharded_gather", &sharded_gather_cpu);
}

}  // namespace pyg_accel
