// GNNOne's two-stage SpMM and SDDMM with 16-byte feature loads (included by sparse.cu).
//
// A warp owns a chunk of consecutive (dst-sorted) edges; a group of `tpg` lanes owns
// kRun (or more) consecutive edges of it, so that a destination's run is rarely cut.
// Stage 1: per round the warp copies kStage of the chunk's ids, and for one head their
// weights, into shared memory with coalesced loads, laid out per group with one
// padding word so that groups reading their slot i in lock-step hit distinct banks.
// Stage 2: lane `gl` of a group owns the 16-byte vector q = blockIdx.y * tpg + gl of
// each feature row (VEC elements, one head). kUnroll edges are loaded before any is
// consumed, so a lane keeps kUnroll gathers in flight. SpMM keeps a running sum and
// flushes it when the destination changes: with float4 atomics (sm_90) for the runs of
// rows that other groups share (cut by a group boundary; only a group's first and last
// runs can be), and with plain stores for every other run, which holds all of its
// row's edges. For rows of 512 bytes or more only shared rows and rows without edges
// are zero-filled beforehand (zero_shared_rows_kernel), not the whole output (see
// shared_rows_fill in sparse.cu). SDDMM keeps a[dst] in registers while
// the destination repeats and reduces each edge's products over the lanes of its head
// with shuffles.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

