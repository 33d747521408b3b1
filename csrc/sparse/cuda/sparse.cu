// CUDA SpMM, SDDMM and edge softmax over a destination-sorted COO graph (schemas and
// semantics: csrc/ops.cpp).
//
// SpMM and SDDMM run GNNOne's two-stage kernels (sparse_vec.cuh: chunks of edges per
// warp staged in shared memory, 16-byte feature loads by thread groups sized to the
// row) whenever rows split into 16-byte vectors of one head; the generic kernels here
// take every other layout (any width, fp64 rows of odd width, unaligned tensors) and
// serve as the reference path (PYG_ACCEL_SPARSE_KERNEL=generic forces them).
// Generic SpMM: each warp takes fixed chunks of consecutive edges whatever the degrees,
// split into thread groups sized to the feature width; a group keeps a running sum in
// registers across consecutive edges of one destination and adds it to the output
// (atomically) only when the destination changes; wide rows are split over blockIdx.y.
// Generic SDDMM gives each edge a thread group that reduces its dot products by
// shuffles. Edge softmax gives each destination a warp.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <tuple>
#include <type_traits>

#include "../sparse_common.h"
#include "sparse_vec.cuh"

namespace pyg_accel {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 128;      // edges per warp per step, at most (GNNOne's CACHE_SIZE; see generic_chunk)
constexpr int kPerLane = 4;      // features per lane in an SpMM feature slice

int group_size(int64_t width) {  // lanes per group: a power of two covering width, at most 32
  int g = 1;
  while (g < 32 && g < width) g <<= 1;
  return g;
}

int log2_exact(int64_t power_of_two) {
  TORCH_INTERNAL_ASSERT(power_of_two > 0 && (power_of_two & (power_of_two - 1)) == 0);
  int shift = 0;
  while ((int64_t(1) << shift) < power_of_two) ++shift;
  return shift;
}

// 1 / max(1, in-degree of d) for a mean (ptr: the destinations'), 1 for a sum (nullptr).
template <typename acc_t>
__device__ __forceinline__ acc_t mean_scale(const int64_t* __restrict__ ptr, int64_t d) {
  if (ptr == nullptr) return acc_t(1);
  const int64_t degree = ptr[d + 1] - ptr[d];
  return acc_t(1) / static_cast<acc_t>(degree > 1 ? degree : 1);
}

unsigned blocks_for(int64_t threads) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(1, (threads + kThreads - 1) / kThreads), 65535 * 32));
}

// mean_ptr: the destinations' ptr for a mean (each run's sum scaled by 1 / max(1,
// in-degree) before it is added), nullptr for a sum.
template <typename scalar_t, typename acc_t, typename index_t>
__global__ void spmm_kernel(const index_t* __restrict__ dst, const index_t* __restrict__ src,
                            const scalar_t* __restrict__ weight, const scalar_t* __restrict__ x, acc_t* __restrict__ out,
                            int64_t num_edges, int64_t heads, int64_t channels, int tpg, int chunk,
                            const int64_t* __restrict__ mean_ptr) {
  const int64_t F = heads * channels;
  const int lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg, groups = 32 / tpg;
  const int64_t f0 = static_cast<int64_t>(blockIdx.y) * tpg * kPerLane + gl;  // this lane's first feature
  int64_t head[kPerLane];  // head of each of this lane's features
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) head[j] = (f0 + j * tpg) / channels;
  const int64_t per_group = chunk / groups;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t base = warp * chunk; base < num_edges; base += num_warps * chunk) {
    const int64_t first = base + group * per_group, last = min(first + per_group, num_edges);
    acc_t acc[kPerLane] = {};
    int64_t cur = -1;
    for (int64_t e = first; e < last; ++e) {
      const int64_t d = dst[e];
      if (d != cur) {
        if (cur >= 0) {
          const acc_t scale = mean_scale<acc_t>(mean_ptr, cur);
#pragma unroll
          for (int j = 0; j < kPerLane; ++j) {
            const int64_t f = f0 + j * tpg;
            if (f < F) atomicAdd(out + cur * F + f, acc[j] * scale);
            acc[j] = 0;
          }
        }
        cur = d;
      }
      const scalar_t* row = x + static_cast<int64_t>(src[e]) * F;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int64_t f = f0 + j * tpg;
        if (f < F) {
          const acc_t w = weight != nullptr ? static_cast<acc_t>(weight[e * heads + head[j]]) : acc_t(1);
          acc[j] += w * static_cast<acc_t>(row[f]);
        }
      }
    }
    if (cur >= 0) {
      const acc_t scale = mean_scale<acc_t>(mean_ptr, cur);
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int64_t f = f0 + j * tpg;
        if (f < F) atomicAdd(out + cur * F + f, acc[j] * scale);
      }
    }
  }
}


template <typename scalar_t, typename acc_t, typename index_t>
__global__ void sddmm_kernel(const index_t* __restrict__ dst, const index_t* __restrict__ src,
                             const scalar_t* __restrict__ a, const scalar_t* __restrict__ b, scalar_t* __restrict__ out,
                             int64_t num_edges, int64_t heads, int64_t channels, int tpg) {
  const int64_t F = heads * channels;
  const int lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg, groups = 32 / tpg;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t base = warp * groups; base < num_edges; base += num_warps * groups) {  // same trips warp-wide
    const int64_t e = base + group;
    const bool valid = e < num_edges;
    const scalar_t* arow = valid ? a + static_cast<int64_t>(dst[e]) * F : a;
    const scalar_t* brow = valid ? b + static_cast<int64_t>(src[e]) * F : b;
    for (int64_t h = 0; h < heads; ++h) {
      acc_t sum = 0;
      if (valid) {
        for (int64_t c = gl; c < channels; c += tpg) {
          sum += static_cast<acc_t>(arow[h * channels + c]) * static_cast<acc_t>(brow[h * channels + c]);
        }
      }
      for (int o = tpg / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o, tpg);
      if (valid && gl == 0) out[e * heads + h] = static_cast<scalar_t>(sum);
    }
  }
}

