// CUDA multi-hop neighbour sampling with PyG's semantics (see csrc/ops.cpp), v1.
//
// STATUS: compiled, not yet run on a GPU. pyg_accel.ops.neighbor_sample only routes
// CUDA graphs here when PYG_ACCEL_EXPERIMENTAL_CUDA_SAMPLER=1 until the tests have run.
//
// Every hop runs as a handful of asynchronous launches with no host synchronisation:
// buffers are sized by host-side upper bounds (batch x product of fanouts), and the
// kernels read the actual sizes from device scalars. The counts are read once, after
// the last hop. Draws use the CPU kernel's counter-based RNG and Floyd's algorithm,
// and dedup keeps first-seen order (an atomicMin of the edge position per hash slot),
// so a seed gives the same sample on the CPU and the GPU.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "../sampling_rng.h"

namespace pyg_accel {
namespace {

constexpr int kBlock = 256;
constexpr unsigned long long kEmpty = ~0ull;

// Open addressing over 64-bit keys; returns the key's slot (inserting it if new).
__device__ __forceinline__ int64_t hash_insert(unsigned long long* keys, int64_t mask, unsigned long long key) {
  int64_t slot = static_cast<int64_t>(mix64(key) & static_cast<uint64_t>(mask));
  while (true) {
    const unsigned long long prev = atomicCAS(keys + slot, kEmpty, key);
    if (prev == kEmpty || prev == key) return slot;
    slot = (slot + 1) & mask;
  }
}

struct Table {
  unsigned long long* keys;
  int64_t* first_pos;  // smallest position that reached the key in the current hop
  int64_t* local_id;   // -1 until the key's node is numbered
  int64_t mask;
};

// Seeds: insert, remember the first index of each key.
__global__ void seed_insert_kernel(const int64_t* seed, int64_t num_seeds, bool disjoint, int64_t stride, Table t,
                                   int64_t* slot_of) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= num_seeds) return;
  const unsigned long long key = disjoint ? static_cast<unsigned long long>(i * stride + seed[i])
                                          : static_cast<unsigned long long>(seed[i]);
  const int64_t slot = hash_insert(t.keys, t.mask, key);
  slot_of[i] = slot;
  atomicMin(reinterpret_cast<unsigned long long*>(t.first_pos + slot), static_cast<unsigned long long>(i));
}

// is_new[p]: position p is the first to reach a node that has no local id yet.
__global__ void flag_new_kernel(const int64_t* slot_of, const int64_t* count_ptr, int64_t bound, Table t,
                                int64_t* is_new) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= bound) return;
  const int64_t count = count_ptr == nullptr ? bound : *count_ptr;
  is_new[p] = p < count && t.local_id[slot_of[p]] < 0 && t.first_pos[slot_of[p]] == p;
}

// Numbers the new nodes (first-seen order) and records them as the next frontier.
__global__ void assign_kernel(const int64_t* is_new, const int64_t* rank, const int64_t* slot_of,
                              const int64_t* global_id, const int64_t* batch_of, int64_t bound,
                              const int64_t* node_count, Table t, int64_t* node, int64_t* batch, int64_t* frontier) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= bound || !is_new[p]) return;
  const int64_t id = *node_count + rank[p];
  t.local_id[slot_of[p]] = id;
  node[id] = global_id[p];
  batch[id] = batch_of[p];
  frontier[rank[p]] = id;
}

// Per frontier node: how many neighbours it draws (0 past the frontier's size).
__global__ void count_kernel(const int64_t* colptr, const int64_t* node, const int64_t* frontier,
                             const int64_t* frontier_size, int64_t bound, int64_t fanout, bool replace,
                             int64_t* counts) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= bound) return;
  if (i >= *frontier_size) {
    counts[i] = 0;
    return;
  }
  const int64_t v = node[frontier[i]];
  counts[i] = num_to_draw(fanout, colptr[v + 1] - colptr[v], replace);
}

