// Sampled batches padded hop by hop to fixed sizes (pad_hops; schema and semantics:
// csrc/ops.cpp). The per-hop offsets travel to the kernels by value in HopLayout.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace pyg_accel {

constexpr int kMaxPadHops = 16;  // hops of a padded batch (nodes: kMaxPadHops + 1 groups)

struct HopLayout {
  int64_t num_hops = 0;                        // H: edge groups; node groups are H + 1
  int64_t num_real_nodes = 0;                  // sum(nodes)
  int64_t sink = 0;                            // the last padding node: where an id out of range goes
  int64_t real_node_start[kMaxPadHops + 2];    // node group g spans [start[g], start[g + 1]) in x
  int64_t node_shift[kMaxPadHops + 1];         // its rows move by this much in x_out
  int64_t padded_edge_start[kMaxPadHops + 1];  // edge group k spans [start[k], start[k + 1]) in edge_index_out
  int64_t real_edge_start[kMaxPadHops];        // ... and starts here in edge_index
  int64_t edge_count[kMaxPadHops];             // ... with this many real edges
  int64_t pad_src[kMaxPadHops], pad_dst[kMaxPadHops];  // the endpoints of its padding edges
};

// Checks pad_hops' arguments (clear errors naming the argument) and lays out the hops.
HopLayout make_hop_layout(const at::Tensor& x, const at::Tensor& edge_index, at::IntArrayRef nodes,
                          at::IntArrayRef edges, at::IntArrayRef padded_nodes, at::IntArrayRef padded_edges,
                          const at::Tensor& x_out, const at::Tensor& edge_index_out);

// The padded id of node v (an id out of [0, num_real_nodes) goes to the sink).
#if defined(__CUDACC__)
__host__ __device__
#endif
inline int64_t padded_id(const HopLayout& layout, int64_t v) {
  if (v < 0 || v >= layout.num_real_nodes) return layout.sink;
  int64_t g = 0;
  while (g < layout.num_hops && v >= layout.real_node_start[g + 1]) ++g;
  return v + layout.node_shift[g];
}

}  // namespace pyg_accel
