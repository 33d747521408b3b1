// Whether a temporal graph's columns are sorted by time, which lets a sampler find a
// node's eligible neighbours by binary search instead of a scan.
#pragma once

#include <ATen/ATen.h>

namespace pyg_accel {

// Whether every column of the CSC graph (colptr [N + 1], row [E], int64) lists its edges
// in ascending time, the time of edge e being max(node_time[row[e]], edge_time[e]) over
// the times given (int64 tensors on the graph's device, or undefined; false if neither
// is). Then the edges not later than any time limit are a prefix of each column. One
// pass over the edges (in chunks, so the scratch stays small), one host read.
bool columns_sorted_by_time(const at::Tensor& colptr, const at::Tensor& row, const at::Tensor& node_time,
                            const at::Tensor& edge_time);

}  // namespace pyg_accel
