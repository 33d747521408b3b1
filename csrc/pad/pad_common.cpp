#include "pad_common.h"

#include <string>

#include "../common/check_format.h"

namespace pyg_accel {

NodeLayout make_node_layout(at::IntArrayRef nodes, at::IntArrayRef padded_nodes, const char* what) {
  const int64_t G = static_cast<int64_t>(nodes.size());
  TORCH_CHECK(G >= 2 && G <= kMaxPadHops + 1, "pad_hops: ", what, " must have 2 to ", std::to_string(kMaxPadHops + 1),
              " entries (hops + 1), got ", std::to_string(G));
  TORCH_CHECK(static_cast<int64_t>(padded_nodes.size()) == G, "pad_hops: ", what, " and its padded counts must have ",
              "as many entries, got ", std::to_string(G), " and ", std::to_string(padded_nodes.size()));
  NodeLayout layout;
  layout.num_groups = G;
  int64_t real = 0, padded = 0;
  for (int64_t g = 0; g < G; ++g) {
    TORCH_CHECK(nodes[g] >= 0 && padded_nodes[g] > nodes[g], "pad_hops: hop ", std::to_string(g), " has ",
                std::to_string(nodes[g]), " ", what, " and ", std::to_string(padded_nodes[g]),
                " padded slots: each hop needs at least one padding node");
    layout.real_node_start[g] = real;
    layout.node_shift[g] = padded - real;
    layout.padded_start[g] = padded;
    layout.real_count[g] = nodes[g];
    layout.padded_count[g] = padded_nodes[g];
    real += nodes[g];
    padded += padded_nodes[g];
  }
  layout.real_node_start[G] = real;
  layout.num_real_nodes = real;
  layout.sink = padded - 1;
  return layout;
}

NodeLayout make_row_layout(const at::Tensor& x, at::IntArrayRef nodes, at::IntArrayRef padded_nodes,
                           const at::Tensor& x_out) {
  TORCH_CHECK(x.dim() == 2 && x_out.dim() == 2 && x.size(1) == x_out.size(1) && x.scalar_type() == x_out.scalar_type(),
              "pad_hops: x and x_out must be [N, F] matrices of one width and dtype, got ", shape_str(x.sizes()), " ",
              x.scalar_type(), " and ", shape_str(x_out.sizes()), " ", x_out.scalar_type());
  TORCH_CHECK(x_out.is_contiguous(), "pad_hops: x_out must be contiguous");
  TORCH_CHECK(x.device() == x_out.device(), "pad_hops: x and x_out must be on one device");
  const NodeLayout layout = make_node_layout(nodes, padded_nodes, "nodes");
  TORCH_CHECK(x.size(0) == layout.num_real_nodes, "pad_hops: x has ", std::to_string(x.size(0)),
              " rows, nodes adds up to ", std::to_string(layout.num_real_nodes));
  TORCH_CHECK(x_out.size(0) == layout.sink + 1, "pad_hops: x_out has ", std::to_string(x_out.size(0)),
              " rows, padded_nodes adds up to ", std::to_string(layout.sink + 1));
  return layout;
}

EdgeLayout make_edge_layout(const at::Tensor& edge_index, at::IntArrayRef edges, at::IntArrayRef padded_edges,
                            at::IntArrayRef src_nodes, at::IntArrayRef src_padded_nodes, at::IntArrayRef dst_nodes,
                            at::IntArrayRef dst_padded_nodes, const at::Tensor& edge_index_out) {
  const int64_t H = static_cast<int64_t>(edges.size());
  TORCH_CHECK(H >= 1 && H <= kMaxPadHops, "pad_hops: edges must have 1 to ", std::to_string(kMaxPadHops),
              " entries, got ", std::to_string(H));
  TORCH_CHECK(static_cast<int64_t>(padded_edges.size()) == H,
              "pad_hops: padded_edges must have as many entries as edges");
  TORCH_CHECK(static_cast<int64_t>(src_nodes.size()) == H + 1 && static_cast<int64_t>(dst_nodes.size()) == H + 1,
              "pad_hops: the node counts must have one entry more than edges (", std::to_string(H + 1), "), got ",
              std::to_string(src_nodes.size()), " and ", std::to_string(dst_nodes.size()));
  TORCH_CHECK(edge_index.dim() == 2 && edge_index.size(0) == 2 && edge_index.scalar_type() == at::kLong,
              "pad_hops: edge_index must be a [2, E] int64 tensor, got ", shape_str(edge_index.sizes()), " ",
              edge_index.scalar_type());
  TORCH_CHECK(edge_index_out.dim() == 2 && edge_index_out.size(0) == 2 && edge_index_out.scalar_type() == at::kLong &&
              edge_index_out.is_contiguous(), "pad_hops: edge_index_out must be a contiguous [2, E'] int64 tensor");
  TORCH_CHECK(edge_index.device() == edge_index_out.device(),
              "pad_hops: edge_index and edge_index_out must be on one device");
  EdgeLayout layout;
  layout.num_hops = H;
  layout.src = make_node_layout(src_nodes, src_padded_nodes, "source nodes");
  layout.dst = make_node_layout(dst_nodes, dst_padded_nodes, "destination nodes");
  int64_t real_edges = 0, padded_total = 0;
  for (int64_t k = 0; k < H; ++k) {
    TORCH_CHECK(edges[k] >= 0 && padded_edges[k] >= edges[k], "pad_hops: hop ", std::to_string(k + 1), " has ",
                std::to_string(edges[k]), " edges and ", std::to_string(padded_edges[k]), " padded slots");
    layout.real_edge_start[k] = real_edges;
    layout.padded_edge_start[k] = padded_total;
    layout.edge_count[k] = edges[k];
    layout.pad_dst_first[k] = layout.dst.padded_start[k] + layout.dst.real_count[k];  // destination group k's padding
    layout.pad_dst_count[k] = layout.dst.padded_count[k] - layout.dst.real_count[k];
    layout.pad_src_first[k] = layout.src.padded_start[k + 1] + layout.src.real_count[k + 1];  // source group k + 1's
    layout.pad_src_count[k] = layout.src.padded_count[k + 1] - layout.src.real_count[k + 1];
    layout.pad_edges[k] = padded_edges[k] - edges[k];
    real_edges += edges[k];
    padded_total += padded_edges[k];
  }
  layout.padded_edge_start[H] = padded_total;
  TORCH_CHECK(edge_index.size(1) == real_edges, "pad_hops: edge_index has ", std::to_string(edge_index.size(1)),
              " edges, edges adds up to ", std::to_string(real_edges));
  TORCH_CHECK(edge_index_out.size(1) == padded_total, "pad_hops: edge_index_out has ",
              std::to_string(edge_index_out.size(1)), " columns, padded_edges adds up to ",
              std::to_string(padded_total));
  return layout;
}

}  // namespace pyg_accel