// Draws each frontier node's neighbours (same algorithm and RNG as the CPU kernel) and
// resolves every drawn edge to its neighbour, tree and hash slot.
__global__ void draw_kernel(const int64_t* colptr, const int64_t* row, const int64_t* node, const int64_t* batch,
                            const int64_t* frontier, const int64_t* frontier_size, const int64_t* offsets,
                            const int64_t* counts, int64_t bound, int64_t fanout, bool replace, uint64_t key_of_hop,
                            bool disjoint, int64_t stride, Table t, int64_t* pos, int64_t* seg, int64_t* nbr,
                            int64_t* tree, int64_t* slot_of) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= bound || i >= *frontier_size) return;
  const int64_t v = node[frontier[i]];
  const int64_t start = colptr[v], degree = colptr[v + 1] - start, k = counts[i];
  const uint64_t key = slot_key(key_of_hop, i);
  int64_t* out = pos + (offsets[i] - k);  // offsets are inclusive sums
  if (k == degree && (fanout < 0 || !replace)) {
    for (int64_t j = 0; j < degree; ++j) out[j] = start + j;
  } else if (replace) {
    for (int64_t j = 0; j < k; ++j) out[j] = start + uniform_below(key, j, degree);
  } else {
    for (int64_t j = degree - k, n = 0; j < degree; ++j, ++n) {  // Floyd
      int64_t cand = start + uniform_below(key, j, j + 1);
      for (int64_t q = 0; q < n; ++q) {
        if (out[q] == cand) {
          cand = start + j;
          break;
        }
      }
      out[n] = cand;
    }
  }
  const int64_t b = batch[frontier[i]];
  for (int64_t j = 0; j < k; ++j) {
    const int64_t p = offsets[i] - k + j;
    const int64_t u = row[out[j]];
    seg[p] = i;
    nbr[p] = u;
    tree[p] = b;
    const unsigned long long hkey = disjoint ? static_cast<unsigned long long>(b * stride + u)
                                             : static_cast<unsigned long long>(u);
    const int64_t slot = hash_insert(t.keys, t.mask, hkey);
    slot_of[p] = slot;
    if (t.local_id[slot] < 0) {
      atomicMin(reinterpret_cast<unsigned long long*>(t.first_pos + slot), static_cast<unsigned long long>(p));
    }
  }
}

__global__ void edges_kernel(const int64_t* slot_of, const int64_t* seg, const int64_t* frontier,
                             const int64_t* edge_count, int64_t bound, Table t, int64_t* out_row, int64_t* out_col) {
  const int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (p >= bound || p >= *edge_count) return;
  out_row[p] = t.local_id[slot_of[p]];
  out_col[p] = frontier[seg[p]];
}

// node_count += new; frontier_size = new; record the hop's counts.
__global__ void advance_kernel(const int64_t* rank_inclusive, int64_t bound, int64_t* node_count,
                               int64_t* frontier_size, int64_t* nodes_per_hop, int64_t hop) {
  const int64_t added = bound > 0 ? rank_inclusive[bound - 1] : 0;
  *node_count += added;
  *frontier_size = added;
  nodes_per_hop[hop] = added;
}

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, (n + kBlock - 1) / kBlock)); }

using SampleOutput = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;