namespace pyg_accel {
namespace vec {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kStage = 128;   // edges a warp stages per round (GNNOne's CACHE_SIZE)
constexpr int kRun = 64;      // SpMM: fewest consecutive edges per group (whatever the group count)
// The same for max aggregation, whose cut runs merge by compare-and-swap loops, one per
// feature, rather than one vector atomic add per 16 bytes: longer runs cut fewer rows.
#ifndef PYG_ACCEL_MAX_RUN
#define PYG_ACCEL_MAX_RUN 1024
#endif
constexpr int kMaxRun = PYG_ACCEL_MAX_RUN;
constexpr int kUnroll = 4;    // gathers in flight per lane; divides every group's share per round
constexpr int kSlots = kStage + 32;  // a round plus one padding word per group (<= 32 groups)
// SpMM blocks per SM the register budget must allow. Uncapped (1), ptxas takes 77
// registers: 3 blocks per SM on an H100, where ncu found the kernel latency-bound (35%
// of warps active, DRAM at 52% at F = 16). 4 (64 registers, 16 bytes spilled for fp32):
// F = 32 2.74 -> 2.54 ms on the products-size graph, F = 16 2.08 -> 2.05 ms; 5 spills
// ~90 bytes and is slower (2.43 ms at F = 16).
#ifndef PYG_ACCEL_SPMM_MIN_BLOCKS
#define PYG_ACCEL_SPMM_MIN_BLOCKS 4
#endif
constexpr int kSpmmMinBlocks = PYG_ACCEL_SPMM_MIN_BLOCKS;

template <typename scalar_t>
struct Width {
  static constexpr int kVec = 16 / sizeof(scalar_t);  // elements per 16-byte load
};

// How a warp's chunk splits: `groups` groups of `tpg` lanes, each owning `per_group`
// (at least `min_run`) consecutive edges, staged in `rounds` rounds of `per_round` edges
// per group, `stage` edges per warp and round (kStage, or a smaller power of two of at
// least 32 and of kUnroll edges per group). SpMM asks for long runs (a cut run costs an
// atomic flush); SDDMM, whose cut runs only reload a[dst], takes one round. The host
// picks the chunk (a kernel argument; see fill_chunk in sparse.cu).
struct Chunk {
  int groups, per_round, per_group, rounds, stage;
  __host__ __device__ Chunk(int tpg, int min_run, int stage_edges = kStage)
      : groups(32 / tpg), per_round(stage_edges / groups), per_group(per_round > min_run ? per_round : min_run),
        rounds(per_group / per_round), stage(stage_edges) {}
  __host__ __device__ int64_t edges() const { return static_cast<int64_t>(groups) * per_group; }
  __host__ __device__ int tpg() const { return 32 / groups; }
};

template <typename scalar_t, typename acc_t>
__device__ __forceinline__ void widen(const uint4& raw, acc_t (&v)[Width<scalar_t>::kVec]) {
  const scalar_t* s = reinterpret_cast<const scalar_t*>(&raw);
#pragma unroll
  for (int j = 0; j < Width<scalar_t>::kVec; ++j) v[j] = static_cast<acc_t>(s[j]);
}

__device__ __forceinline__ uint4 load16(const void* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

// Adds a running sum into its output row and clears it: atomically when other groups
// may add to the row too, with plain stores when this group holds all of the row's
// edges (the row was zero-filled; with kAdd the row's old value is read and added).
template <bool kAdd = false, int N>
__device__ __forceinline__ void flush(float* o, float (&acc)[N], bool shared_row) {
#pragma unroll
  for (int j = 0; j < N; j += 4) {
    float4 v = make_float4(acc[j], acc[j + 1], acc[j + 2], acc[j + 3]);
    if (!shared_row) {
      if (kAdd) {
        const float4 old = *reinterpret_cast<const float4*>(o + j);
        v = make_float4(old.x + v.x, old.y + v.y, old.z + v.z, old.w + v.w);
      }
      *reinterpret_cast<float4*>(o + j) = v;
    } else {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
      atomicAdd(reinterpret_cast<float4*>(o + j), v);
#else
      atomicAdd(o + j, v.x), atomicAdd(o + j + 1, v.y), atomicAdd(o + j + 2, v.z), atomicAdd(o + j + 3, v.w);
#endif
    }
  }
#pragma unroll
  for (int j = 0; j < N; ++j) acc[j] = 0.f;
}

template <bool kAdd = false, int N>
__device__ __forceinline__ void flush(double* o, double (&acc)[N], bool shared_row) {
#pragma unroll
  for (int j = 0; j < N; ++j) {
    if (shared_row) {
      atomicAdd(o + j, acc[j]);
    } else {
      o[j] = kAdd ? o[j] + acc[j] : acc[j];
    }
    acc[j] = 0.0;
  }
}

// How spmm_vec_kernel reduces a destination's run of edges, for one lane's V features
// from feature f. A policy is built in the kernel from its Params (a kernel argument);
// begin(d) starts a run of destination d, add(w, v, s) takes an edge from source s with
// weight w and x[s]'s features v, and flush(o, shared) ends the run into its output row
// o (shared: other groups add to that row too).
// - SumRun: w * v summed in acc_t, flushed by `flush` (plain stores, or atomic adds for
//   shared runs); with kMean scaled first by 1 / max(1, in-degree of d) (a shared run's
//   part too: the parts then add up to the mean).
// - ExtremumRun: each feature's extremum (reduction R: max or min) and how many edges reach it,
//   packed into 64 bits ((float bits) << 32 | count; a packed 0 is "no edge yet"),
//   flushed by plain stores, or for shared runs by a compare-and-swap merge (spmm_cuda
//   unpacks them into the extremum and its tie count).
// - ExtremumGradRun: the backward of max / min over the same edges: each source whose
//   feature equals the run's extremum gets the destination's gradient over its share of
//   the ties, added atomically to an fp32 grad_x (its flush writes nothing).
struct NoParams {};
struct MeanParams {
  const int64_t* ptr;  // the graph's ptr: the in-degree of d is ptr[d + 1] - ptr[d]
};

template <typename acc_t, int V, bool kAdd, bool kMean>
struct SumRun {
  using Out = acc_t;
  using Params = std::conditional_t<kMean, MeanParams, NoParams>;
  static constexpr int kMinRun = kRun;
  acc_t acc[V] = {};
  Params p;
  acc_t scale = acc_t(1);
  __device__ __forceinline__ SumRun(const Params& params, int64_t, int64_t) : p(params) {}
  __device__ __forceinline__ void begin(int64_t d) {
    if constexpr (kMean) {
      const int64_t degree = __ldg(p.ptr + d + 1) - __ldg(p.ptr + d);
      scale = acc_t(1) / static_cast<acc_t>(degree > 1 ? degree : 1);
    }
  }
  __device__ __forceinline__ void add(acc_t w, const acc_t (&v)[V], int64_t) {
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] += w * v[j];
  }
  __device__ __forceinline__ void flush(Out* o, bool shared_row) {
    if constexpr (kMean) {
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] *= scale;
    }
    vec::flush<kAdd>(o, acc, shared_row);
  }
};

__device__ __forceinline__ unsigned long long pack_extremum(float best, int count) {
  return (static_cast<unsigned long long>(__float_as_uint(best)) << 32) | static_cast<unsigned>(count);
}

// Two (extremum, count) states of reduction R merged, as ExtremumForward::merge in sparse.cu.
template <Reduce R>
__device__ __forceinline__ unsigned long long merge_extremum(unsigned long long a, unsigned long long b) {
  const unsigned ca = static_cast<unsigned>(a), cb = static_cast<unsigned>(b);
  const float ba = __uint_as_float(static_cast<unsigned>(a >> 32)), bb = __uint_as_float(static_cast<unsigned>(b >> 32));
  if (ca == 0 || (cb > 0 && beats<R>(bb, ba))) return b;
  if (cb == 0 || beats<R>(ba, bb)) return a;
  return (a & 0xffffffff00000000ull) | (ca + cb);
}

// kRunEdges: the fewest edges per group (kMaxRun, 256 or kRun: a graph too small to fill
// the GPU with long runs takes shorter ones, see max_run_edges in sparse.cu).
template <int V, int kRunEdges, Reduce R>
struct ExtremumRun {
  using Out = unsigned long long;
  using Params = NoParams;
  static constexpr int kMinRun = kRunEdges;
  float best[V];
  int count[V];
  __device__ __forceinline__ ExtremumRun(const Params&, int64_t, int64_t) { clear(); }
  __device__ __forceinline__ void clear() {
#pragma unroll
    for (int j = 0; j < V; ++j) best[j] = 0.f, count[j] = 0;
  }
  __device__ __forceinline__ void begin(int64_t) {}
  __device__ __forceinline__ void add(float, const float (&v)[V], int64_t) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (count[j] == 0 || beats<R>(v[j], best[j])) {
        best[j] = v[j], count[j] = 1;
      } else if (v[j] == best[j]) {
        ++count[j];
      }
    }
  }
  __device__ __forceinline__ void flush(Out* o, bool shared_row) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const Out mine = pack_extremum(best[j], count[j]);
      if (!shared_row) {
        o[j] = mine;
      } else {
        // (States only move towards the extremum, so a stale read that already dominates
        // `mine` needs no write.)
        Out old = o[j], seen, merged;
        do {
          seen = old;
          merged = merge_extremum<R>(seen, mine);
          if (merged == seen) break;
          old = atomicCAS(o + j, seen, merged);
        } while (old != seen);
      }
    }
    clear();
  }
};

