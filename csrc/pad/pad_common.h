// Sampled batches padded hop by hop to fixed sizes (pad_hop_rows, pad_hop_edges; schemas
// and semantics: csrc/ops.cpp). The per-hop offsets travel to the kernels by value, in a
// NodeLayout (one node type's groups) and an EdgeLayout (one edge type's groups, between
// the layouts of its source and destination node types: one and the same in a
// homogeneous batch).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "../common/host_device.h"

namespace pyg_accel {

constexpr int kMaxPadHops = 16;  // hops of a padded batch (nodes: kMaxPadHops + 1 groups)

struct NodeLayout {
  int64_t num_groups = 0;                      // H + 1
  int64_t num_real_nodes = 0;                  // sum(nodes)
  int64_t sink = 0;                            // the last padding node: where an id out of range goes
  int64_t real_node_start[kMaxPadHops + 2];    // node group g spans [start[g], start[g + 1]) of the rows
  int64_t node_shift[kMaxPadHops + 1];         // its rows move by this much in the padded rows
  int64_t padded_start[kMaxPadHops + 1];       // ... where it starts among them
  int64_t real_count[kMaxPadHops + 1];         // nodes[g]
  int64_t padded_count[kMaxPadHops + 1];       // padded_nodes[g]
};

struct EdgeLayout {
  int64_t num_hops = 0;                        // H: edge groups
  NodeLayout src, dst;                         // the node types the edges start and end at
  int64_t padded_edge_start[kMaxPadHops + 1];  // edge group k spans [start[k], start[k + 1]) in edge_index_out
  int64_t real_edge_start[kMaxPadHops];        // ... and starts here in edge_index
  int64_t edge_count[kMaxPadHops];             // ... with this many real edges
  // Its padding edges run from the padding nodes of source group k + 1 (pad_src_first, as
  // many as pad_src_count, taken in turn) to those of destination group k (pad_dst_count
  // of them from pad_dst_first, in order: the edges stay sorted by destination), spread
  // evenly so that no padding node gets a long row (a row-parallel kernel's straggler).
  int64_t pad_src_first[kMaxPadHops], pad_src_count[kMaxPadHops];
  int64_t pad_dst_first[kMaxPadHops], pad_dst_count[kMaxPadHops];
  int64_t pad_edges[kMaxPadHops];  // padding edges of group k
};

// Checks a node type's counts (clear errors naming `what`, e.g. "nodes") and lays out its
// groups: `num_groups` of them, each with at least one padding slot.
NodeLayout make_node_layout(at::IntArrayRef nodes, at::IntArrayRef padded_nodes, const char* what);

// Checks pad_hop_rows' arguments and lays out the rows.
NodeLayout make_row_layout(const at::Tensor& x, at::IntArrayRef nodes, at::IntArrayRef padded_nodes,
                           const at::Tensor& x_out);

// Checks pad_hop_edges' arguments and lays out the edges.
EdgeLayout make_edge_layout(const at::Tensor& edge_index, at::IntArrayRef edges, at::IntArrayRef padded_edges,
                            at::IntArrayRef src_nodes, at::IntArrayRef src_padded_nodes, at::IntArrayRef dst_nodes,
                            at::IntArrayRef dst_padded_nodes, const at::Tensor& edge_index_out);

// The padded id of node v (an id out of [0, num_real_nodes) goes to the sink).
PYG_ACCEL_HD int64_t padded_id(const NodeLayout& layout, int64_t v) {
  if (v < 0 || v >= layout.num_real_nodes) return layout.sink;
  int64_t g = 0;
  while (g + 1 < layout.num_groups && v >= layout.real_node_start[g + 1]) ++g;
  return v + layout.node_shift[g];
}

// Column c, of edge group k, of the padded edge_index out ([2, num_out]): a real edge of
// edge_index ([2, num_edges]) with its ids remapped, or a padding edge.
PYG_ACCEL_HD void write_padded_column(const EdgeLayout& layout, int64_t k, int64_t c, const int64_t* edge_index,
                                      int64_t num_edges, int64_t* out, int64_t num_out) {
  const int64_t j = c - layout.padded_edge_start[k];
  if (j < layout.edge_count[k]) {
    const int64_t e = layout.real_edge_start[k] + j;
    out[c] = padded_id(layout.src, edge_index[e]);
    out[num_out + c] = padded_id(layout.dst, edge_index[num_edges + e]);
  } else {  // padding edge p of q: destination p * count / q (non-decreasing), sources in turn
    const int64_t p = j - layout.edge_count[k];
    out[c] = layout.pad_src_first[k] + p % layout.pad_src_count[k];
    out[num_out + c] = layout.pad_dst_first[k] + p * layout.pad_dst_count[k] / layout.pad_edges[k];
  }
}

}  // namespace pyg_accel
