// CPU pad_hop_rows / pad_hop_edges (schemas and semantics: csrc/ops.cpp): node rows copied
// group by group, edges remapped and padded column by column.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstring>

#include "../pad_common.h"

namespace pyg_accel {
namespace {

void pad_hop_rows_cpu(const at::Tensor& x_t, at::IntArrayRef nodes, at::IntArrayRef padded_nodes, at::Tensor& x_out) {
  const NodeLayout layout = make_row_layout(x_t, nodes, padded_nodes, x_out);
  const at::Tensor x = x_t.contiguous();
  const int64_t row_bytes = x.size(1) * x.element_size();
  const char* from = static_cast<const char*>(x.data_ptr());
  char* to = static_cast<char*>(x_out.data_ptr());
  for (int64_t g = 0; g < layout.num_groups; ++g) {
    const int64_t start = layout.real_node_start[g], count = layout.real_node_start[g + 1] - start;
    if (count > 0 && row_bytes > 0) {
      std::memmove(to + (start + layout.node_shift[g]) * row_bytes, from + start * row_bytes, count * row_bytes);
    }
  }
}

void pad_hop_edges_cpu(const at::Tensor& edge_index_t, at::IntArrayRef edges, at::IntArrayRef padded_edges,
                       at::IntArrayRef src_nodes, at::IntArrayRef src_padded_nodes, at::IntArrayRef dst_nodes,
                       at::IntArrayRef dst_padded_nodes, at::Tensor& edge_index_out) {
  const EdgeLayout layout = make_edge_layout(edge_index_t, edges, padded_edges, src_nodes, src_padded_nodes, dst_nodes,
                                             dst_padded_nodes, edge_index_out);
  const at::Tensor edge_index = edge_index_t.contiguous();
  const int64_t E = edge_index.size(1), E_out = edge_index_out.size(1);
  const int64_t* src = edge_index.data_ptr<int64_t>();
  int64_t* out = edge_index_out.data_ptr<int64_t>();
  at::parallel_for(0, layout.num_hops, 1, [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const int64_t first = layout.padded_edge_start[k], last = layout.padded_edge_start[k + 1];
      for (int64_t c = first; c < last; ++c) write_padded_column(layout, k, c, src, E, out, E_out);
    }
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CPU, m) {
  m.impl("pad_hop_rows", &pad_hop_rows_cpu);
  m.impl("pad_hop_edges", &pad_hop_edges_cpu);
}

}  // namespace pyg_accel