template <typename scalar_t, int V>
struct ExtremumGradRun {
  using Out = float;
  static constexpr int kMinRun = kRun;
  struct Params {
    const scalar_t* out;  // the forward's extremum and the gradient of out, [num_dst, F]
    const int* ties;
    const scalar_t* grad;
    float* grad_x;  // [num_src, F], zero-filled
  };
  Params p;
  int64_t F, f;
  float best[V], route[V];
  __device__ __forceinline__ ExtremumGradRun(const Params& params, int64_t F, int64_t f) : p(params), F(F), f(f) {}
  __device__ __forceinline__ void begin(int64_t d) {
    const int64_t at = d * F + f;
    widen<scalar_t, float>(load16(p.out + at), best);
    widen<scalar_t, float>(load16(p.grad + at), route);
#pragma unroll
    for (int j = 0; j < V; ++j) route[j] /= extremum_share(best[j], __ldg(p.ties + at + j));
  }
  __device__ __forceinline__ void add(float, const float (&v)[V], int64_t s) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      if (extremum_reaches(v[j], best[j])) atomicAdd(p.grad_x + s * F + f + j, route[j]);
    }
  }
  __device__ __forceinline__ void flush(Out*, bool) {}
};

template <typename scalar_t, typename acc_t, bool kAdd, bool kMean = false>
using SumOf = SumRun<acc_t, Width<scalar_t>::kVec, kAdd, kMean>;
template <typename scalar_t, Reduce R, int kRunEdges = kMaxRun>
using ExtremumOf = ExtremumRun<Width<scalar_t>::kVec, kRunEdges, R>;
template <typename scalar_t>
using ExtremumGradOf = ExtremumGradRun<scalar_t, Width<scalar_t>::kVec>;

