// How the CUDA samplers' kernels are launched and step over their items (both
// samplers): the block size, programmatic dependent launch, grid-stride loops and grids
// capped at what the GPU holds at once, and the host's saturating bound arithmetic.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <utility>

namespace pyg_accel {
namespace {

constexpr int kBlock = 256;

// Programmatic dependent launch (sm_90+; PYG_ACCEL_SAMPLER_PDL=0 at compile time turns
// it off, a variant for comparison). Each kernel of a sample after the first is
// launched while the one before it still runs (launch_after, below): its
// blocks become resident early and wait here, before doing anything, for the previous
// grid to finish and its writes to be visible; then each lets the next kernel launch.
// Since nothing runs before the wait, the order of every read and write is as without
// it; what it saves is the next kernel's launch and block ramp-up at each of the
// sample's dependent steps.
#ifndef PYG_ACCEL_SAMPLER_PDL
#define PYG_ACCEL_SAMPLER_PDL 1
#endif
__device__ __forceinline__ void after_previous_kernel() {
#if PYG_ACCEL_SAMPLER_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ int64_t thread_count() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Element i of a sequence given by its inclusive sums.
__device__ __forceinline__ int64_t step(const int64_t* inclusive, int64_t i) {
  return inclusive[i] - (i > 0 ? inclusive[i - 1] : 0);
}

// Grid-stride over [0, n) in block-sized steps, so every warp runs the same number of
// iterations (warp votes stay legal) and a grid capped at what the GPU holds at once
// covers any n (blocks past the actual sizes cost launches: the grids are sized by
// upper bounds).
#define PYG_ACCEL_FOR_BLOCK_STRIDE(t, n)                                                                     \
  for (int64_t t##_base = static_cast<int64_t>(blockIdx.x) * blockDim.x, t = t##_base + threadIdx.x;         \
       t##_base < (n); t##_base += static_cast<int64_t>(gridDim.x) * blockDim.x, t = t##_base + threadIdx.x)

unsigned grid_for(int64_t n) { return static_cast<unsigned>(std::max<int64_t>(1, (n + kBlock - 1) / kBlock)); }

// What the launches need to know of one kernel on one GPU, looked up once per kernel
// and device: how many of its blocks the GPU runs at once (its occupancy), and whether
// it can be a programmatic dependent launch (an sm_90+ device and the kernel compiled
// for compute_90+, where after_previous_kernel() holds the wait; a compute_80 build
// JIT-compiled for an H100 has none and must launch plainly; `ptxVersion` as CUB reads it).
struct KernelFacts {
  unsigned resident_blocks;
  bool dependent_launch;
};

inline KernelFacts kernel_facts(const void* kernel) {
  static std::mutex mutex;
  static std::map<std::pair<const void*, int>, KernelFacts> known;
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(kernel, device);
  auto it = known.find(key);
  if (it == known.end()) {
    int sms = 0, per_sm = 0, major = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, 0));
    cudaFuncAttributes attributes{};
    C10_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
    const KernelFacts facts{static_cast<unsigned>(std::max(1, sms * per_sm)),
                            major >= 9 && attributes.ptxVersion >= 90};
    it = known.emplace(key, facts).first;
  }
  return it->second;
}

// The grid of a grid-stride kernel for n threads: at most the blocks of `kernel` that
// the current GPU runs at once. PYG_ACCEL_SAMPLER_CAP_GRIDS=0 launches one thread per
// item instead (a variant).
#ifndef PYG_ACCEL_SAMPLER_CAP_GRIDS
#define PYG_ACCEL_SAMPLER_CAP_GRIDS 1
#endif
template <typename Kernel>
unsigned capped_grid(Kernel kernel, int64_t n) {
  const unsigned blocks = grid_for(n);
  if (!PYG_ACCEL_SAMPLER_CAP_GRIDS) return blocks;
  return std::min(blocks, kernel_facts(reinterpret_cast<const void*>(kernel)).resident_blocks);
}

// Launches one of a sample's kernels after the first: as a programmatic dependent
// launch where supported (see after_previous_kernel), else plainly.
template <typename... Params, typename... Args>
void launch_after(void (*kernel)(Params...), unsigned grid, unsigned block, cudaStream_t stream, Args... args) {
  if (!PYG_ACCEL_SAMPLER_PDL || !kernel_facts(reinterpret_cast<const void*>(kernel)).dependent_launch) {
    kernel<<<grid, block, 0, stream>>>(args...);
    return;
  }
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args...));
}

// Saturating sums and products for the buffers' upper bounds (a saturated bound is then
// refused by the caller's size check).
inline int64_t sat_add(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b ? std::numeric_limits<int64_t>::max() : a + b;
}
inline int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a > std::numeric_limits<int64_t>::max() / b ? std::numeric_limits<int64_t>::max() : a * b;
}

}  // namespace
}  // namespace pyg_accel
