#include "pad_common.h"

namespace pyg_accel {

HopLayout make_hop_layout(const at::Tensor& x, const at::Tensor& edge_index, at::IntArrayRef nodes,
                          at::IntArrayRef edges, at::IntArrayRef padded_nodes, at::IntArrayRef padded_edges,
                          const at::Tensor& x_out, const at::Tensor& edge_index_out) {
  const int64_t H = static_cast<int64_t>(edges.size());
  TORCH_CHECK(H >= 1 && H <= kMaxPadHops, "pad_hops: edges must have 1 to ", kMaxPadHops, " entries, got ", H);
  TORCH_CHECK(static_cast<int64_t>(nodes.size()) == H + 1, "pad_hops: nodes must have one entry more than edges (",
              H + 1, "), got ", nodes.size());
  TORCH_CHECK(padded_nodes.size() == nodes.size() && padded_edges.size() == edges.size(),
              "pad_hops: padded_nodes / padded_edges must have as many entries as nodes / edges");
  TORCH_CHECK(x.dim() == 2 && x_out.dim() == 2 && x.size(1) == x_out.size(1) && x.scalar_type() == x_out.scalar_type(),
              "pad_hops: x and x_out must be [N, F] matrices of one width and dtype, got ", x.sizes(), " ",
              x.scalar_type(), " and ", x_out.sizes(), " ", x_out.scalar_type());
  TORCH_CHECK(edge_index.dim() == 2 && edge_index.size(0) == 2 && edge_index.scalar_type() == at::kLong,
              "pad_hops: edge_index must be a [2, E] int64 tensor, got ", edge_index.sizes(), " ",
              edge_index.scalar_type());
  TORCH_CHECK(edge_index_out.dim() == 2 && edge_index_out.size(0) == 2 && edge_index_out.scalar_type() == at::kLong &&
              edge_index_out.is_contiguous(), "pad_hops: edge_index_out must be a contiguous [2, E'] int64 tensor");
  TORCH_CHECK(x_out.is_contiguous(), "pad_hops: x_out must be contiguous");
  TORCH_CHECK(x.device() == x_out.device() && edge_index.device() == x.device() &&
              edge_index_out.device() == x.device(), "pad_hops: every tensor must be on one device");
  HopLayout layout;
  layout.num_hops = H;
  int64_t real = 0, padded = 0;
  for (int64_t g = 0; g <= H; ++g) {
    TORCH_CHECK(nodes[g] >= 0 && padded_nodes[g] > nodes[g], "pad_hops: hop ", g, " has ", nodes[g],
                " nodes and ", padded_nodes[g], " padded slots: each hop needs at least one padding node");
    layout.real_node_start[g] = real;
    layout.node_shift[g] = padded - real;
    real += nodes[g];
    padded += padded_nodes[g];
  }
  layout.real_node_start[H + 1] = real;
  layout.num_real_nodes = real;
  layout.sink = padded - 1;
  TORCH_CHECK(x.size(0) == real, "pad_hops: x has ", x.size(0), " rows, nodes adds up to ", real);
  TORCH_CHECK(x_out.size(0) == padded, "pad_hops: x_out has ", x_out.size(0), " rows, padded_nodes adds up to ",
              padded);
  int64_t real_edges = 0, padded_total = 0, node_end = 0;
  for (int64_t k = 0; k < H; ++k) {
    TORCH_CHECK(edges[k] >= 0 && padded_edges[k] >= edges[k], "pad_hops: hop ", k + 1, " has ", edges[k],
                " edges and ", padded_edges[k], " padded slots");
    layout.real_edge_start[k] = real_edges;
    layout.padded_edge_start[k] = padded_total;
    layout.edge_count[k] = edges[k];
    layout.pad_dst_first[k] = node_end + nodes[k];  // the padding nodes of node group k
    layout.pad_dst_count[k] = padded_nodes[k] - nodes[k];
    node_end += padded_nodes[k];
    layout.pad_src_first[k] = node_end + nodes[k + 1];  // ... and of node group k + 1
    layout.pad_src_count[k] = padded_nodes[k + 1] - nodes[k + 1];
    layout.pad_edges[k] = padded_edges[k] - edges[k];
    real_edges += edges[k];
    padded_total += padded_edges[k];
  }
  layout.padded_edge_start[H] = padded_total;
  TORCH_CHECK(edge_index.size(1) == real_edges, "pad_hops: edge_index has ", edge_index.size(1),
              " edges, edges adds up to ", real_edges);
  TORCH_CHECK(edge_index_out.size(1) == padded_total, "pad_hops: edge_index_out has ", edge_index_out.size(1),
              " columns, padded_edges adds up to ", padded_total);
  return layout;
}

}  // namespace pyg_accel