// Max and min aggregation (schema: csrc/ops.cpp). Rows of whole 16-byte vectors in fp32
// / fp16 / bf16 take the vectorised kernels (sparse_vec.cuh: ExtremumRun forward,
// ExtremumGradRun backward). Others: the forward as a row reduction over the graph's
// destinations (each feature's maximum or minimum and how many edges reach it) and the
// backward by extremum_grad_scatter_kernel. An Op holds one row reduction: its
// per-feature State, the Item an edge loads for a feature and how it adds to a State,
// how two States merge, and where a row's result goes.
template <typename scalar_t, typename index_t, Reduce R>
struct ExtremumForward {
  using acc_t = at::opmath_type<scalar_t>;
  struct State {
    acc_t best;
    int count;  // 0: no edge yet
  };
  const index_t* src;
  const scalar_t* x;
  scalar_t* out;
  int* ties;
  int64_t F;
  using Item = acc_t;  // an edge's feature value
  __device__ State init() const { return {acc_t(0), 0}; }
  __device__ Item load(int64_t row, int64_t e, int64_t f) const {
    return static_cast<acc_t>(x[static_cast<int64_t>(src[e]) * F + f]);
  }
  __device__ void add(State& s, const Item& v) const {
    if (s.count == 0 || beats<R>(v, s.best)) {
      s = {v, 1};
    } else if (v == s.best) {
      ++s.count;
    }
  }
  __device__ State merge(const State& a, const State& b) const {
    if (a.count == 0 || (b.count > 0 && beats<R>(b.best, a.best))) return b;
    if (b.count == 0 || beats<R>(a.best, b.best)) return a;
    return {a.best, a.count + b.count};
  }
  __device__ void write(int64_t row, int64_t f, const State& s) const {
    out[row * F + f] = static_cast<scalar_t>(s.best);  // 0 without edges
    ties[row * F + f] = s.count;
  }
};

// (Tuning macros for scripts/kernel_variants.sh OUT sparse_max.)
#ifndef PYG_ACCEL_MAX_ROW_FEATURES
#define PYG_ACCEL_MAX_ROW_FEATURES 2
#endif
#ifndef PYG_ACCEL_MAX_EDGE_UNROLL
#define PYG_ACCEL_MAX_EDGE_UNROLL 4
#endif
#ifndef PYG_ACCEL_MAX_LONG_ROW
#define PYG_ACCEL_MAX_LONG_ROW 1024
#endif
constexpr int kRowFeatures = PYG_ACCEL_MAX_ROW_FEATURES;  // features per lane per pass over a row's edges
constexpr int kEdgeUnroll = PYG_ACCEL_MAX_EDGE_UNROLL;    // edges whose loads are issued before any is reduced
constexpr int64_t kLongRow = PYG_ACCEL_MAX_LONG_ROW;      // rows with more edges go to long_row_reduce_kernel
constexpr int kLongRowThreads = 1024;
constexpr int kLongRowFeatures = 2;  // (32 warps x 64 features of State in shared memory)

// Adds edges e0, e0 + step, ... (kEdgeUnroll of them, those below `end`) to the states
// of features f0 + k * fstep (those below F): every load first, then the reductions.
template <typename Op, int K>
__device__ __forceinline__ void reduce_edges(const Op& op, typename Op::State (&s)[K], int64_t row, int64_t e0,
                                             int64_t step, int64_t end, int64_t f0, int64_t fstep, int64_t F) {
  typename Op::Item items[kEdgeUnroll][K];
#pragma unroll
  for (int u = 0; u < kEdgeUnroll; ++u) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      const int64_t e = e0 + u * step, f = f0 + k * fstep;
      if (e < end && f < F) items[u][k] = op.load(row, e, f);
    }
  }
#pragma unroll
  for (int u = 0; u < kEdgeUnroll; ++u) {
#pragma unroll
    for (int k = 0; k < K; ++k) {
      if (e0 + u * step < end && f0 + k * fstep < F) op.add(s[k], items[u][k]);
    }
  }
}

// Rows of at most kLongRow edges: `tpg` lanes per row (grid-stride), lane gl taking
// features gl + k * tpg of each pass, every edge's loads for them issued together.
template <typename Op>
__global__ void row_reduce_kernel(const int64_t* __restrict__ ptr, Op op, int64_t num_rows, int64_t F, int tpg) {
  const int gl = threadIdx.x % tpg;
  const int64_t groups = static_cast<int64_t>(gridDim.x) * blockDim.x / tpg;
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / tpg; row < num_rows;
       row += groups) {
    const int64_t begin = ptr[row], end = ptr[row + 1];
    if (end - begin > kLongRow) continue;
    for (int64_t f0 = gl; f0 < F; f0 += static_cast<int64_t>(tpg) * kRowFeatures) {
      typename Op::State s[kRowFeatures];
#pragma unroll
      for (int k = 0; k < kRowFeatures; ++k) s[k] = op.init();
      for (int64_t e0 = begin; e0 < end; e0 += kEdgeUnroll) {
        reduce_edges<Op, kRowFeatures>(op, s, row, e0, 1, end, f0, tpg, F);
      }
#pragma unroll
      for (int k = 0; k < kRowFeatures; ++k) {
        const int64_t f = f0 + static_cast<int64_t>(k) * tpg;
        if (f < F) op.write(row, f, s[k]);
      }
    }
  }
}

// Rows of more than kLongRow edges (the hubs of a power-law graph), a block each: the
// block scans kLongRowThreads rows at a time for long ones, then for each, its 32 warps
// take every 32nd edge and lanes take features, and warp 0 merges the warps' states
// (in warp order: deterministic).
template <typename Op>
__global__ void __launch_bounds__(kLongRowThreads) long_row_reduce_kernel(const int64_t* __restrict__ ptr, Op op,
                                                                         int64_t num_rows, int64_t F) {
  constexpr int kWarpsPerBlock = kLongRowThreads / 32, kSlice = 32 * kLongRowFeatures;
  __shared__ typename Op::State partial[kWarpsPerBlock][kSlice];
  __shared__ int64_t long_rows[kLongRowThreads];
  __shared__ int num_long;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kLongRowThreads; base < num_rows;
       base += static_cast<int64_t>(gridDim.x) * kLongRowThreads) {
    if (threadIdx.x == 0) num_long = 0;
    __syncthreads();
    const int64_t mine = base + threadIdx.x;
    if (mine < num_rows && ptr[mine + 1] - ptr[mine] > kLongRow) long_rows[atomicAdd(&num_long, 1)] = mine;
    __syncthreads();
    for (int i = 0; i < num_long; ++i) {
      const int64_t row = long_rows[i], begin = ptr[row], end = ptr[row + 1];
      for (int64_t f0 = 0; f0 < F; f0 += kSlice) {
        typename Op::State s[kLongRowFeatures];
#pragma unroll
        for (int k = 0; k < kLongRowFeatures; ++k) s[k] = op.init();
        for (int64_t e0 = begin + warp; e0 < end; e0 += static_cast<int64_t>(kWarpsPerBlock) * kEdgeUnroll) {
          reduce_edges<Op, kLongRowFeatures>(op, s, row, e0, kWarpsPerBlock, end, f0 + lane, 32, F);
        }
#pragma unroll
        for (int k = 0; k < kLongRowFeatures; ++k) partial[warp][lane + 32 * k] = s[k];
        __syncthreads();
        if (warp == 0) {
#pragma unroll
          for (int k = 0; k < kLongRowFeatures; ++k) {
            const int64_t f = f0 + lane + 32 * k;
            typename Op::State total = partial[0][lane + 32 * k];
            for (int w = 1; w < kWarpsPerBlock; ++w) total = op.merge(total, partial[w][lane + 32 * k]);
            if (f < F) op.write(row, f, total);
          }
        }
        __syncthreads();  // partial is reused
      }
    }
  }
}

