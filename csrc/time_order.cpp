#include "time_order.h"

#include <algorithm>

namespace pyg_accel {

bool columns_sorted_by_time(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& node_time,
                            const at::Tensor& edge_time) {
  if (!node_time.defined() && !edge_time.defined()) return false;
  const int64_t num_edges = row.numel();
  if (num_edges < 2) return true;
  // Positions e (e + 1 < E) where a column ends, so e and e + 1 need not be in order.
  at::Tensor starts = colptr.slice(0, 1, colptr.numel() - 1);
  const at::Tensor column_ends = starts.masked_select((starts > 0) & (starts < num_edges)) - 1;
  at::Tensor out_of_order = at::zeros({}, colptr.options().dtype(at::kLong));
  constexpr int64_t kChunk = int64_t{1} << 26;  // edge pairs per step
  for (int64_t lo = 0; lo + 1 < num_edges; lo += kChunk) {
    const int64_t hi = std::min(num_edges, lo + kChunk + 1);  // times of [lo, hi): pairs (e, e + 1), e < hi - 1
    at::Tensor time;
    if (node_time.defined()) time = node_time.index_select(0, row.slice(0, lo, hi));
    if (edge_time.defined()) {
      const at::Tensor e = edge_time.slice(0, lo, hi);
      time = time.defined() ? at::maximum(time, e) : e;
    }
    at::Tensor falls = time.slice(0, 1).lt(time.slice(0, 0, hi - lo - 1));  // [hi - lo - 1]: pair e at e - lo
    const at::Tensor ends = column_ends.masked_select((column_ends >= lo) & (column_ends < hi - 1)) - lo;
    falls.index_fill_(0, ends, false);
    out_of_order += falls.sum();
  }
  return out_of_order.item<int64_t>() == 0;
}

}  // namespace pyg_accel
