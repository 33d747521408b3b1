// Whether a temporal graph's columns are sorted by time, which lets a sampler find a
// node's eligible neighbours by binary search instead of a scan.
#pragma once

#include <ATen/ATen.h>

#include <array>

namespace pyg_accel {

// Whether every column of the CSC graph (colptr [N + 1], row [E], int64) lists its edges
// in ascending time, the time of edge e being max(node_time[row[e]], edge_time[e]) over
// the times given (int64 tensors on the graph's device, or undefined; false if neither
// is). Then the edges not later than any time limit are a prefix of each column. A row
// outside node_time's range raises an IndexError (before a sampling kernel reads its
// time). One pass over the edges (in chunks, so the scratch stays small), one host read.
bool columns_sorted_by_time(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& node_time,
                            const at::Tensor& edge_time);

// columns_sorted_by_time, computed the first time the caller's tensors `given`
// (colptr, row, node time, edge time as passed to the op, undefined where absent: the
// memo's key) are seen, then remembered while the caller passes the same, unmodified
// ones (a graph's order is checked once, not per sample). The other arguments are
// their int64 contiguous forms.
bool remembered_columns_sorted_by_time(const std::array<at::Tensor, 4>& given, const at::Tensor& colptr,
                                       const at::Tensor& row, const at::Tensor& node_time,
                                       const at::Tensor& edge_time);

}  // namespace pyg_accel