// Runs one row reduction over every row: short rows by lane groups, long rows by blocks.
template <typename Op>
void reduce_rows(const at::Tensor& ptr, const Op& op, int64_t num_rows, int64_t F) {
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int tpg = group_size(std::min<int64_t>(F, 32));
  row_reduce_kernel<Op><<<blocks_for(num_rows * tpg), kThreads, 0, stream>>>(ptr.data_ptr<int64_t>(), op, num_rows,
                                                                            F, tpg);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const int64_t tiles = (num_rows + kLongRowThreads - 1) / kLongRowThreads;
  long_row_reduce_kernel<Op><<<static_cast<unsigned>(std::min<int64_t>(tiles, 2 * sms)), kLongRowThreads, 0,
                               stream>>>(ptr.data_ptr<int64_t>(), op, num_rows, F);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Max / sum over the lanes that share `lane % heads` (heads divides 32).
template <typename acc_t>
__device__ __forceinline__ acc_t head_max(acc_t v, int64_t heads) {
  for (int o = 16; o >= heads; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <typename acc_t>
__device__ __forceinline__ acc_t head_sum(acc_t v, int64_t heads) {
  for (int o = 16; o >= heads; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Edge softmax with one warp per destination (grid-stride); backward when grad !=
// nullptr (values are then the softmax outputs). When the head count divides 32 the
// warp walks the destination's [edges x heads] block flat, so every load is coalesced
// and lane l always holds head l % heads; other head counts loop over the heads.
template <typename scalar_t>
__global__ void edge_softmax_kernel(const int64_t* __restrict__ ptr, const scalar_t* __restrict__ values,
                                    const scalar_t* __restrict__ grad, scalar_t* __restrict__ out, int64_t num_dst,
                                    int64_t heads) {
  using acc_t = at::opmath_type<scalar_t>;
  const int lane = threadIdx.x % 32;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  const bool flat = 32 % heads == 0;
  const int64_t step = flat ? 32 : 32 * heads, group = flat ? heads : 1;  // lanes l, l ^ o (o >= group) reduce together
  for (int64_t d = warp; d < num_dst; d += num_warps) {
    const int64_t begin = ptr[d] * heads, end = ptr[d + 1] * heads;
    for (int64_t h = 0; h < (flat ? 1 : heads); ++h) {
      const int64_t first = begin + (flat ? lane : lane * heads + h);
      if (grad == nullptr) {  // forward: values are logits
        acc_t mx = -INFINITY;
        for (int64_t i = first; i < end; i += step) mx = max(mx, static_cast<acc_t>(values[i]));
        mx = head_max(mx, group);
        acc_t sum = 0;
        for (int64_t i = first; i < end; i += step) sum += exp(static_cast<acc_t>(values[i]) - mx);
        const acc_t scale = acc_t(1) / (head_sum(sum, group) + acc_t(1e-16));
        for (int64_t i = first; i < end; i += step) {
          out[i] = static_cast<scalar_t>(exp(static_cast<acc_t>(values[i]) - mx) * scale);
        }
      } else {
        acc_t dot = 0;
        for (int64_t i = first; i < end; i += step) {
          dot += static_cast<acc_t>(values[i]) * static_cast<acc_t>(grad[i]);
        }
        dot = head_sum(dot, group);
        for (int64_t i = first; i < end; i += step) {
          out[i] = static_cast<scalar_t>(static_cast<acc_t>(values[i]) * (static_cast<acc_t>(grad[i]) - dot));
        }
      }
    }
  }
}

// PYG_ACCEL_SPARSE_KERNEL=generic forces the generic kernels, =vec the vectorised ones
// wherever the layout allows them, past any size heuristic (read per call, so a
// benchmark or a test can compare the paths in one process).
bool use_vec_kernels() {
  const char* env = std::getenv("PYG_ACCEL_SPARSE_KERNEL");
  return env == nullptr || std::strcmp(env, "generic") != 0;
}

bool force_vec_kernels() {
  const char* env = std::getenv("PYG_ACCEL_SPARSE_KERNEL");
  return env != nullptr && std::strcmp(env, "vec") == 0;
}

// Warps the GPU holds at once at the vectorised kernels' occupancy (kSpmmMinBlocks
// blocks of kWarps warps per SM).
int64_t resident_warps() {
  return static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * vec::kWarps *
         vec::kSpmmMinBlocks;
}

// PYG_ACCEL_SPARSE_CHUNK: 'auto' (default), 'long' (every sum SpMM and SDDMM in its
// longest chunks whatever the graph's size) or 'short' (in the shortest); read per call,
// so a benchmark or a test can compare them in one process.
enum class ChunkMode { kAuto, kLong, kShort };
ChunkMode chunk_mode() {
  const char* env = std::getenv("PYG_ACCEL_SPARSE_CHUNK");
  if (env == nullptr || std::strcmp(env, "auto") == 0) return ChunkMode::kAuto;
  if (std::strcmp(env, "long") == 0) return ChunkMode::kLong;
  TORCH_CHECK(std::strcmp(env, "short") == 0, "PYG_ACCEL_SPARSE_CHUNK must be 'auto', 'long' or 'short', got '",
              env, "'");
  return ChunkMode::kShort;
}

// Whether warps of edges_per_warp edges each, over `edges` edges in each of `slices`
// feature slices, fill half a wave of the resident ones.
bool fills_gpu(int64_t edges, int64_t edges_per_warp, int64_t slices) {
  return (edges + edges_per_warp - 1) / edges_per_warp * slices * 2 >= resident_warps();
}

// The chunk a vectorised SpMM (runs of at least min_run edges per group) or SDDMM
// (min_run 0) takes over `edges` edges in `slices` feature slices of groups of `tpg`
// lanes: its longest, Chunk(tpg, min_run), if that makes warps enough to fill half a
// wave; else the longest of the shorter ones that does (kStage / 2, kStage / 4, ...
// edges staged per round, each group's run one round), down to kUnroll edges per group
// and round. Each group walks its run kUnroll gathers at a time, so a small graph in a
// few long chunks waits on the latency of long walks on a few SMs: one edge type of a
// heterogeneous batch (~25 k edges at F = 64) made 196 warps of 128-edge chunks against
// 4,224 resident on an H200. Shorter runs cut more rows (more atomic flushes), which
// such a graph's few edges afford.
vec::Chunk fill_chunk(int64_t edges, int64_t slices, int tpg, int min_run) {
  const vec::Chunk longest(tpg, min_run);
  const ChunkMode mode = chunk_mode();
  if (mode == ChunkMode::kLong) return longest;
  const int shortest = std::max(32, longest.groups * vec::kUnroll);  // (stage_round: whole 32-edge loads)
  if (mode == ChunkMode::kShort) return vec::Chunk(tpg, 0, shortest);
  if (fills_gpu(edges, longest.edges(), slices)) return longest;
  for (int stage = vec::kStage; stage > shortest; stage /= 2) {
    const vec::Chunk chunk(tpg, 0, stage);
    if (chunk.edges() < longest.edges() && fills_gpu(edges, chunk.edges(), slices)) return chunk;
  }
  return vec::Chunk(tpg, 0, shortest);
}

// The generic SpMM's edges per warp (`groups` groups of lanes each walking chunk / groups
// of them, one at a time): kChunk, halved while it leaves half a wave of warps unfilled,
// down to one edge per group (PYG_ACCEL_SPARSE_CHUNK as for fill_chunk).
int generic_chunk(int64_t edges, int64_t slices, int groups) {
  const ChunkMode mode = chunk_mode();
  if (mode == ChunkMode::kLong) return kChunk;
  int chunk = mode == ChunkMode::kShort ? groups : kChunk;
  while (chunk > groups && !fills_gpu(edges, chunk, slices)) chunk /= 2;
  return chunk;
}

// Whether rows of x split into 16-byte vectors that each lie in one head.
bool vec_layout(const at::Tensor& t, int64_t C) {
  const int64_t V = 16 / static_cast<int64_t>(t.element_size());
  return C % V == 0 && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

// How the vectorised SpMM's output is zero-filled first. Whole: one memset, and every
// group's first and last runs are added atomically. Shared rows: only empty rows and
// rows that a group boundary cuts get zeros (and atomics); every other row is written
// by one plain store. On the products-size graph (H100, three runs) the shared-rows
// fill saved 2.6% at 1 KB rows (F = 256 fp32: 19.1 against 19.6 ms, 80% fewer bytes
// zeroed) and 0.3-1.6% at 512 B; at 64-256 B rows, where 64-edge groups cut ~40% of the
// rows, the memset's sequential writes were as fast or faster. So rows of >= 512 bytes
// take the shared-rows fill. PYG_ACCEL_SPMM_ZERO_FILL=all / =rows forces one or the
// other (read per call, so a benchmark can compare them).
bool shared_rows_fill(int64_t row_bytes) {
  const char* env = std::getenv("PYG_ACCEL_SPMM_ZERO_FILL");
  if (env != nullptr && std::strcmp(env, "all") == 0) return false;
  if (env != nullptr && std::strcmp(env, "rows") == 0) return true;
  return row_bytes >= 512;
}

// The vectorised SpMM (sum, or `mean`) into the [num_dst, H, C] acc_type tensor `out`,
// if x's layout allows it (else false, nothing launched): allocated here, or with
// `accumulate` given (a sum), with values the sums are added to (x's dtype is then
// acc_type).
bool try_spmm_vec(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src, const at::Tensor& weight,
                  const at::Tensor& x, at::ScalarType acc_type, at::Tensor& out, bool accumulate, bool mean,
                  int64_t E, int64_t H, int64_t C, cudaStream_t stream) {
  if (!vec_layout(x, C) || (accumulate && !vec_layout(out, C))) return false;
  const int64_t vecs = H * C / (16 / x.element_size()), num_dst = ptr.numel() - 1;
  const int tpg = group_size(vecs);
  const int64_t slices = (vecs + tpg - 1) / tpg;
  const vec::Chunk chunk = fill_chunk(E, slices, tpg, vec::kRun);
  const int64_t warps = (E + chunk.edges() - 1) / chunk.edges();
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((warps + vec::kWarps - 1) / vec::kWarps, 1 << 30)),
                  static_cast<unsigned>(slices));
  const auto options = x.options().dtype(acc_type);
  const bool exact = !accumulate && shared_rows_fill(H * C * c10::elementSize(acc_type));
  if (!accumulate) out = exact ? at::empty({num_dst, H, C}, options) : at::zeros({num_dst, H, C}, options);
  if (exact && num_dst > 0) {  // rows are whole 16-byte vectors: H * C is a multiple of 16 / x's element size
    const int64_t row_vecs = H * C * out.element_size() / 16;
    const int lane_shift = log2_exact(group_size(row_vecs)), group_shift = log2_exact(chunk.per_group);
    vec::zero_shared_rows_kernel<<<blocks_for(num_dst << lane_shift), kThreads, 0, stream>>>(
        ptr.contiguous().data_ptr<int64_t>(), reinterpret_cast<uint4*>(out.data_ptr()), num_dst, row_vecs,
        lane_shift, group_shift);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_vec", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "spmm_vec_index", [&] {
      const index_t* d = dst.data_ptr<index_t>();
      const index_t* s = src.data_ptr<index_t>();
      const scalar_t* w = weight.defined() ? weight.data_ptr<scalar_t>() : nullptr;
      if (mean) {
        vec::spmm_vec_kernel<scalar_t, acc_t, index_t, vec::SumOf<scalar_t, acc_t, false, true>>
            <<<grid, vec::kThreads, 0, stream>>>(d, s, w, x.data_ptr<scalar_t>(), out.data_ptr<acc_t>(), E, H, C,
                                                 chunk, exact, vec::MeanParams{ptr.data_ptr<int64_t>()});
        return;
      }
      auto kernel = vec::spmm_vec_kernel<scalar_t, acc_t, index_t, vec::SumOf<scalar_t, acc_t, false>>;
      if constexpr (std::is_same_v<scalar_t, acc_t>) {  // (accumulating needs x in acc_type)
        if (accumulate) kernel = vec::spmm_vec_kernel<scalar_t, acc_t, index_t, vec::SumOf<scalar_t, acc_t, true>>;
      }
      kernel<<<grid, vec::kThreads, 0, stream>>>(d, s, w, x.data_ptr<scalar_t>(), out.data_ptr<acc_t>(), E, H, C,
                                                 chunk, exact, vec::NoParams{});
    });
  });
  return true;
}

bool try_sddmm_vec(const at::Tensor& dst, const at::Tensor& src, const at::Tensor& a, const at::Tensor& b,
                   at::Tensor& out, int64_t E, int64_t H, int64_t C, cudaStream_t stream) {
  if (!vec_layout(a, C) || !vec_layout(b, C)) return false;
  const int64_t V = 16 / a.element_size(), vecs = H * C / V, lanes_per_head = C / V;
  const int tpg = group_size(vecs);
  const int64_t per_lane = (vecs + tpg - 1) / tpg;
  const bool heads_fit = H == 1 || (lanes_per_head <= tpg && (lanes_per_head & (lanes_per_head - 1)) == 0);
  if (per_lane > 2 || !heads_fit) return false;
  const vec::Chunk chunk = fill_chunk(E, 1, tpg, 0);
  const int64_t warps = (E + chunk.edges() - 1) / chunk.edges();
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((warps + vec::kWarps - 1) / vec::kWarps, 1 << 30));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "sddmm_vec", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "sddmm_vec_index", [&] {
      const auto kernel = per_lane == 1 ? vec::sddmm_vec_kernel<scalar_t, acc_t, index_t, 1>
                                        : vec::sddmm_vec_kernel<scalar_t, acc_t, index_t, 2>;
      kernel<<<grid, vec::kThreads, 0, stream>>>(dst.data_ptr<index_t>(), src.data_ptr<index_t>(),
                                                 a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                                                 out.data_ptr<scalar_t>(), E, H, C, chunk,
                                                 static_cast<int>(lanes_per_head));
    });
  });
  return true;
}

