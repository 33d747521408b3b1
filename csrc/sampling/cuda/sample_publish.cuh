// The last step of a CUDA sample (both samplers): its device counters out to pinned
// host memory (the call's one read, zero-copy), and zeroed for the next sample.
#pragma once

#include <cstdint>

#include "sample_launch.cuh"

namespace pyg_accel {

// Where the counters go (`n` words), and the last kernel's finished blocks.
struct PublishArgs {
  int64_t* counters;
  int64_t* host_counts;
  int64_t n;
  unsigned int* blocks_done;  // blocks of the last kernel that have finished (zero between samples)
};

__device__ __forceinline__ void publish_counts(const PublishArgs& p) {
  for (int64_t j = threadIdx.x; j < p.n; j += blockDim.x) {
    p.host_counts[j] = p.counters[j];
    p.counters[j] = 0;
  }
}

namespace {

// The last step of a sample whose last kernel does not publish (the heterogeneous one's,
// a homogeneous one's with no hops). One block.
__global__ void publish_kernel(PublishArgs p) {
  after_previous_kernel();
  publish_counts(p);
}

}  // namespace
}  // namespace pyg_accel