// Stage 1, round r of the chunk at `base`: group g's edges
// [base + g * per_group + r * per_round, + per_round) into its cache row
// (dst = -1 past the end). Returns after the warp's writes are visible.
template <typename index_t, typename scalar_t, typename acc_t>
__device__ __forceinline__ void stage_round(const index_t* __restrict__ dst, const index_t* __restrict__ src,
                                            const scalar_t* __restrict__ weight, int64_t base, int r,
                                            int64_t num_edges, const Chunk& c, int lane, index_t* s_dst,
                                            index_t* s_src, acc_t* s_w) {
  __syncwarp();  // the previous round has been read
#pragma unroll
  for (int k = 0; k < kStage / 32; ++k) {
    if (k * 32 >= c.stage) break;
    const int s = k * 32 + lane, g = s / c.per_round, j = s % c.per_round;
    const int slot = g * (c.per_round + 1) + j;
    const int64_t e = base + static_cast<int64_t>(g) * c.per_group + static_cast<int64_t>(r) * c.per_round + j;
    const bool ok = e < num_edges;
    s_dst[slot] = ok ? dst[e] : index_t(-1);
    s_src[slot] = ok ? src[e] : index_t(0);
    if (s_w != nullptr) s_w[slot] = ok ? static_cast<acc_t>(weight[e]) : acc_t(0);
  }
  __syncwarp();
}

// Whether destination row d, whose edges are [begin, end) of the sorted COO, is empty
// or cut by a boundary between two groups of 2^group_shift edges (groups start at
// multiples of it): the rows SpMM must zero-fill and add to atomically.
__device__ __forceinline__ bool row_needs_zeros(int64_t begin, int64_t end, int group_shift) {
  return begin == end || (begin >> group_shift) != ((end - 1) >> group_shift);
}

// Zero-fills the rows of `out` ([num_dst, row_vecs] 16-byte vectors) that
// row_needs_zeros picks; the others are written whole by one group's plain store.
// 2^lane_shift threads share a row (one read of its ptr pair), striding its vectors.
__global__ void zero_shared_rows_kernel(const int64_t* __restrict__ ptr, uint4* __restrict__ out, int64_t num_dst,
                                        int64_t row_vecs, int lane_shift, int group_shift) {
  const int64_t n = num_dst << lane_shift, stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t lanes = int64_t(1) << lane_shift;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < n; t += stride) {
    const int64_t d = t >> lane_shift;
    if (!row_needs_zeros(__ldg(ptr + d), __ldg(ptr + d + 1), group_shift)) continue;
    for (int64_t q = t & (lanes - 1); q < row_vecs; q += lanes) out[d * row_vecs + q] = make_uint4(0, 0, 0, 0);
  }
}

// Whether the sorted COO's edges e - 1 and e (0 < e < num_edges) share a destination,
// i.e. a boundary at e cuts a row.
template <typename index_t>
__device__ __forceinline__ bool cuts_row(const index_t* __restrict__ dst, int64_t e, int64_t num_edges) {
  return e > 0 && e < num_edges && __ldg(dst + e - 1) == __ldg(dst + e);
}