void generic_spmm(const at::Tensor& key, const at::Tensor& row, const at::Tensor& weight, const at::Tensor& x,
                  at::Tensor& acc, cudaStream_t stream, const int64_t* mean_ptr = nullptr);

// SpMM (sum, or `mean`) into the [num_dst, H, C] acc_type tensor `acc`: allocated here,
// or with `accumulate` given (a sum; x's dtype is then acc_type), holding values the sums
// are added to.
void spmm_acc_cuda(const at::Tensor& ptr, const at::Tensor& dst_t, const at::Tensor& src_t,
                   const std::optional<at::Tensor>& weight_t, const at::Tensor& x_t, at::Tensor& acc,
                   bool accumulate, bool mean = false) {
  const int64_t E = src_t.numel(), H = x_t.size(1), C = x_t.size(2), num_dst = ptr.numel() - 1, F = H * C;
  const at::Tensor dst = dst_t.contiguous(), src = src_t.contiguous(), x = x_t.contiguous();
  const at::Tensor weight = weight_t.has_value() ? weight_t->contiguous() : at::Tensor();
  const at::ScalarType acc_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (E > 0 && F > 0 && use_vec_kernels() &&
      try_spmm_vec(ptr, dst, src, weight, x, acc_type, acc, accumulate, mean, E, H, C, stream)) {
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  if (!accumulate) acc = at::zeros({num_dst, H, C}, x.options().dtype(acc_type));
  generic_spmm(dst, src, weight, x, acc, stream, mean ? ptr.data_ptr<int64_t>() : nullptr);
}

// The generic kernel: acc[key[e]] += w_e * x[row[e]] (acc zero-filled or accumulated
// into, [*, H, C] of x's acc_type; keys in any order: sorted keys make fewer atomics;
// mean_ptr: the keys' ptr, each sum over the key's count, for a mean).
void generic_spmm(const at::Tensor& key, const at::Tensor& row, const at::Tensor& weight, const at::Tensor& x,
                  at::Tensor& acc, cudaStream_t stream, const int64_t* mean_ptr) {
  const int64_t E = key.numel(), H = x.size(1), C = x.size(2), F = H * C;
  if (E == 0 || F == 0) return;
  const int tpg = group_size((F + kPerLane - 1) / kPerLane);
  const int64_t slices = (F + tpg * kPerLane - 1) / (tpg * kPerLane);
  const int chunk = generic_chunk(E, slices, 32 / tpg);
  const dim3 grid(blocks_for((E + chunk - 1) / chunk * 32), static_cast<unsigned>(slices));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    AT_DISPATCH_INDEX_TYPES(key.scalar_type(), "spmm_cuda_index", [&] {
      spmm_kernel<scalar_t, acc_t, index_t><<<grid, kThreads, 0, stream>>>(
          key.data_ptr<index_t>(), row.data_ptr<index_t>(), weight.defined() ? weight.data_ptr<scalar_t>() : nullptr,
          x.data_ptr<scalar_t>(), acc.data_ptr<acc_t>(), E, H, C, tpg, chunk, mean_ptr);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename index_t>
__global__ void csr_ptr_kernel(const index_t* __restrict__ key, int64_t num_keys, int64_t* __restrict__ ptr,
                               int64_t num_rows) {
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r <= num_rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t lo = 0, hi = num_keys;  // first key >= r
    while (lo < hi) {
      const int64_t mid = (lo + hi) / 2;
      if (static_cast<int64_t>(key[mid]) < r) lo = mid + 1; else hi = mid;
    }
    ptr[r] = lo;
  }
}

template <typename scalar_t, typename index_t>
__global__ void mean_edge_weight_kernel(const int64_t* __restrict__ ptr, const index_t* __restrict__ dst,
                                        int64_t num_edges, scalar_t* __restrict__ out) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < num_edges;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = dst[e];
    const int64_t degree = ptr[d + 1] - ptr[d];
    out[e] = static_cast<scalar_t>(acc_t(1) / static_cast<acc_t>(degree > 1 ? degree : 1));
  }
}

at::Tensor csr_ptr_cuda(const at::Tensor& key_t, int64_t num_rows) {
  check_csr_ptr(key_t, num_rows);
  const c10::cuda::CUDAGuard guard(key_t.device());
  const at::Tensor key = key_t.contiguous();
  at::Tensor ptr = at::empty({num_rows + 1}, key.options().dtype(at::kLong));
  AT_DISPATCH_INDEX_TYPES(key.scalar_type(), "csr_ptr_cuda", [&] {
    csr_ptr_kernel<index_t><<<blocks_for(num_rows + 1), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
        key.data_ptr<index_t>(), key.numel(), ptr.data_ptr<int64_t>(), num_rows);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return ptr;
}

at::Tensor mean_edge_weight_cuda(const at::Tensor& ptr_t, const at::Tensor& dst_t, at::ScalarType dtype) {
  check_mean_edge_weight(ptr_t, dst_t, dtype);
  const c10::cuda::CUDAGuard guard(ptr_t.device());
  const at::Tensor ptr = ptr_t.contiguous(), dst = dst_t.contiguous();
  const int64_t E = dst.numel();
  at::Tensor out = at::empty({E}, dst.options().dtype(dtype));
  if (E == 0) return out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mean_edge_weight_cuda", [&] {
    AT_DISPATCH_INDEX_TYPES(dst.scalar_type(), "mean_edge_weight_cuda_index", [&] {
      mean_edge_weight_kernel<scalar_t, index_t><<<blocks_for(E), kThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
          ptr.data_ptr<int64_t>(), dst.data_ptr<index_t>(), E, out.data_ptr<scalar_t>());
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}

// The transposed SpMM on the edges as they are: the generic kernel with the two ends
// swapped (its running sums then rarely span two edges, so most sums land by atomics).
at::Tensor spmm_transposed_cuda(const at::Tensor& ptr, const at::Tensor& dst_t, const at::Tensor& src_t,
                                const std::optional<at::Tensor>& weight_t, const at::Tensor& x_t, int64_t num_src) {
  check_spmm_transposed(ptr, dst_t, src_t, weight_t, x_t, num_src);
  const c10::cuda::CUDAGuard guard(ptr.device());
  const at::Tensor dst = dst_t.contiguous(), src = src_t.contiguous(), x = x_t.contiguous();
  const at::Tensor weight = weight_t.has_value() ? weight_t->contiguous() : at::Tensor();
  at::Tensor acc = at::zeros({num_src, x.size(1), x.size(2)}, x.options().dtype(at::toOpMathType(x.scalar_type())));
  generic_spmm(src, dst, weight, x, acc, at::cuda::getCurrentCUDAStream());
  return acc.scalar_type() == x.scalar_type() ? acc : acc.to(x.scalar_type());
}

template <Reduce R>
std::tuple<at::Tensor, at::Tensor> spmm_extremum_cuda(const at::Tensor& ptr, const at::Tensor& dst,
                                                      const at::Tensor& src, const at::Tensor& x);

std::tuple<at::Tensor, at::Tensor> spmm_cuda(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                                             const std::optional<at::Tensor>& weight, const at::Tensor& x,
                                             c10::string_view reduce_name) {
  const Reduce reduce = parse_reduce(reduce_name, "spmm");
  check_spmm(ptr, dst, src, weight, x, "spmm", reduce);
  const c10::cuda::CUDAGuard guard(ptr.device());
  return dispatch_reduce(reduce, [&](auto r) -> std::tuple<at::Tensor, at::Tensor> {
    constexpr Reduce R = decltype(r)::value;
    if constexpr (is_extremum(R)) {
      return spmm_extremum_cuda<R>(ptr, dst, src, x);
    } else {
      at::Tensor acc;
      spmm_acc_cuda(ptr, dst, src, weight, x, acc, /*accumulate=*/false, divides_by_degree(R));
      at::Tensor out = acc.scalar_type() == x.scalar_type() ? acc : acc.to(x.scalar_type());
      return {out, at::empty({0}, x.options().dtype(at::kInt))};
    }
  });
}

void spmm_add_cuda(at::Tensor& out, const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                   const std::optional<at::Tensor>& weight, const at::Tensor& x) {
  check_spmm(ptr, dst, src, weight, x, "spmm_add_");
  check_accumulator(out, ptr, x, "spmm_add_");
  const c10::cuda::CUDAGuard guard(ptr.device());
  if (out.scalar_type() == at::kFloat || out.scalar_type() == at::kDouble) {  // sums land in out directly
    spmm_acc_cuda(ptr, dst, src, weight, x, out, /*accumulate=*/true);
    return;
  }
  at::Tensor acc;  // fp16 / bf16: fp32 sums, then one add
  spmm_acc_cuda(ptr, dst, src, weight, x, acc, /*accumulate=*/false);
  out.add_(acc);
}

at::Tensor sddmm_cuda(const at::Tensor& ptr, const at::Tensor& dst_t, const at::Tensor& src_t, const at::Tensor& a_t,
                      const at::Tensor& b_t) {
  const int64_t E = check_sparse_graph(ptr, dst_t, src_t, "sddmm");
  check_node_values(a_t, ptr, "sddmm", "a");
  check_node_values(b_t, ptr, "sddmm", "b");
  TORCH_CHECK(a_t.size(1) == b_t.size(1) && a_t.size(2) == b_t.size(2) && a_t.scalar_type() == b_t.scalar_type(),
              "sddmm: a and b must share heads, channels and dtype");
  TORCH_CHECK(a_t.size(0) >= ptr.numel() - 1, "sddmm: a needs a row per destination");
  const int64_t H = a_t.size(1), C = a_t.size(2);
  const c10::cuda::CUDAGuard guard(ptr.device());
  const at::Tensor dst = dst_t.contiguous(), src = src_t.contiguous(), a = a_t.contiguous(), b = b_t.contiguous();
  at::Tensor out = at::empty({E, H}, a.options());
  if (E > 0 && H > 0) {
    if (C == 0) return out.zero_();
    const int tpg = group_size(C);
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    if (use_vec_kernels() && try_sddmm_vec(dst, src, a, b, out, E, H, C, stream)) {
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return out;
    }
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "sddmm_cuda", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "sddmm_cuda_index", [&] {
        sddmm_kernel<scalar_t, acc_t, index_t><<<blocks_for((E + 32 / tpg - 1) / (32 / tpg) * 32), kThreads, 0,
                                                 stream>>>(dst.data_ptr<index_t>(), src.data_ptr<index_t>(),
                                                           a.data_ptr<scalar_t>(), b.data_ptr<scalar_t>(),
                                                           out.data_ptr<scalar_t>(), E, H, C, tpg);
      });
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return out;
}

// Unpacks spmm_vec_kernel<ExtremumOf>'s (extremum, count) states into out and ties.
template <typename scalar_t>
__global__ void unpack_extremum_kernel(const unsigned long long* __restrict__ packed, scalar_t* __restrict__ out,
                                  int* __restrict__ ties, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const unsigned long long p = packed[i];
    out[i] = static_cast<scalar_t>(__uint_as_float(static_cast<unsigned>(p >> 32)));  // 0 without edges
    ties[i] = static_cast<int>(static_cast<unsigned>(p));
  }
}

// Max / min (reduction R) aggregation by the vectorised SpMM's edge-balanced chunks of
// kRunEdges-edge runs: each feature's extremum and tie count, packed per element (8
// bytes, as out and ties together) so that the runs that groups share merge by
// compare-and-swap, then unpacked.
template <int kRunEdges, Reduce R>
void spmm_extremum_vec(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src, const at::Tensor& x,
                  at::Tensor& out, at::Tensor& ties, cudaStream_t stream) {
  const int64_t E = src.numel(), H = x.size(1), C = x.size(2), F = H * C, num_dst = ptr.numel() - 1;
  const int64_t vecs = F / (16 / x.element_size());
  const int tpg = group_size(vecs);
  const vec::Chunk chunk(tpg, kRunEdges);
  const int64_t warps = (E + chunk.edges() - 1) / chunk.edges();
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((warps + vec::kWarps - 1) / vec::kWarps, 1 << 30)),
                  static_cast<unsigned>((vecs + tpg - 1) / tpg));
  const bool exact = shared_rows_fill(F * 8);
  const auto options = x.options().dtype(at::kLong);
  at::Tensor packed = exact ? at::empty({num_dst, F}, options) : at::zeros({num_dst, F}, options);
  if (exact) {  // F is a multiple of 4: rows of whole 16-byte vectors
    const int64_t row_vecs = F * 8 / 16;
    const int lane_shift = log2_exact(group_size(row_vecs)), group_shift = log2_exact(chunk.per_group);
    vec::zero_shared_rows_kernel<<<blocks_for(num_dst << lane_shift), kThreads, 0, stream>>>(
        ptr.data_ptr<int64_t>(), reinterpret_cast<uint4*>(packed.data_ptr()), num_dst, row_vecs, lane_shift,
        group_shift);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  auto* slots = reinterpret_cast<unsigned long long*>(packed.data_ptr<int64_t>());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_extremum_vec", [&] {
    if constexpr (!std::is_same_v<scalar_t, double>) {
      AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "spmm_extremum_vec_index", [&] {
        vec::spmm_vec_kernel<scalar_t, float, index_t, vec::ExtremumOf<scalar_t, R, kRunEdges>>
            <<<grid, vec::kThreads, 0, stream>>>(dst.data_ptr<index_t>(), src.data_ptr<index_t>(), nullptr,
                                                 x.data_ptr<scalar_t>(), slots, E, H, C, chunk, exact,
                                                 vec::NoParams{});
      });
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      unpack_extremum_kernel<scalar_t><<<blocks_for(num_dst * F), kThreads, 0, stream>>>(
          slots, out.data_ptr<scalar_t>(), ties.data_ptr<int>(), num_dst * F);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
}

// The run length max (and min) aggregation takes on a graph of `edges` edges: the longest of
// kMaxRun, 256 and kRun edges whose warps per feature slice fill half a wave of the
// resident ones, else kRun. Long runs cut few rows, so few runs merge by CAS (one loop
// per feature); but each group walks its run four gathers at a time, so a graph too
// small to fill the GPU with long runs waits on their latency (a sampled batch's,
// ~1.2 M edges at F = 16, makes 151 warps of 1,024-edge runs against ~4,200 resident on
// an H200). On an H200 this rule picks the fastest of the three lengths, or one within
// 5% of it, on the products-size graph at 1%, 5% and 100% for F = 16, 64 and 256
// (docs/architecture.md, max aggregation). PYG_ACCEL_SPARSE_KERNEL=vec forces kMaxRun;
// PYG_ACCEL_MAX_RUN_EDGES=N forces the shortest compiled length of at least N (64, 256
// or 1024; read per call, for timing and tests).
int max_run_edges(int64_t edges, int tpg) {
  if (force_vec_kernels()) return vec::kMaxRun;
  if (const char* env = std::getenv("PYG_ACCEL_MAX_RUN_EDGES")) {
    const int forced = std::atoi(env);
    return forced <= vec::kRun ? vec::kRun : forced <= 256 ? 256 : vec::kMaxRun;
  }
  for (const int run : {vec::kMaxRun, 256}) {
    if (fills_gpu(edges, vec::Chunk(tpg, run).edges(), 1)) return run;
  }
  return vec::kRun;
}

// Max / min (reduction R) aggregation on the vectorised kernel (fp32 / fp16 / bf16 x whose rows
// split into 16-byte vectors; else false, nothing launched), in runs of max_run_edges.
template <Reduce R>
bool try_spmm_extremum_vec(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src, const at::Tensor& x,
                           at::Tensor& out, at::Tensor& ties, cudaStream_t stream) {
  const int64_t C = x.size(2), F = x.size(1) * C;
  if (x.scalar_type() == at::kDouble || !vec_layout(x, C)) return false;
  const int64_t vecs = F / (16 / x.element_size());
  const int tpg = group_size(vecs);
  const int run = max_run_edges(src.numel(), tpg);
  if (run == vec::kMaxRun) {
    spmm_extremum_vec<vec::kMaxRun, R>(ptr, dst, src, x, out, ties, stream);
  } else if (run == 256) {
    spmm_extremum_vec<256, R>(ptr, dst, src, x, out, ties, stream);
  } else {
    spmm_extremum_vec<vec::kRun, R>(ptr, dst, src, x, out, ties, stream);
  }
  return true;
}

// spmm's max / min (reduction R) on checked inputs, under the caller's device guard.
template <Reduce R>
std::tuple<at::Tensor, at::Tensor> spmm_extremum_cuda(const at::Tensor& ptr_t, const at::Tensor& dst_t,
                                                      const at::Tensor& src_t, const at::Tensor& x_t) {
  const int64_t F = x_t.size(1) * x_t.size(2), num_dst = ptr_t.numel() - 1;
  const at::Tensor ptr = ptr_t.contiguous(), src = src_t.contiguous(), x = x_t.contiguous();
  at::Tensor out = at::empty({num_dst, x.size(1), x.size(2)}, x.options());
  at::Tensor ties = at::empty({num_dst, x.size(1), x.size(2)}, x.options().dtype(at::kInt));
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  if (num_dst > 0 && F > 0 && src.numel() > 0 && use_vec_kernels() &&
      try_spmm_extremum_vec<R>(ptr, dst_t.contiguous(), src, x, out, ties, stream)) {
    return {out, ties};
  }
  if (num_dst > 0 && F > 0) {
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_extremum_cuda", [&] {
      AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "spmm_extremum_cuda_index", [&] {
        const ExtremumForward<scalar_t, index_t, R> op{src.data_ptr<index_t>(), x.data_ptr<scalar_t>(),
                                               out.data_ptr<scalar_t>(), ties.data_ptr<int>(), F};
        reduce_rows(ptr, op, num_dst, F);
      });
    });
  }
  return {out, ties};
}

