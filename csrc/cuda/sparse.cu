// CUDA SpMM, SDDMM and edge softmax over a destination-sorted COO graph (schemas and
// semantics: csrc/ops.cpp).
//
// SpMM follows GNNOne's edge-balanced layout: each warp takes fixed chunks of
// consecutive edges whatever the degrees, split into thread groups sized to the
// feature width; a group keeps a running sum in registers across consecutive edges of
// one destination and adds it to the output (atomically) only when the destination
// changes. Features wider than one group's slice are split over blockIdx.y.
// SDDMM gives each edge a thread group that reduces its dot products by shuffles.
// Edge softmax gives each destination a warp.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>

#include "../sparse_common.h"

namespace pyg_accel {
namespace {

constexpr int kThreads = 256;
constexpr int kChunk = 128;      // edges per warp per step (GNNOne's CACHE_SIZE)
constexpr int kPerLane = 4;      // features per lane in an SpMM feature slice

int group_size(int64_t width) {  // lanes per group: a power of two covering width, at most 32
  int g = 1;
  while (g < 32 && g < width) g <<= 1;
  return g;
}

unsigned blocks_for(int64_t threads) {
  return static_cast<unsigned>(std::min<int64_t>(std::max<int64_t>(1, (threads + kThreads - 1) / kThreads), 65535 * 32));
}

template <typename scalar_t, typename acc_t, typename index_t>
__global__ void spmm_kernel(const index_t* __restrict__ dst, const index_t* __restrict__ src,
                            const scalar_t* __restrict__ weight, const scalar_t* __restrict__ x, acc_t* __restrict__ out,
                            int64_t num_edges, int64_t heads, int64_t channels, int tpg) {
  const int64_t F = heads * channels;
  const int lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg, groups = 32 / tpg;
  const int64_t f0 = static_cast<int64_t>(blockIdx.y) * tpg * kPerLane + gl;  // this lane's first feature
  const int64_t per_group = kChunk / groups;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t base = warp * kChunk; base < num_edges; base += num_warps * kChunk) {
    const int64_t first = base + group * per_group, last = min(first + per_group, num_edges);
    acc_t acc[kPerLane] = {};
    int64_t cur = -1;
    for (int64_t e = first; e < last; ++e) {
      const int64_t d = dst[e];
      if (d != cur) {
        if (cur >= 0) {
#pragma unroll
          for (int j = 0; j < kPerLane; ++j) {
            const int64_t f = f0 + j * tpg;
            if (f < F) atomicAdd(out + cur * F + f, acc[j]);
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
          const acc_t w = weight != nullptr ? static_cast<acc_t>(weight[e * heads + f / channels]) : acc_t(1);
          acc[j] += w * static_cast<acc_t>(row[f]);
        }
      }
    }
    if (cur >= 0) {
#pragma unroll
      for (int j = 0; j < kPerLane; ++j) {
        const int64_t f = f0 + j * tpg;
        if (f < F) atomicAdd(out + cur * F + f, acc[j]);
      }
    }
  }
}

#ifdef PYG_ACCEL_SPMM_V2
// PYG_ACCEL_SPMM_V2 (variant, off by default until measured: scripts/sparse_variants.sh):
// GNNOne's two-stage SpMM for fp32 rows of F % 4 == 0, and a matching SDDMM. Stage 1: a warp copies its chunk's ids (and,
// for one head, weights) into shared memory with coalesced loads. Stage 2: groups of
// `tpg` lanes each take consecutive cached edges; a lane owns 4 consecutive features
// (one 16-byte load per edge, its head index fixed), keeps a running float4 sum and
// flushes it at destination changes. Features beyond tpg * 4 go to blockIdx.y slices.
constexpr int kWarpsPerBlock = kThreads / 32;

template <typename index_t>
__global__ void spmm_v2_kernel(const index_t* __restrict__ dst, const index_t* __restrict__ src,
                               const float* __restrict__ weight, const float* __restrict__ x, float* __restrict__ out,
                               int64_t num_edges, int64_t heads, int64_t channels, int tpg) {
  __shared__ int64_t s_dst[kWarpsPerBlock][kChunk];
  __shared__ int64_t s_src[kWarpsPerBlock][kChunk];
  __shared__ float s_w[kWarpsPerBlock][kChunk];
  const int64_t F = heads * channels;
  const int wib = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg;
  const int groups = 32 / tpg, per_group = kChunk / groups;
  const int64_t f = (static_cast<int64_t>(blockIdx.y) * tpg + gl) * 4;  // this lane's 4 features
  const bool has_f = f < F;
  const int64_t head = has_f ? f / channels : 0;
  const bool staged_w = weight != nullptr && heads == 1;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + wib;
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t base = warp * kChunk; base < num_edges; base += num_warps * kChunk) {
#pragma unroll
    for (int k = 0; k < kChunk / 32; ++k) {  // Stage 1
      const int slot = k * 32 + lane;
      const int64_t e = base + slot;
      const bool ok = e < num_edges;
      s_dst[wib][slot] = ok ? static_cast<int64_t>(dst[e]) : -1;
      s_src[wib][slot] = ok ? static_cast<int64_t>(src[e]) : 0;
      if (staged_w) s_w[wib][slot] = ok ? weight[e] : 0.f;
    }
    __syncwarp();
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
    int64_t cur = -1;
    for (int i = group * per_group; i < (group + 1) * per_group; ++i) {  // Stage 2
      const int64_t d = s_dst[wib][i];
      if (d < 0) break;
      if (d != cur) {
        if (cur >= 0 && has_f) {
          float* o = out + cur * F + f;
          atomicAdd(o, acc.x), atomicAdd(o + 1, acc.y), atomicAdd(o + 2, acc.z), atomicAdd(o + 3, acc.w);
        }
        acc = make_float4(0.f, 0.f, 0.f, 0.f);
        cur = d;
      }
      if (has_f) {
        const float w = weight == nullptr ? 1.f : (staged_w ? s_w[wib][i] : weight[(base + i) * heads + head]);
        const float4 v = *reinterpret_cast<const float4*>(x + s_src[wib][i] * F + f);
        acc.x += w * v.x, acc.y += w * v.y, acc.z += w * v.z, acc.w += w * v.w;
      }
    }
    if (cur >= 0 && has_f) {
      float* o = out + cur * F + f;
      atomicAdd(o, acc.x), atomicAdd(o + 1, acc.y), atomicAdd(o + 2, acc.z), atomicAdd(o + 3, acc.w);
    }
    __syncwarp();  // the chunk's cache is read before the next chunk overwrites it
  }
}

// Launches the v2 kernel when its layout applies (fp32, 4 | C, 16-byte aligned rows).
bool try_spmm_v2(const at::Tensor& dst, const at::Tensor& src, const at::Tensor& weight, const at::Tensor& x,
                 at::Tensor& out, int64_t E, int64_t H, int64_t C, cudaStream_t stream) {
  if (x.scalar_type() != at::kFloat || C % 4 != 0 || reinterpret_cast<uintptr_t>(x.data_ptr()) % 16 != 0) {
    return false;
  }
  const int64_t F = H * C;
  const int tpg = group_size(F / 4);
  const int64_t slices = (F / 4 + tpg - 1) / tpg;
  const int64_t warps = (E + kChunk - 1) / kChunk;
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock, 65535 * 32)),
                  static_cast<unsigned>(slices));
  AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "spmm_v2_index", [&] {
    spmm_v2_kernel<index_t><<<grid, kThreads, 0, stream>>>(
        dst.data_ptr<index_t>(), src.data_ptr<index_t>(), weight.defined() ? weight.data_ptr<float>() : nullptr,
        x.data_ptr<float>(), out.data_ptr<float>(), E, H, C, tpg);
  });
  return true;
}
// SDDMM for one head of fp32 channels, C % 4 == 0: the warp's chunk ids staged as in
// SpMM; a group of `tpg` lanes per edge, consecutive cached edges per group, a[dst]
// kept in registers while the destination repeats (edges are sorted by it), 16-byte
// loads, a shuffle reduction per edge.
template <typename index_t>
__global__ void sddmm_v2_kernel(const index_t* __restrict__ dst, const index_t* __restrict__ src,
                                const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out,
                                int64_t num_edges, int64_t channels, int tpg) {
  __shared__ int64_t s_dst[kWarpsPerBlock][kChunk];
  __shared__ int64_t s_src[kWarpsPerBlock][kChunk];
  const int wib = threadIdx.x / 32, lane = threadIdx.x % 32, group = lane / tpg, gl = lane % tpg;
  const int groups = 32 / tpg, per_group = kChunk / groups;
  const int64_t quads = channels / 4;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + wib;
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * kWarpsPerBlock;
  for (int64_t base = warp * kChunk; base < num_edges; base += num_warps * kChunk) {
#pragma unroll
    for (int k = 0; k < kChunk / 32; ++k) {
      const int slot = k * 32 + lane;
      const int64_t e = base + slot;
      s_dst[wib][slot] = e < num_edges ? static_cast<int64_t>(dst[e]) : -1;
      s_src[wib][slot] = e < num_edges ? static_cast<int64_t>(src[e]) : 0;
    }
    __syncwarp();
    int64_t cur = -1;
    float4 ar = make_float4(0.f, 0.f, 0.f, 0.f);  // a[cur], this lane's first quad (reused)
    for (int i = group * per_group; i < (group + 1) * per_group; ++i) {  // same trips for every lane
      const int64_t d = s_dst[wib][i];
      float sum = 0.f;
      if (d >= 0) {
        if (d != cur && gl < quads) ar = reinterpret_cast<const float4*>(a + d * channels)[gl];
        cur = d;
        const float4* brow = reinterpret_cast<const float4*>(b + s_src[wib][i] * channels);
        for (int64_t q = gl; q < quads; q += tpg) {
          const float4 av = q == gl ? ar : reinterpret_cast<const float4*>(a + d * channels)[q];
          const float4 bv = brow[q];
          sum += av.x * bv.x + av.y * bv.y + av.z * bv.z + av.w * bv.w;
        }
      }
      for (int o = tpg / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o, tpg);
      if (d >= 0 && gl == 0) out[base + i] = sum;
    }
    __syncwarp();
  }
}

