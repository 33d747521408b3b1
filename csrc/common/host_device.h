// PYG_ACCEL_HD marks the small inline functions that CPU and CUDA code share (compiled
// for both host and device under nvcc, plain inline otherwise).
#pragma once

#ifdef __CUDACC__
#define PYG_ACCEL_HD __host__ __device__ __forceinline__
#else
#define PYG_ACCEL_HD inline
#endif

// PYG_ACCEL_HD_INLINE: the same for larger shared functions (inlined where the compiler
// chooses).
#ifdef __CUDACC__
#define PYG_ACCEL_HD_INLINE __host__ __device__ inline
#else
#define PYG_ACCEL_HD_INLINE inline
#endif