// Max / min aggregation's backward for the layouts the vectorised kernel does not take:
// a thread per (edge, feature) adds the destination's gradient over its share of the
// ties to every source that reaches the extremum (grid-stride; atomics into acc_t grad_x).
template <typename scalar_t, typename acc_t, typename index_t>
__global__ void extremum_grad_scatter_kernel(const index_t* __restrict__ dst, const index_t* __restrict__ src,
                                        const scalar_t* __restrict__ x, const scalar_t* __restrict__ out,
                                        const int* __restrict__ ties, const scalar_t* __restrict__ grad,
                                        acc_t* __restrict__ grad_x, int64_t num_edges, int64_t F) {
  const int64_t n = num_edges * F, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const int64_t e = i / F, f = i % F;
    const int64_t at = static_cast<int64_t>(dst[e]) * F + f, from = static_cast<int64_t>(src[e]) * F + f;
    const acc_t best = static_cast<acc_t>(out[at]);
    if (extremum_reaches(static_cast<acc_t>(x[from]), best)) {
      atomicAdd(grad_x + from, static_cast<acc_t>(grad[at]) / extremum_share(best, ties[at]));
    }
  }
}

at::Tensor spmm_extremum_backward_cuda(const at::Tensor& ptr_t, const at::Tensor& dst_t, const at::Tensor& src_t,
                                       const at::Tensor& x_t, const at::Tensor& out_t, const at::Tensor& ties_t,
                                       const at::Tensor& grad_t) {
  const int64_t E = check_extremum_backward(ptr_t, dst_t, src_t, x_t, out_t, ties_t, grad_t);
  const int64_t H = x_t.size(1), C = x_t.size(2), F = H * C;
  const c10::cuda::CUDAGuard guard(ptr_t.device());
  const at::Tensor dst = dst_t.contiguous(), src = src_t.contiguous(), x = x_t.contiguous(), out = out_t.contiguous(),
                   ties = ties_t.contiguous(), grad = grad_t.contiguous();
  const at::ScalarType acc_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor grad_x = at::zeros(x.sizes(), x.options().dtype(acc_type));
  if (E == 0 || F == 0) return grad_x.to(x.scalar_type());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const bool vectorised = use_vec_kernels() && acc_type == at::kFloat && vec_layout(x, C) && vec_layout(out, C) &&
                          vec_layout(grad, C);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_extremum_backward_cuda", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "spmm_extremum_backward_cuda_index", [&] {
      if constexpr (std::is_same_v<acc_t, float>) {
        if (vectorised) {
          const int64_t vecs = F / (16 / x.element_size());
          const int tpg = group_size(vecs);
          const vec::Chunk chunk(tpg, vec::kRun);
          const int64_t warps = (E + chunk.edges() - 1) / chunk.edges();
          const dim3 grid(static_cast<unsigned>(std::min<int64_t>((warps + vec::kWarps - 1) / vec::kWarps, 1 << 30)),
                          static_cast<unsigned>((vecs + tpg - 1) / tpg));
          const typename vec::ExtremumGradOf<scalar_t>::Params params{out.data_ptr<scalar_t>(), ties.data_ptr<int>(),
                                                                 grad.data_ptr<scalar_t>(), grad_x.data_ptr<float>()};
          vec::spmm_vec_kernel<scalar_t, float, index_t, vec::ExtremumGradOf<scalar_t>>
              <<<grid, vec::kThreads, 0, stream>>>(dst.data_ptr<index_t>(), src.data_ptr<index_t>(), nullptr,
                                                   x.data_ptr<scalar_t>(), grad_x.data_ptr<float>(), E, H, C, chunk,
                                                   true, params);  // (out: unused, ExtremumGradRun adds to grad_x)
          return;
        }
      }
      extremum_grad_scatter_kernel<scalar_t, acc_t, index_t><<<blocks_for(E * F), kThreads, 0, stream>>>(
          dst.data_ptr<index_t>(), src.data_ptr<index_t>(), x.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(),
          ties.data_ptr<int>(), grad.data_ptr<scalar_t>(), grad_x.data_ptr<acc_t>(), E, F);
    });
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return grad_x.scalar_type() == x.scalar_type() ? grad_x : grad_x.to(x.scalar_type());
}

