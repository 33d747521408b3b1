// Every pyg_accel operator schema, in one place. Kernels register against
// these names from csrc/cpu (CPU key) and csrc/cuda (CUDA key); fake (meta)
// kernels and autograd are registered from Python (pyg_accel/ops/).
// This file is compiled and linked first (pyg_accel/_build.py), so its registrations,
// the TorchScript classes among them, run before the kernels' (a kernel returning a
// class needs the class registered).
#include <torch/custom_class.h>
#include <torch/library.h>

#include "sampling/started_sample.h"

TORCH_LIBRARY(pyg_accel, m) {
  // Rows of `table` ([N, *]) at `index` ([M], int32/int64) -> [M, *].
  // A CUDA index with a pinned host table reads the host memory directly.
  m.def("gather(Tensor table, Tensor index) -> Tensor");
  // One launch for several tables that share one index (e.g. x and y).
  m.def("multi_gather(Tensor[] tables, Tensor index) -> Tensor[]");
  // One logical table whose rows are split, in order, across `shards`
  // (device, pinned host or peer-GPU memory); one launch over all of them.
  m.def("sharded_gather(Tensor[] shards, Tensor index) -> Tensor");
  // A CUDA tensor (same shape, strides and dtype) over the memory of a pinned host tensor,
  // read by GPU `device` through its UVA mapping (zero-copy: every kernel read crosses the
  // bus). The result keeps the host tensor alive. Built with CUDA only; not for
  // torch.compile (an alias on another device).
  m.def("uva_view(Tensor self, int device) -> Tensor");
  // Page-locks a contiguous host tensor's memory in place (cudaHostRegister, mapped and
  // portable), e.g. a shared-memory mapping that pin_memory() would copy: the result
  // aliases it, is pinned (uva_view and the gather kernel read it), and unregisters the
  // memory when freed. An already pinned tensor comes back as it is. Built with CUDA only.
  m.def("host_register(Tensor self) -> Tensor");
  // Multi-hop uniform neighbour sampling over a CSC graph (colptr [num_dst + 1],
  // row [E]) from `seed` with PyG's semantics: node = seeds first (input order), then
  // each hop's new nodes in discovery order; row/col = local ids (row = sampled
  // neighbour, col = the node it was sampled for); edge = CSC positions; batch = the
  // seed index of every node (disjoint mode, else empty); per-hop node/edge counts.
  // `random_seed` keys a counter-based RNG: the same seed gives the same sample; None
  // draws one from torch's default CPU generator (hence the nondeterministic tag).
  // What the draws read besides the CSC comes in two lists (their order:
  // csrc/sampling/sampler_inputs.h, where a new bias adds its input): edge_bias =
  // [edge_weight, edge_time] and node_bias = [node_time], each entry optional (or either
  // list empty). `edge_weight` ([E], CSC order) makes sampling proportional to the weights.
  // Temporal sampling (disjoint only): a neighbour is eligible in seed i's tree when
  // node_time[neighbour] <= seed_time[i] and edge_time[edge] <= seed_time[i];
  // temporal_strategy 'uniform' draws among the eligible, 'last' takes the last
  // eligible ones in CSC order (the caller sorts each column by time; the CUDA sampler
  // then binary-searches each column's eligible prefix: columns_sorted_by_time).
  m.def("neighbor_sample(Tensor colptr, Tensor row, Tensor seed, int[] num_neighbors, bool replace, "
        "bool disjoint, int? random_seed, Tensor?[] edge_bias, Tensor?[] node_bias, Tensor? seed_time=None, "
        "str temporal_strategy='uniform') -> (Tensor node, "
        "Tensor row, Tensor col, Tensor edge, Tensor batch, Tensor num_sampled_nodes, Tensor num_sampled_edges)",
        {at::Tag::nondeterministic_seeded});
  // Whether every column of a CSC graph lists its edges in ascending time, an edge's
  // time being the later of node_time[row[e]] and edge_time[e] (of those given; false if
  // neither is): then each column's edges not later than a seed's time are a prefix,
  // which both sampling kernels binary-search (they check this once per graph).
  m.def("columns_sorted_by_time(Tensor colptr, Tensor row, Tensor? node_time=None, Tensor? edge_time=None) -> bool");
  // Drops both CUDA samplers' cached plans (buffers and CUDA graphs; they are rebuilt on
  // the next call); returns how many were dropped.
  m.def("clear_sampler_plans() -> int");
  // Microseconds (wall clock) the calling thread spent waiting for the GPU in its last
  // CUDA neighbor_sample or hetero_neighbor_sample call (0 before any): the call's host
  // time is its wall time minus this.
  m.def("sampler_last_wait_us() -> float");
  // The same sample, started: on a GPU the op returns once the sample's kernels are
  // enqueued (the outputs' sizes are not known yet) and the result's finish() waits for
  // them and returns neighbor_sample's outputs; the caller's host work in between
  // overlaps the sampling. Started samples of one configuration are read in order: a
  // start first reads the counts of the previous unfinished one (waiting for it). On the
  // CPU the sample is made at once. Not for torch.compile (no fake kernel: a class result).
  m.class_<pyg_accel::StartedNeighborSample>("StartedNeighborSample")
      .def("finish", &pyg_accel::StartedNeighborSample::finish);
  m.def("neighbor_sample_start(Tensor colptr, Tensor row, Tensor seed, int[] num_neighbors, bool replace, "
        "bool disjoint, int? random_seed, Tensor?[] edge_bias, Tensor?[] node_bias, Tensor? seed_time=None, "
        "str temporal_strategy='uniform') -> __torch__.torch.classes.pyg_accel.StartedNeighborSample",
        {at::Tag::nondeterministic_seeded});
  // Heterogeneous version: node types 0..T-1 with num_nodes[t]; edge type r goes from
  // src_type[r] to dst_type[r] with CSC (colptr[r], row[r]); seed[t] per node type;
  // num_neighbors[r * num_hops + h] is edge type r's fanout at hop h. Each hop expands,
  // edge type by edge type, the nodes each type gained in the previous hop. Optional, as
  // in neighbor_sample, edge type by edge type and node type by node type: edge_bias
  // (edge type r's [edge_weight, edge_time] at 2r, 2r + 1: weighted draws, temporal),
  // node_bias (node type t's [node_time]) and seed_time[t] (temporal; needs disjoint; a
  // type without times is always eligible); each list is empty or full (entries maybe None).
  // Outputs: node ids per node type (node) and, in disjoint mode, their trees (batch;
  // an empty list otherwise); the sampled edges of all edge types in one tensor each
  // (row, col, edge: edge type 0's edges, hop by hop, then edge type 1's, ...; the
  // caller splits them by num_sampled_edges' row sums: one output each instead of three
  // per edge type, which is most of a small sample's host time); counts
  // num_sampled_nodes [T, num_hops + 1] and num_sampled_edges [R, num_hops] (CPU).
  m.def("hetero_neighbor_sample(int[] num_nodes, int[] src_type, int[] dst_type, Tensor[] colptr, Tensor[] row, "
        "Tensor[] seed, int[] num_neighbors, int num_hops, bool replace, bool disjoint, int? random_seed, "
        "Tensor?[] edge_bias, Tensor?[] node_bias, Tensor?[] seed_time, str temporal_strategy) -> "
        "(Tensor[] node, Tensor[] batch, Tensor row, Tensor col, Tensor edge, Tensor num_sampled_nodes, "
        "Tensor num_sampled_edges)",
        {at::Tag::nondeterministic_seeded});
  // hetero_neighbor_sample, started (as neighbor_sample_start).
  m.class_<pyg_accel::StartedHeteroSample>("StartedHeteroSample")
      .def("finish", &pyg_accel::StartedHeteroSample::finish);
  m.def("hetero_neighbor_sample_start(int[] num_nodes, int[] src_type, int[] dst_type, Tensor[] colptr, "
        "Tensor[] row, Tensor[] seed, int[] num_neighbors, int num_hops, bool replace, bool disjoint, "
        "int? random_seed, Tensor?[] edge_bias, Tensor?[] node_bias, Tensor?[] seed_time, str temporal_strategy) "
        "-> __torch__.torch.classes.pyg_accel.StartedHeteroSample",
        {at::Tag::nondeterministic_seeded});
  // Sparse-dense ops over a graph whose edges are sorted by destination: the edges of
  // destination d are [ptr[d], ptr[d + 1]); dst[e] / src[e] are edge e's endpoints
  // (int32 or int64, one dtype). Node features are [N, H, C] (H heads), per-edge values
  // [E, H]; values may be fp32, fp16 or bf16 (fp32 accumulation; fp64 stays fp64).
  // spmm reduces each destination's edges under `reduce`, into out [num_dst, H, C] with
  // num_dst = ptr.numel() - 1, in x's dtype:
  // - 'sum': out[d, h, :] = sum over d's edges e of weight[e, h] * x[src[e], h, :]
  //   (weight None: 1); 'mean': the same over max(1, in-degree of d);
  // - 'max' / 'min' (no weight): out[d, h, c] = the maximum / minimum over d's edges of
  //   x[src[e], h, c] (0 for a destination without edges, as PyG's scatter max / min;
  //   NaN propagates), and ties[d, h, c] (int32) = how many of d's edges reach it. Their
  //   backward runs on the same graph: grad_x[s, h, c] = sum over s's edges to d with
  //   x[s, h, c] == out[d, h, c] of grad[d, h, c] / ties[d, h, c], as PyG's scatter max /
  //   min (torch.scatter_reduce 'amax' / 'amin' into zeros): ties share the gradient
  //   evenly, and an extremum of exactly 0 counts the initial zero as one more tie.
  //   (CPU: in edge order, deterministic; CUDA: atomic sums.)
  // The second output is ties for 'max' / 'min', an empty int32 tensor otherwise.
  m.def("spmm(Tensor ptr, Tensor dst, Tensor src, Tensor? weight, Tensor x, str reduce=\"sum\") -> (Tensor, Tensor)");
  m.def("spmm_extremum_backward(Tensor ptr, Tensor dst, Tensor src, Tensor x, Tensor out, Tensor ties, Tensor grad) "
        "-> Tensor");
  // Building blocks of such a graph. csr_ptr: ptr [num_rows + 1] int64, ptr[r] = how
  // many keys are below r, for keys (int32 / int64) sorted and in [0, num_rows) (not
  // scanned): one binary search per row. mean_edge_weight: [E] 1 / max(1, in-degree of
  // dst[e]) in dtype (floating), the weights that make a weighted sum the mean.
  m.def("csr_ptr(Tensor key, int num_rows) -> Tensor");
  // A sampled batch padded hop by hop into fixed-size buffers (a captured CUDA graph's
  // inputs), one node type's rows and one edge type's edges at a time. pad_hop_rows: x
  // [N, F] lists its rows in groups of nodes[g] (g = 0..H, the seeds first); group g's
  // rows move to x_out [sum(padded_nodes), F] at its padded start (rows past them
  // untouched; padded_nodes[g] > nodes[g]: every group has a padding node).
  // pad_hop_edges: edge_index [2, E] int64 lists edges in groups of edges[k] (k = 0..H-1,
  // hop k + 1's edges, from source nodes to destination group k's nodes); group k's edges
  // go, ids remapped as the rows of their node types (src_* and dst_* counts: the same in
  // a homogeneous batch), to the start of its slots in edge_index_out
  // [2, sum(padded_edges)], and the rest of its slots get padding edges from the padding
  // nodes of source group k + 1 to those of destination group k, spread evenly: padding
  // edge p of q runs from padding source p mod S to padding destination p * D / q (S / D:
  // the groups' padding nodes), so they stay sorted by destination and no padding node
  // gets a long row. Ids outside the real nodes go to the type's last padding node
  // (callers check untrusted input first).
  m.def("pad_hop_rows(Tensor x, int[] nodes, int[] padded_nodes, Tensor(a!) x_out) -> ()");
  m.def("pad_hop_edges(Tensor edge_index, int[] edges, int[] padded_edges, int[] src_nodes, int[] src_padded_nodes, "
        "int[] dst_nodes, int[] dst_padded_nodes, Tensor(a!) edge_index_out) -> ()");
  m.def("mean_edge_weight(Tensor ptr, Tensor dst, ScalarType dtype) -> Tensor");
  // The same sum added into an existing out ([num_dst, H, C], x's dtype, contiguous):
  // out[d] += ..., rows of destinations without edges untouched (a second edge set
  // aggregated into the rows a first SpMM wrote, e.g. after a halo exchange).
  m.def("spmm_add_(Tensor(a!) out, Tensor ptr, Tensor dst, Tensor src, Tensor? weight, Tensor x) -> ()");
  // SpMM over the reversed edges without building the reversed graph: out[s, h, :] =
  // sum over edges e with src[e] = s of weight[e, h] * x[dst[e], h, :], for x
  // [num_dst, H, C]; out is [num_src, H, C] in x's dtype (SpMM's gradient with respect to
  // its input). Ids in src must be below num_src (not scanned). CPU: a loop over the
  // edges in order per feature slice (deterministic: the sums of an SpMM over the
  // reversed graph, bit for bit); CUDA: atomic sums, no sort.
  m.def("spmm_transposed(Tensor ptr, Tensor dst, Tensor src, Tensor? weight, Tensor x, int num_src) -> Tensor");
  // out[e, h] = sum_c a[dst[e], h, c] * b[src[e], h, c]  ([E, H], in a's dtype).
  m.def("sddmm(Tensor ptr, Tensor dst, Tensor src, Tensor a, Tensor b) -> Tensor");
  // Softmax of logits [E, H] over each destination's edges, as PyG's softmax:
  // exp(l - max) / (sum exp(l - max) + 1e-16); and its backward y * (g - sum(y * g)).
  m.def("edge_softmax(Tensor ptr, Tensor logits) -> Tensor");
  m.def("edge_softmax_backward(Tensor ptr, Tensor out, Tensor grad) -> Tensor");
  // Reverse Cuthill-McKee order of the subgraph induced by the nodes [lo, hi) of a
  // symmetric CSR graph (rowptr [N + 1], col [nnz]; edges leaving the range and
  // self-loops ignored): the range's node ids, [hi - lo] int64, in their new order
  // (CPU; a bandwidth-reducing order for locality and for contiguous partitions).
  m.def("rcm_order(Tensor rowptr, Tensor col, int lo, int hi) -> Tensor");
}
