#include "time_order.h"

#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <string>

#include "../common/tensor_id.h"

namespace pyg_accel {

namespace {

// Raises an IndexError if a row is outside node_time (before a kernel reads its time).
// (A min and max: no scratch the size of the graph.)
void check_rows_in(const at::Tensor& row, const at::Tensor& node_time) {
  if (row.numel() == 0) return;
  const auto [lo_t, hi_t] = at::aminmax(row);
  const int64_t lo = lo_t.item<int64_t>(), hi = hi_t.item<int64_t>();
  TORCH_CHECK_INDEX(lo >= 0 && hi < node_time.numel(), "row holds node ", std::to_string(lo < 0 ? lo : hi),
                    ", outside the ", std::to_string(node_time.numel()), " entries of node_time");
}

}  // namespace

bool columns_sorted_by_time(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& node_time,
                            const at::Tensor& edge_time) {
  if (!node_time.defined() && !edge_time.defined()) return false;
  if (node_time.defined()) check_rows_in(row, node_time);
  const int64_t num_edges = row.numel();
  if (num_edges < 2) return true;
  // The times of `rows` (edge positions p: row[p]) and of their edges' times `edges`.
  const auto times = [&](const at::Tensor& rows, const at::Tensor& edges) {
    at::Tensor time;
    if (node_time.defined()) time = node_time.index_select(0, rows);
    if (edge_time.defined()) time = time.defined() ? at::maximum(time, edges) : edges;
    return time;
  };
  const auto times_at = [&](const at::Tensor& p) {
    return times(row.index_select(0, p), edge_time.defined() ? edge_time.index_select(0, p) : at::Tensor());
  };
  // Falls (an edge later than the next one) over all pairs (e, e + 1), in chunks...
  at::Tensor falls = at::zeros({}, colptr.options().dtype(at::kLong));
  constexpr int64_t kChunk = int64_t{1} << 26;  // pairs per step
  for (int64_t lo = 0; lo + 1 < num_edges; lo += kChunk) {
    const int64_t hi = std::min(num_edges, lo + kChunk + 1);  // edges [lo, hi): pairs (e, e + 1), e < hi - 1
    const at::Tensor time =
        times(row.slice(0, lo, hi), edge_time.defined() ? edge_time.slice(0, lo, hi) : at::Tensor());
    falls += time.slice(0, 1).lt(time.slice(0, 0, hi - lo - 1)).sum();
  }
  // ...less those across a column boundary: e the last edge of a column, e + 1 < E (each
  // once: empty columns repeat a start).
  const at::Tensor starts = colptr.slice(0, 1, colptr.numel() - 1).to(row.options());
  const at::Tensor last =
      std::get<0>(at::unique_consecutive(starts.masked_select((starts > 0) & (starts < num_edges)))) - 1;
  if (last.numel() > 0) falls -= times_at(last + 1).lt(times_at(last)).sum();
  return falls.item<int64_t>() == 0;
}

bool remembered_columns_sorted_by_time(const std::array<at::Tensor, 4>& given, const at::Tensor& colptr,
                                       const at::Tensor& row, const at::Tensor& node_time,
                                       const at::Tensor& edge_time) {
  if (!node_time.defined() && !edge_time.defined()) return false;
  static DerivedMemo<bool> memo;
  DerivedMemo<bool>::Key key;
  for (const at::Tensor& t : given) key.push_back(TensorId::of(&t));
  return memo.get(key, [&] { return columns_sorted_by_time(colptr, row, node_time, edge_time); });
}

namespace {

bool columns_sorted_by_time_op(const at::Tensor& colptr, const at::Tensor& row,
                               const std::optional<at::Tensor>& node_time, const std::optional<at::Tensor>& edge_time) {
  TORCH_CHECK(colptr.dim() == 1 && colptr.numel() > 0 && row.dim() == 1,
              "columns_sorted_by_time: colptr must be [num_nodes + 1] and row [num_edges]");
  TORCH_CHECK(!edge_time.has_value() || edge_time->numel() == row.numel(),
              "columns_sorted_by_time: edge_time must have one entry per edge");
  const auto as_long = [](const std::optional<at::Tensor>& t) {
    return t.has_value() ? t->to(at::kLong).contiguous() : at::Tensor();
  };
  return columns_sorted_by_time(colptr.to(at::kLong).contiguous(), row.to(at::kLong).contiguous(),
                                as_long(node_time), as_long(edge_time));
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CompositeExplicitAutograd, m) {
  m.impl("columns_sorted_by_time", &columns_sorted_by_time_op);
}

}  // namespace pyg_accel