SampleOutput neighbor_sample_cuda(const at::Tensor& colptr_t, const at::Tensor& row_t, const at::Tensor& seed_t,
                                  at::IntArrayRef num_neighbors, bool replace, bool disjoint, int64_t random_seed,
                                  const std::optional<at::Tensor>& edge_weight,
                                  const std::optional<at::Tensor>& node_time,
                                  const std::optional<at::Tensor>& edge_time,
                                  const std::optional<at::Tensor>& seed_time, c10::string_view temporal_strategy) {
  TORCH_CHECK(!edge_weight.has_value() && !node_time.has_value() && !edge_time.has_value(),
              "neighbor_sample: weighted and temporal sampling are not implemented on CUDA yet");
  TORCH_CHECK(colptr_t.is_cuda() && row_t.is_cuda() && seed_t.is_cuda(),
              "neighbor_sample: colptr, row and seed must be on one GPU");
  const c10::cuda::CUDAGuard guard(colptr_t.device());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const at::Tensor colptr = colptr_t.contiguous(), row = row_t.contiguous(), seed = seed_t.contiguous();
  const auto opts = colptr.options().dtype(at::kLong);
  const int64_t num_nodes = colptr.numel() - 1, num_edges = row.numel(), num_seeds = seed.numel();
  const int64_t stride = std::max<int64_t>(num_nodes, 1);
  const int64_t hops = static_cast<int64_t>(num_neighbors.size());

  // Host-side upper bounds (one sync for the maximum degree, only if a fanout is -1).
  int64_t max_degree = 0;
  for (int64_t f : num_neighbors) {
    if (f < 0 && num_nodes > 0) {
      max_degree = (colptr.slice(0, 1) - colptr.slice(0, 0, num_nodes)).max().item<int64_t>();
      break;
    }
  }
  std::vector<int64_t> frontier_bound{num_seeds}, edge_bound;
  int64_t node_bound = num_seeds;
  for (int64_t h = 0; h < hops; ++h) {
    const int64_t f = num_neighbors[h];
    int64_t e = frontier_bound.back() * (f >= 0 ? f : max_degree);
    if (!disjoint && !(replace && f >= 0)) e = std::min(e, num_edges);  // each edge drawn at most once
    edge_bound.push_back(e);
    const int64_t next = disjoint ? e : std::min(e, num_nodes);
    frontier_bound.push_back(next);
    node_bound += next;
  }
  if (!disjoint) node_bound = std::min(node_bound, std::max<int64_t>(num_nodes, num_seeds));
  int64_t capacity = 1;
  while (capacity < 2 * std::max<int64_t>(node_bound, 1)) capacity <<= 1;

  at::Tensor keys = at::full({capacity}, -1, opts);  // all bits set = kEmpty
  at::Tensor first_pos = at::full({capacity}, std::numeric_limits<int64_t>::max(), opts);
  at::Tensor local_id = at::full({capacity}, -1, opts);
  Table t{reinterpret_cast<unsigned long long*>(keys.data_ptr<int64_t>()), first_pos.data_ptr<int64_t>(),
          local_id.data_ptr<int64_t>(), capacity - 1};
  at::Tensor node = at::empty({std::max<int64_t>(node_bound, 1)}, opts);
  at::Tensor batch = at::empty({std::max<int64_t>(node_bound, 1)}, opts);
  at::Tensor scalars = at::zeros({2}, opts);  // node_count, frontier_size
  int64_t* node_count = scalars.data_ptr<int64_t>();
  int64_t* frontier_size = node_count + 1;
  at::Tensor nodes_per_hop = at::zeros({hops + 1}, opts), edges_per_hop = at::zeros({std::max<int64_t>(hops, 1)}, opts);

  // Hop 0: the seeds.
  at::Tensor slot_of = at::empty({std::max<int64_t>(num_seeds, 1)}, opts);
  at::Tensor seed_index = at::arange(num_seeds, opts);
  seed_insert_kernel<<<grid_for(num_seeds), kBlock, 0, stream>>>(seed.data_ptr<int64_t>(), num_seeds, disjoint,
                                                                  stride, t, slot_of.data_ptr<int64_t>());
  at::Tensor is_new = at::empty({std::max<int64_t>(num_seeds, 1)}, opts);
  flag_new_kernel<<<grid_for(num_seeds), kBlock, 0, stream>>>(slot_of.data_ptr<int64_t>(), nullptr, num_seeds, t,
                                                               is_new.data_ptr<int64_t>());
  at::Tensor inclusive = at::cumsum(is_new.slice(0, 0, num_seeds), 0);
  at::Tensor rank = inclusive - is_new.slice(0, 0, num_seeds);
  at::Tensor frontier = at::empty({std::max<int64_t>(num_seeds, 1)}, opts);
  assign_kernel<<<grid_for(num_seeds), kBlock, 0, stream>>>(
      is_new.data_ptr<int64_t>(), rank.data_ptr<int64_t>(), slot_of.data_ptr<int64_t>(), seed.data_ptr<int64_t>(),
      seed_index.data_ptr<int64_t>(), num_seeds, node_count, t, node.data_ptr<int64_t>(), batch.data_ptr<int64_t>(),
      frontier.data_ptr<int64_t>());
  advance_kernel<<<1, 1, 0, stream>>>(inclusive.data_ptr<int64_t>(), num_seeds, node_count, frontier_size,
                                      nodes_per_hop.data_ptr<int64_t>(), 0);
  C10_CUDA_KERNEL_LAUNCH_CHECK();

  std::vector<at::Tensor> rows, cols, edges;
  for (int64_t h = 0; h < hops; ++h) {
    const int64_t fb = std::max<int64_t>(frontier_bound[h], 1), eb = std::max<int64_t>(edge_bound[h], 1);
    at::Tensor counts = at::empty({fb}, opts);
    count_kernel<<<grid_for(fb), kBlock, 0, stream>>>(colptr.data_ptr<int64_t>(), node.data_ptr<int64_t>(),
                                                       frontier.data_ptr<int64_t>(), frontier_size, fb,
                                                       num_neighbors[h], replace, counts.data_ptr<int64_t>());
    at::Tensor offsets = at::cumsum(counts, 0);  // inclusive
    at::Tensor edge_count = offsets.slice(0, fb - 1, fb);
    edges_per_hop.slice(0, h, h + 1).copy_(edge_count);
    at::Tensor pos = at::empty({eb}, opts), seg = at::empty({eb}, opts), nbr = at::empty({eb}, opts),
               tree = at::empty({eb}, opts);
    slot_of = at::empty({eb}, opts);
    const uint64_t key_of_hop = hop_key(random_seed, h);
    draw_kernel<<<grid_for(fb), kBlock, 0, stream>>>(
        colptr.data_ptr<int64_t>(), row.data_ptr<int64_t>(), node.data_ptr<int64_t>(), batch.data_ptr<int64_t>(),
        frontier.data_ptr<int64_t>(), frontier_size, offsets.data_ptr<int64_t>(), counts.data_ptr<int64_t>(), fb,
        num_neighbors[h], replace, key_of_hop, disjoint, stride, t, pos.data_ptr<int64_t>(), seg.data_ptr<int64_t>(),
        nbr.data_ptr<int64_t>(), tree.data_ptr<int64_t>(), slot_of.data_ptr<int64_t>());
    is_new = at::empty({eb}, opts);
    flag_new_kernel<<<grid_for(eb), kBlock, 0, stream>>>(slot_of.data_ptr<int64_t>(), edge_count.data_ptr<int64_t>(),
                                                          eb, t, is_new.data_ptr<int64_t>());
    inclusive = at::cumsum(is_new, 0);
    rank = inclusive - is_new;
    at::Tensor next = at::empty({std::max<int64_t>(frontier_bound[h + 1], 1)}, opts);
    assign_kernel<<<grid_for(eb), kBlock, 0, stream>>>(
        is_new.data_ptr<int64_t>(), rank.data_ptr<int64_t>(), slot_of.data_ptr<int64_t>(), nbr.data_ptr<int64_t>(),
        tree.data_ptr<int64_t>(), eb, node_count, t, node.data_ptr<int64_t>(), batch.data_ptr<int64_t>(),
        next.data_ptr<int64_t>());
    at::Tensor out_row = at::empty({eb}, opts), out_col = at::empty({eb}, opts);
    edges_kernel<<<grid_for(eb), kBlock, 0, stream>>>(slot_of.data_ptr<int64_t>(), seg.data_ptr<int64_t>(),
                                                       frontier.data_ptr<int64_t>(), edge_count.data_ptr<int64_t>(),
                                                       eb, t, out_row.data_ptr<int64_t>(), out_col.data_ptr<int64_t>());
    advance_kernel<<<1, 1, 0, stream>>>(inclusive.data_ptr<int64_t>(), eb, node_count, frontier_size,
                                        nodes_per_hop.data_ptr<int64_t>(), h + 1);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // first_pos only matters for keys without a local id; after this hop every key has one.
    rows.push_back(out_row);
    cols.push_back(out_col);
    edges.push_back(pos);
    frontier = next;
  }

  // The one host read: per-hop counts, to cut the upper-bound buffers (returned on the host).
  const at::Tensor counts_host = at::cat({nodes_per_hop, edges_per_hop.slice(0, 0, hops)}).cpu();
  const int64_t* c = counts_host.data_ptr<int64_t>();
  int64_t total_nodes = 0;
  for (int64_t h = 0; h <= hops; ++h) total_nodes += c[h];
  std::vector<at::Tensor> row_parts, col_parts, edge_parts;
  for (int64_t h = 0; h < hops; ++h) {
    const int64_t e = c[hops + 1 + h];
    row_parts.push_back(rows[h].slice(0, 0, e));
    col_parts.push_back(cols[h].slice(0, 0, e));
    edge_parts.push_back(edges[h].slice(0, 0, e));
  }
  auto cat_or_empty = [&](std::vector<at::Tensor>& parts) {
    return parts.empty() ? at::empty({0}, opts) : at::cat(parts);
  };
  return {node.slice(0, 0, total_nodes).clone(), cat_or_empty(row_parts), cat_or_empty(col_parts),
          cat_or_empty(edge_parts), disjoint ? batch.slice(0, 0, total_nodes).clone() : at::empty({0}, opts),
          counts_host.slice(0, 0, hops + 1).clone(), counts_host.slice(0, hops + 1).clone()};
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CUDA, m) { m.impl("neighbor_sample", &neighbor_sample_cuda); }

}  // namespace pyg_accel