bool try_sddmm_v2(const at::Tensor& dst, const at::Tensor& src, const at::Tensor& a, const at::Tensor& b,
                  at::Tensor& out, int64_t E, int64_t H, int64_t C, cudaStream_t stream) {
  if (a.scalar_type() != at::kFloat || H != 1 || C % 4 != 0 || reinterpret_cast<uintptr_t>(a.data_ptr()) % 16 ||
      reinterpret_cast<uintptr_t>(b.data_ptr()) % 16) {
    return false;
  }
  const int tpg = group_size(C / 4);
  const int64_t warps = (E + kChunk - 1) / kChunk;
  const unsigned grid = static_cast<unsigned>(std::min<int64_t>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock,
                                                                65535 * 32));
  AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "sddmm_v2_index", [&] {
    sddmm_v2_kernel<index_t><<<grid, kThreads, 0, stream>>>(dst.data_ptr<index_t>(), src.data_ptr<index_t>(),
                                                             a.data_ptr<float>(), b.data_ptr<float>(),
                                                             out.data_ptr<float>(), E, C, tpg);
  });
  return true;
}
#endif  // PYG_ACCEL_SPMM_V2

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

template <typename acc_t>
__device__ __forceinline__ acc_t warp_max(acc_t v) {
  for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

template <typename acc_t>
__device__ __forceinline__ acc_t warp_sum(acc_t v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// One warp per destination (grid-stride); backward when grad != nullptr.
template <typename scalar_t>
__global__ void edge_softmax_kernel(const int64_t* __restrict__ ptr, const scalar_t* __restrict__ values,
                                    const scalar_t* __restrict__ grad, scalar_t* __restrict__ out, int64_t num_dst,
                                    int64_t heads) {
  using acc_t = at::opmath_type<scalar_t>;
  const int lane = threadIdx.x % 32;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int64_t num_warps = static_cast<int64_t>(gridDim.x) * blockDim.x / 32;
  for (int64_t d = warp; d < num_dst; d += num_warps) {
    const int64_t begin = ptr[d], end = ptr[d + 1];
    for (int64_t h = 0; h < heads; ++h) {
      if (grad == nullptr) {  // forward: values are logits
        acc_t mx = -INFINITY;
        for (int64_t e = begin + lane; e < end; e += 32) mx = max(mx, static_cast<acc_t>(values[e * heads + h]));
        mx = warp_max(mx);
        acc_t sum = 0;
        for (int64_t e = begin + lane; e < end; e += 32) sum += exp(static_cast<acc_t>(values[e * heads + h]) - mx);
        const acc_t scale = acc_t(1) / (warp_sum(sum) + acc_t(1e-16));
        for (int64_t e = begin + lane; e < end; e += 32) {
          out[e * heads + h] = static_cast<scalar_t>(exp(static_cast<acc_t>(values[e * heads + h]) - mx) * scale);
        }
      } else {  // backward: values are the softmax outputs
        acc_t dot = 0;
        for (int64_t e = begin + lane; e < end; e += 32) {
          dot += static_cast<acc_t>(values[e * heads + h]) * static_cast<acc_t>(grad[e * heads + h]);
        }
        dot = warp_sum(dot);
        for (int64_t e = begin + lane; e < end; e += 32) {
          out[e * heads + h] = static_cast<scalar_t>(static_cast<acc_t>(values[e * heads + h]) *
                                                     (static_cast<acc_t>(grad[e * heads + h]) - dot));
        }
      }
    }
  }
}

at::Tensor spmm_cuda(const at::Tensor& ptr, const at::Tensor& dst_t, const at::Tensor& src_t,
                     const std::optional<at::Tensor>& weight_t, const at::Tensor& x_t) {
  const int64_t E = check_sparse_graph(ptr, dst_t, src_t, "spmm");
  check_node_values(x_t, ptr, "spmm", "x");
  const int64_t H = x_t.size(1), C = x_t.size(2), num_dst = ptr.numel() - 1, F = H * C;
  if (weight_t.has_value()) {
    check_edge_values(*weight_t, ptr, E, H, "spmm", "weight");
    TORCH_CHECK(weight_t->scalar_type() == x_t.scalar_type(), "spmm: weight and x must share one dtype");
  }
  const c10::cuda::CUDAGuard guard(ptr.device());
  const at::Tensor dst = dst_t.contiguous(), src = src_t.contiguous(), x = x_t.contiguous();
  const at::Tensor weight = weight_t.has_value() ? weight_t->contiguous() : at::Tensor();
  const at::ScalarType acc_type = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor acc = at::zeros({num_dst, H, C}, x.options().dtype(acc_type));
  if (E > 0 && F > 0) {
    const int tpg = group_size((F + kPerLane - 1) / kPerLane);
    const int64_t slices = (F + tpg * kPerLane - 1) / (tpg * kPerLane);
    const dim3 grid(blocks_for((E + kChunk - 1) / kChunk * 32), static_cast<unsigned>(slices));
    cudaStream_t stream = at::cuda::getCurrentCUDAStream();
#ifdef PYG_ACCEL_SPMM_V2
    if (try_spmm_v2(dst, src, weight, x, acc, E, H, C, stream)) {
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return acc;
    }
#endif
    AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_cuda", [&] {
      using acc_t = at::opmath_type<scalar_t>;
      AT_DISPATCH_INDEX_TYPES(src.scalar_type(), "spmm_cuda_index", [&] {
        spmm_kernel<scalar_t, acc_t, index_t><<<grid, kThreads, 0, stream>>>(
            dst.data_ptr<index_t>(), src.data_ptr<index_t>(), weight.defined() ? weight.data_ptr<scalar_t>() : nullptr,
            x.data_ptr<scalar_t>(), acc.data_ptr<acc_t>(), E, H, C, tpg);
      });
    });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return acc.scalar_type() == x.scalar_type() ? acc : acc.to(x.scalar_type());
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
#ifdef PYG_ACCEL_SPMM_V2
    if (try_sddmm_v2(dst, src, a, b, out, E, H, C, stream)) {
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return out;
    }
#endif
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
  m.impl("sddmm", &sddmm_cuda);
  m.impl("edge_softmax", &edge_softmax_cuda);
  m.impl("edge_softmax_backward", &edge_softmax_backward_cuda);
}

}  // namespace pyg_accel