at::Tensor softmax_launch(const at::Tensor& ptr_t, const at::Tensor& values_t, const at::Tensor* grad_t,
                          const char* op) {
  TORCH_CHECK(ptr_t.dim() == 1 && ptr_t.numel() >= 1 && ptr_t.scalar_type() == at::kLong, op,
              ": ptr must be a 1-D int64 tensor");
  TORCH_CHECK(values_t.dim() == 2 && at::isFloatingType(values_t.scalar_type()) &&
                  values_t.device() == ptr_t.device(),
              op, ": expected [E, H] floating values on the graph's device");
  TORCH_CHECK(grad_t == nullptr || (grad_t->sizes() == values_t.sizes() &&
                                    grad_t->scalar_type() == values_t.scalar_type()),
              op, ": out and grad must be [E, H] tensors of one dtype");
  const c10::cuda::CUDAGuard guard(ptr_t.device());
  const at::Tensor ptr = ptr_t.contiguous(), values = values_t.contiguous();
  const at::Tensor grad = grad_t != nullptr ? grad_t->contiguous() : at::Tensor();
  at::Tensor out = at::empty_like(values);
  const int64_t num_dst = ptr.numel() - 1;
  if (values.numel() > 0 && num_dst > 0) {
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, values.scalar_type(), "edge_softmax_cuda", [&] {
      edge_softmax_kernel<scalar_t><<<blocks_for(num_dst * 32), kThreads, 0, stream>>>(
          ptr.data_ptr<int64_t>(), values.data_ptr<scalar_t>(), grad.defined() ? grad.data_ptr<scalar_t>() : nullptr,
          out.data_ptr<scalar_t>(), num_dst, values.size(1));
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return out;
}

at::Tensor edge_softmax_cuda(const at::Tensor& ptr, const at::Tensor& logits) {
  return softmax_launch(ptr, logits, nullptr, "edge_softmax");
}

at::Tensor edge_softmax_backward_cuda(const at::Tensor& ptr, const at::Tensor& out, const at::Tensor& grad) {
  return softmax_launch(ptr, out, &grad, "edge_softmax_backward");
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CUDA, m) {
  m.impl("spmm", &spmm_cuda);
  m.impl("spmm_add_", &spmm_add_cuda);
  m.impl("spmm_transposed", &spmm_transposed_cuda);
  m.impl("csr_ptr", &csr_ptr_cuda);
  m.impl("mean_edge_weight", &mean_edge_weight_cuda);
  m.impl("spmm_extremum_backward", &spmm_extremum_backward_cuda);
  m.impl("sddmm", &sddmm_cuda);
  m.impl("edge_softmax", &edge_softmax_cuda);
  m.impl("edge_softmax_backward", &edge_softmax_backward_cuda);
}

}  // namespace pyg_accel