// out[dst_e, q] += w_e * x[src_e, q] for 16-byte vectors q, acc_t. `exact`: only the
// rows row_needs_zeros picks were zero-filled, and only they are added to atomically;
// otherwise the whole output was, and a group's first and last runs always are.
// kAdd: out holds values to add to (nothing was zero-filled; call with exact = false):
// rows held whole by a group are read, added to and stored.
// `weight` is [E, H] (nullptr: 1); one head's weights are staged with the ids.
// Run: the reduction (SumOf above, or ExtremumOf / ExtremumGradOf for max / min
// aggregation and its backward, with no weights). `c`: the warp's chunk of edges, groups
// of c.tpg() lanes (runs of Run::kMinRun edges per group at least, unless the host
// shortened them to fill the GPU).
template <typename scalar_t, typename acc_t, typename index_t, typename Run>
__global__ void __launch_bounds__(kThreads, kSpmmMinBlocks) spmm_vec_kernel(
    const index_t* __restrict__ dst, const index_t* __restrict__ src, const scalar_t* __restrict__ weight,
    const scalar_t* __restrict__ x, typename Run::Out* __restrict__ out, int64_t num_edges, int64_t heads,
    int64_t channels, const Chunk c, bool exact, const typename Run::Params params) {
  constexpr int V = Width<scalar_t>::kVec;
  __shared__ index_t s_dst_all[kWarps][kSlots];
  __shared__ index_t s_src_all[kWarps][kSlots];
  __shared__ acc_t s_w_all[kWarps][kSlots];
  const int tpg = c.tpg(), wib = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg;
  const int64_t F = heads * channels;
  const int64_t f = (static_cast<int64_t>(blockIdx.y) * tpg + gl) * V;  // this lane's first feature
  const bool has_f = f < F;
  const int64_t head = has_f ? f / channels : 0;
  const bool staged_w = weight != nullptr && heads == 1;
  index_t* s_dst = s_dst_all[wib];
  index_t* s_src = s_src_all[wib];
  acc_t* s_w = staged_w ? s_w_all[wib] : nullptr;
  const int first = group * (c.per_round + 1);
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t base = (static_cast<int64_t>(blockIdx.x) * kWarps + wib) * c.edges(); base < num_edges;
       base += num_warps * c.edges()) {
    const int64_t mine = base + static_cast<int64_t>(group) * c.per_group;  // this group's first edge
    Run run(params, F, f);
    int64_t cur = -1;
    // Whether the run being summed is the group's first and has edges before the group.
    bool shared_first = !exact || cuts_row(dst, mine, num_edges);
    for (int r = 0; r < c.rounds; ++r) {
      stage_round(dst, src, weight, base, r, num_edges, c, lane, s_dst, s_src, s_w);
      for (int i0 = 0; i0 < c.per_round; i0 += kUnroll) {
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
              w[u] = s_w[slot];
            } else if (weight != nullptr) {
              const int64_t e = mine + static_cast<int64_t>(r) * c.per_round + i0 + u;
              w[u] = static_cast<acc_t>(weight[e * heads + head]);
            }
          }
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (d[u] < 0 || !has_f) continue;
          if (d[u] != cur) {
            if (cur >= 0) run.flush(out + cur * F + f, shared_first);
            shared_first = shared_first && cur < 0;  // still the group's first run
            cur = d[u];
            run.begin(cur);
          }
          acc_t v[V];
          widen<scalar_t, acc_t>(raw[u], v);
          run.add(w[u], v, static_cast<int64_t>(s_src[first + i0 + u]));
        }
      }
    }
    if (cur >= 0) {  // the last run is shared too if it goes on past the group
      run.flush(out + cur * F + f, shared_first || !exact || cuts_row(dst, mine + c.per_group, num_edges));
    }
  }
}

// out[e, h] = <a[dst_e, h, :], b[src_e, h, :]> with K 16-byte vectors per lane
// (q = gl + k * tpg, tpg = c.tpg()); a head spans `lanes_per_head` lanes (a power of two
// dividing tpg), or the whole group when heads == 1.
template <typename scalar_t, typename acc_t, typename index_t, int K>
__global__ void __launch_bounds__(kThreads) sddmm_vec_kernel(
    const index_t* __restrict__ dst, const index_t* __restrict__ src, const scalar_t* __restrict__ a,
    const scalar_t* __restrict__ b, scalar_t* __restrict__ out, int64_t num_edges, int64_t heads, int64_t channels,
    const Chunk c, int lanes_per_head) {
  constexpr int V = Width<scalar_t>::kVec;
  __shared__ index_t s_dst_all[kWarps][kSlots];
  __shared__ index_t s_src_all[kWarps][kSlots];
  const int tpg = c.tpg(), wib = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg;
  const int64_t F = heads * channels;
  const int width = heads == 1 ? tpg : lanes_per_head;  // lanes that reduce one (edge, head)
  index_t* s_dst = s_dst_all[wib];
  index_t* s_src = s_src_all[wib];
  const int first = group * (c.per_round + 1);
  int64_t head[K];  // head of this lane's vector k (-1: past the row)
#pragma unroll
  for (int k = 0; k < K; ++k) {
    const int64_t f = static_cast<int64_t>(gl + k * tpg) * V;
    head[k] = f < F ? f / channels : -1;
  }
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t base = (static_cast<int64_t>(blockIdx.x) * kWarps + wib) * c.edges(); base < num_edges;
       base += num_warps * c.edges()) {
    const int64_t mine = base + static_cast<int64_t>(group) * c.per_group;  // this group's first edge
    int64_t cur = -1;
    acc_t av[K][V];  // a[cur], reused while the destination repeats
    for (int r = 0; r < c.rounds; ++r) {
      stage_round<index_t, scalar_t, acc_t>(dst, src, nullptr, base, r, num_edges, c, lane, s_dst, s_src, nullptr);
      for (int i0 = 0; i0 < c.per_round; i0 += kUnroll) {  // same trip count for every lane (shuffles below)
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
          const int64_t e = mine + static_cast<int64_t>(r) * c.per_round + i0 + u;
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
    }
  }
}

}  // namespace vec
}  // namespace pyg_accel
