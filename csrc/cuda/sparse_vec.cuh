// GNNOne's two-stage SpMM and SDDMM with 16-byte feature loads (included by sparse.cu).
//
// Stage 1: a warp copies its chunk of kChunk consecutive (dst-sorted) edges' ids, and
// for one head their weights, into shared memory with coalesced loads; the chunk is
// laid out per thread group with one padding word so that groups reading their slot i
// in lock-step hit distinct banks.
// Stage 2: a group of `tpg` lanes takes its consecutive cached edges; lane `gl` owns the
// 16-byte vector q = blockIdx.y * tpg + gl of each feature row (VEC elements, one head).
// kUnroll edges are loaded before any is consumed, so a lane keeps kUnroll gathers in
// flight. SpMM keeps a running sum and flushes it (float4 atomics on sm_90) when the
// destination changes; SDDMM keeps a[dst] in registers while the destination repeats
// and reduces each edge's products over the lanes of its head with shuffles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pyg_accel {
namespace vec {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kChunk = 128;   // edges per warp chunk (GNNOne's CACHE_SIZE)
constexpr int kUnroll = 4;    // gathers in flight per lane; divides every group's share (>= 4)
constexpr int kSlots = kChunk + 32;  // a chunk plus one padding word per group (<= 32 groups)

template <typename scalar_t>
struct Width {
  static constexpr int kVec = 16 / sizeof(scalar_t);  // elements per 16-byte load
};

// Cache slot of chunk position s for groups of `per_group` edges.
__device__ __forceinline__ int slot_of(int s, int per_group) { return s + s / per_group; }

template <typename scalar_t, typename acc_t>
__device__ __forceinline__ void widen(const uint4& raw, acc_t (&v)[Width<scalar_t>::kVec]) {
  const scalar_t* s = reinterpret_cast<const scalar_t*>(&raw);
#pragma unroll
  for (int j = 0; j < Width<scalar_t>::kVec; ++j) v[j] = static_cast<acc_t>(s[j]);
}

__device__ __forceinline__ uint4 load16(const void* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

template <int N>
__device__ __forceinline__ void flush(float* o, float (&acc)[N]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#pragma unroll
  for (int j = 0; j < N; j += 4) {
    atomicAdd(reinterpret_cast<float4*>(o + j), make_float4(acc[j], acc[j + 1], acc[j + 2], acc[j + 3]));
  }
#else
#pragma unroll
  for (int j = 0; j < N; ++j) atomicAdd(o + j, acc[j]);
#endif
#pragma unroll
  for (int j = 0; j < N; ++j) acc[j] = 0.f;
}

template <int N>
__device__ __forceinline__ void flush(double* o, double (&acc)[N]) {
#pragma unroll
  for (int j = 0; j < N; ++j) atomicAdd(o + j, acc[j]), acc[j] = 0.0;
}

// Stage 1: the warp's chunk [base, base + kChunk) into its cache (dst = -1 past the end).
template <typename index_t, typename scalar_t>
__device__ __forceinline__ void stage_chunk(const index_t* __restrict__ dst, const index_t* __restrict__ src,
                                            const scalar_t* __restrict__ weight, int64_t base, int64_t num_edges,
                                            int per_group, int lane, index_t* s_dst, index_t* s_src, float* s_w) {
#pragma unroll
  for (int k = 0; k < kChunk / 32; ++k) {
    const int s = k * 32 + lane, slot = slot_of(s, per_group);
    const int64_t e = base + s;
    const bool ok = e < num_edges;
    s_dst[slot] = ok ? dst[e] : index_t(-1);
    s_src[slot] = ok ? src[e] : index_t(0);
    if (s_w != nullptr) s_w[slot] = ok ? static_cast<float>(weight[e]) : 0.f;
  }
  __syncwarp();
}

// out[dst_e, q] += w_e * x[src_e, q] for 16-byte vectors q; out is pre-zeroed, acc_t.
// `weight` is [E, H] (nullptr: 1); one head's weights are staged with the ids.
template <typename scalar_t, typename acc_t, typename index_t>
__global__ void __launch_bounds__(kThreads) spmm_vec_kernel(
    const index_t* __restrict__ dst, const index_t* __restrict__ src, const scalar_t* __restrict__ weight,
    const scalar_t* __restrict__ x, acc_t* __restrict__ out, int64_t num_edges, int64_t heads, int64_t channels,
    int tpg) {
  constexpr int V = Width<scalar_t>::kVec;
  __shared__ index_t s_dst_all[kWarps][kSlots];
  __shared__ index_t s_src_all[kWarps][kSlots];
  __shared__ float s_w_all[kWarps][kSlots];
  const int wib = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg;
  const int per_group = kChunk / (32 / tpg);
  const int64_t F = heads * channels;
  const int64_t f = (static_cast<int64_t>(blockIdx.y) * tpg + gl) * V;  // this lane's first feature
  const bool has_f = f < F;
  const int64_t head = has_f ? f / channels : 0;
  const bool staged_w = weight != nullptr && heads == 1;
  index_t* s_dst = s_dst_all[wib];
  index_t* s_src = s_src_all[wib];
  float* s_w = s_w_all[wib];
  const int first = group * (per_group + 1);
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t base = (static_cast<int64_t>(blockIdx.x) * kWarps + wib) * kChunk; base < num_edges;
       base += num_warps * kChunk) {
    stage_chunk(dst, src, weight, base, num_edges, per_group, lane, s_dst, s_src, staged_w ? s_w : nullptr);
    acc_t acc[V] = {};
    int64_t cur = -1;
    for (int i0 = 0; i0 < per_group; i0 += kUnroll) {
      int64_t d[kUnroll];
      uint4 raw[kUnroll];
      acc_t w[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {  // all gathers first
        const int slot = first + i0 + u;
        d[u] = static_cast<int64_t>(s_dst[slot]);
        w[u] = acc_t(1);
        if (d[u] >= 0 && has_f) {
          raw[u] = load16(x + static_cast<int64_t>(s_src[slot]) * F + f);
          if (staged_w) {
            w[u] = static_cast<acc_t>(s_w[slot]);
          } else if (weight != nullptr) {
            const int64_t e = base + (group * per_group + i0 + u);
            w[u] = static_cast<acc_t>(weight[e * heads + head]);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (d[u] < 0 || !has_f) continue;
        if (d[u] != cur) {
          if (cur >= 0) flush(out + cur * F + f, acc);
          cur = d[u];
        }
        acc_t v[V];
        widen<scalar_t, acc_t>(raw[u], v);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] += w[u] * v[j];
      }
    }
    if (cur >= 0) flush(out + cur * F + f, acc);
    __syncwarp();  // the cache is read before the next chunk overwrites it
  }
}

// out[e, h] = <a[dst_e, h, :], b[src_e, h, :]> with K 16-byte vectors per lane
// (q = gl + k * tpg); a head spans `lanes_per_head` lanes (a power of two dividing
// tpg), or the whole group when heads == 1.
template <typename scalar_t, typename acc_t, typename index_t, int K>
__global__ void __launch_bounds__(kThreads) sddmm_vec_kernel(
    const index_t* __restrict__ dst, const index_t* __restrict__ src, const scalar_t* __restrict__ a,
    const scalar_t* __restrict__ b, scalar_t* __restrict__ out, int64_t num_edges, int64_t heads, int64_t channels,
    int tpg, int lanes_per_head) {
  constexpr int V = Width<scalar_t>::kVec;
  __shared__ index_t s_dst_all[kWarps][kSlots];
  __shared__ index_t s_src_all[kWarps][kSlots];
  const int wib = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg;
  const int per_group = kChunk / (32 / tpg);
  const int64_t F = heads * channels;
  const int width = heads == 1 ? tpg : lanes_per_head;  // lanes that reduce one (edge, head)
  index_t* s_dst = s_dst_all[wib];
  index_t* s_src = s_src_all[wib];
  const int first = group * (per_group + 1);
  int64_t head[K];  // head of this lane's vector k (-1: past the row)
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t f = static_cast<int64_t>(gl + k * tpg) * V;
    head[k] = f < F ? f / channels : -1;
  }
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t base = (static_cast<int64_t>(blockIdx.x) * kWarps + wib) * kChunk; base < num_edges;
       base += num_warps * kChunk) {
    stage_chunk<index_t, scalar_t>(dst, src, nullptr, base, num_edges, per_group, lane, s_dst, s_src, nullptr);
    int64_t cur = -1;
    acc_t av[K][V];  // a[cur], reused while the destination repeats
    for (int i0 = 0; i0 < per_group; i0 += kUnroll) {  // same trip count for every lane (shuffles below)
      int64_t d[kUnroll];
      uint4 raw[kUnroll][K];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int slot = first + i0 + u;
        d[u] = static_cast<int64_t>(s_dst[slot]);
        const scalar_t* brow = b + static_cast<int64_t>(s_src[slot]) * F;
#pragma unroll
        for (int k = 0; k < K; ++k) {
          if (d[u] >= 0 && head[k] >= 0) raw[u][k] = load16(brow + static_cast<int64_t>(gl + k * tpg) * V);
        }
      }
      acc_t p[kUnroll][K];  // per-lane partial dot products
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (d[u] >= 0 && d[u] != cur) {
          cur = d[u];
#pragma unroll
          for (int k = 0; k < K; ++k) {
            if (head[k] >= 0) widen<scalar_t, acc_t>(load16(a + cur * F + static_cast<int64_t>(gl + k * tpg) * V), av[k]);
          }
        }
#pragma unroll
        for (int k = 0; k < K; ++k) {
          p[u][k] = 0;
          if (d[u] >= 0 && head[k] >= 0) {
            acc_t bv[V];
            widen<scalar_t, acc_t>(raw[u][k], bv);
#pragma unroll
            for (int j = 0; j < V; ++j) p[u][k] += av[k][j] * bv[j];
          }
        }
        if (heads == 1) {
#pragma unroll
          for (int k = 1; k < K; ++k) p[u][0] += p[u][k];
        }
      }
      const int reduced = heads == 1 ? 1 : K;  // uniform: every lane shuffles
      for (int o = width / 2; o > 0; o >>= 1) {  // the kUnroll edges' reductions interleaved
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
          for (int k = 0; k < K; ++k) {
            if (k < reduced) p[u][k] += __shfl_xor_sync(0xffffffffu, p[u][k], o);
          }
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if (d[u] < 0 || gl % width != 0) continue;
        const int64_t e = base + group * per_group + i0 + u;
        if (heads == 1) {
          out[e] = static_cast<scalar_t>(p[u][0]);
        } else {
#pragma unroll
          for (int k = 0; k < K; ++k) {
            if (head[k] >= 0) out[e * heads + head[k]] = static_cast<scalar_t>(p[u][k]);
          }
        }
      }
    }
    __syncwarp();
  }
}

}  // namespace vec
}  // namespace pyg_accel
