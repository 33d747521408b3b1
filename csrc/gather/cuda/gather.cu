// CUDA gather (WholeGraph-style): a group of threads sized to the row (a
// sub-warp for narrow rows, a warp for wide ones) copies one output row with
// the widest aligned vector loads (16 B when possible). Each table is a list
// of base pointers (shards), so the same kernel reads device memory, pinned
// host memory through its UVA pointer, and peer-GPU memory. Several tables
// that share one index are served by one launch (blockIdx.y = table).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cuda_runtime.h>

#include <cstdlib>
#include <algorithm>
#include <string>
#include <type_traits>

#include "../gather_common.h"

namespace pyg_accel {
namespace {

constexpr int kMaxShards = 8;
constexpr int kMaxTables = 8;
// Tuning knobs, overridable at build time through PYG_ACCEL_CUDA_FLAGS (-D...) for
// experiments; the defaults are the measured best on H100 (docs/benchmarks.md).
#ifndef PYG_ACCEL_GATHER_UNROLL
#define PYG_ACCEL_GATHER_UNROLL 4
#endif
#ifndef PYG_ACCEL_GATHER_MIN_BLOCKS
#define PYG_ACCEL_GATHER_MIN_BLOCKS 5
#endif
// 16-byte row loads fetch 256-byte L2 blocks: 2 (default) only for rows of a multiple
// of 256 B, 1 always, 0 never (wide_fetches below). On an H100, 2 against 1: 400 B rows
// 0.189 -> 0.168 ms (DRAM reads 291 -> 227 MB for 200 MB of rows), 128 B 0.066 -> 0.056
// ms, 256 B to 1 KB unchanged; 0 loses the 256 B fetches' gain at 512 B and 1 KB.
#ifndef PYG_ACCEL_GATHER_L2_256B
#define PYG_ACCEL_GATHER_L2_256B 2
#endif
// 1: rows of 128 B - 4 KB are staged through shared memory with cp.async, double
// buffered per warp (up to 8 KB in flight per warp without holding registers).
#ifndef PYG_ACCEL_GATHER_ASYNC
#define PYG_ACCEL_GATHER_ASYNC 0
#endif

// k > 0: gathers that read only host memory launch at most (SMs / k) blocks. They are bound by
// PCIe, which a fraction of the SMs keeps busy (each block has ~13 KB in flight); at
// full occupancy their blocks fill every SM's register file while they wait on PCIe, so
// a pipelined loader's gather stalls the training step beside it. On an H100 (132 SMs),
// k = 4 kept the pinned gather at 40-44 GB/s (41-47 with every SM) and raised the
// pipelined epoch's gain with pinned features from 1.08x to 1.32x (docs/benchmarks.md).
#ifndef PYG_ACCEL_GATHER_HOST_SM_DIVISOR
#define PYG_ACCEL_GATHER_HOST_SM_DIVISOR 4
#endif

// k > 0: gathers that read a peer GPU's memory (a sharded table's other blocks, over
// NVLink) launch at most (SMs / k) blocks, for the same reason: a pipelined loader's
// full-grid gather on the high-priority side stream, its blocks waiting on remote
// reads, may hold every SM while the training step waits beside it. Off (0) until
// measured: 4 x H200, sharded products-size features, the pipelined loop took the sum
// of loading and step (2.83 ms against 1.77 + ~1.06) where one GPU overlaps them.
// PYG_ACCEL_GATHER_PEER_SM_DIVISOR=k in the environment overrides it (read once per
// process), so that `torchrun --nproc_per_node 4 scripts/profile_step.py --loop --graph
// --tf32` can compare values of k without a rebuild.
#ifndef PYG_ACCEL_GATHER_PEER_SM_DIVISOR
#define PYG_ACCEL_GATHER_PEER_SM_DIVISOR 0
#endif

int peer_sm_divisor() {
  static const int divisor = [] {
    const char* env = std::getenv("PYG_ACCEL_GATHER_PEER_SM_DIVISOR");
    return env == nullptr ? PYG_ACCEL_GATHER_PEER_SM_DIVISOR : std::max(0, std::atoi(env));
  }();
  return divisor;
}

constexpr int kThreads = 256;
constexpr int kMinBlocksPerSM = PYG_ACCEL_GATHER_MIN_BLOCKS;  // 5 caps registers at 51
constexpr int kUnroll = PYG_ACCEL_GATHER_UNROLL;              // rows in flight per thread group
constexpr int64_t kSortThreshold = 1 << 14;  // sort larger host-memory gathers
constexpr int kStageVecs = 256;              // cp.async path: 4 KB per warp and stage
constexpr size_t kAsyncSmemBytes = size_t{kThreads / 32} * 2 * kStageVecs * sizeof(uint4);

struct TableArgs {
  const char* shard_ptr[kMaxShards];
  int64_t row_begin[kMaxShards + 1];
  char* out;
  int64_t num_rows;
  int64_t vecs_per_row;  // row bytes / vec_bytes
  int32_t num_shards;
  int32_t vec_bytes;     // 16, 8, 4, 2 or 1
  int32_t group_log2;    // threads per row = 1 << group_log2
};

struct GatherArgs {
  TableArgs table[kMaxTables];
};

template <typename vec_t>
__device__ __forceinline__ vec_t zero_vec() {
  vec_t v;
  memset(&v, 0, sizeof(vec_t));
  return v;
}

// Read-only row loads; with kWide, 16-byte loads ask L2 to fetch 256-byte blocks.
template <typename vec_t, bool kWide = false>
__device__ __forceinline__ vec_t load_vec(const vec_t* p) {
  if constexpr (kWide && std::is_same_v<vec_t, uint4>) {
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
  } else {
    return __ldg(p);
  }
}

// Whether a table's 16-byte row loads fetch 256-byte L2 blocks: always (1), never (0),
// or (2) only for rows of a multiple of 256 bytes: a 400 B row at a random offset spans
// 2-3 such blocks, so 256 B fetches read up to 768 B for it.
__host__ __device__ __forceinline__ bool wide_fetches(int64_t row_bytes) {
  return PYG_ACCEL_GATHER_L2_256B == 1 || (PYG_ACCEL_GATHER_L2_256B == 2 && row_bytes % 256 == 0);
}

// Where logical row `row` of table t starts (its shard's base pointer plus its offset
// there), or nullptr for an out-of-range row: such rows are never read (the Python
// wrapper rejects them before launch unless the caller opted out) and come back zeroed.
template <typename vec_t>
__device__ __forceinline__ const vec_t* row_address(const TableArgs& t, int64_t row) {
  if (row < 0 || row >= t.num_rows) return nullptr;
  int s = 0;
  while (s + 1 < t.num_shards && row >= t.row_begin[s + 1]) ++s;
  return reinterpret_cast<const vec_t*>(t.shard_ptr[s]) + (row - t.row_begin[s]) * t.vecs_per_row;
}

template <typename index_t>
__device__ __forceinline__ void load_ids(int64_t (&rows)[kUnroll], const index_t* __restrict__ index,
                                         int64_t base, int64_t stride, int64_t n) {
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    const int64_t i = base + u * stride;
    rows[u] = i < n ? static_cast<int64_t>(__ldg(index + i)) : -1;
  }
}

// Output row i of table t is row index[i] of the logical table (written at
// out_pos[i] instead of i when out_pos is given).
template <typename vec_t, bool kWide, typename index_t>
__device__ __forceinline__ void gather_one_table(const TableArgs& t, const index_t* __restrict__ index,
                                                 const int64_t* __restrict__ out_pos, int64_t n) {
  const int group = 1 << t.group_log2;
  const int lane = threadIdx.x & (group - 1);
  const int64_t num_groups = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> t.group_log2;
  const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> t.group_log2;
  const int64_t step = num_groups * kUnroll;
  vec_t* out = reinterpret_cast<vec_t*>(t.out);

  int64_t next[kUnroll];
  load_ids(next, index, first, num_groups, n);
  for (int64_t base = first; base < n; base += step) {
    int64_t rows[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) rows[u] = next[u];
    load_ids(next, index, base + step, num_groups, n);  // prefetch: overlaps this iteration's rows

    // Resolve kUnroll rows first so their loads are in flight together.
    const vec_t* src[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      src[u] = row_address<vec_t>(t, rows[u]);
    }
    for (int64_t c = lane; c < t.vecs_per_row; c += group) {
      vec_t v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = src[u] != nullptr ? load_vec<vec_t, kWide>(src[u] + c) : zero_vec<vec_t>();
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t i = base + u * num_groups;
        if (i < n) {
          const int64_t pos = out_pos != nullptr ? __ldg(out_pos + i) : i;
          __stcs(out + pos * t.vecs_per_row + c, v[u]);
        }
      }
    }
  }
}

template <typename index_t>
__device__ __forceinline__ void gather_registers(const TableArgs& t, const index_t* __restrict__ index,
                                                 const int64_t* __restrict__ out_pos, int64_t n) {
  switch (t.vec_bytes) {  // uniform across the block: one table per blockIdx.y
    case 16:
      if (wide_fetches(t.vecs_per_row * 16)) {
        gather_one_table<uint4, true>(t, index, out_pos, n);
      } else {
        gather_one_table<uint4, false>(t, index, out_pos, n);
      }
      break;
    case 8: gather_one_table<uint2, false>(t, index, out_pos, n); break;
    case 4: gather_one_table<unsigned int, false>(t, index, out_pos, n); break;
    case 2: gather_one_table<unsigned short, false>(t, index, out_pos, n); break;
    default: gather_one_table<unsigned char, false>(t, index, out_pos, n); break;
  }
}

template <typename index_t>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSM) gather_kernel(const __grid_constant__ GatherArgs args,
                                                                           const index_t* __restrict__ index,
                                                                           const int64_t* __restrict__ out_pos,
                                                                           int64_t n) {
  gather_registers(args.table[blockIdx.y], index, out_pos, n);
}

// cp.async (LDGSTS) helpers, sm_80+.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;\n" ::"r"(dst), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_one() { asm volatile("cp.async.wait_group 1;\n" ::); }

__device__ __forceinline__ bool async_eligible(const TableArgs& t) {
  return t.vec_bytes == 16 && t.vecs_per_row >= 8 && t.vecs_per_row <= kStageVecs;
}

// One warp moves batches of up to 32 rows (one id per lane) through a double buffer
// in shared memory: batch b+1 is in flight while batch b is written out.
template <typename index_t>
__device__ void gather_table_async(const TableArgs& t, const index_t* __restrict__ index,
                                   const int64_t* __restrict__ out_pos, int64_t n, uint4* buffers) {
  const int lane = threadIdx.x & 31;
  const int vpr = static_cast<int>(t.vecs_per_row);
  const int rows = min(32, kStageVecs / vpr);  // rows per batch
  const int stage_vecs = rows * vpr;
  const int64_t num_batches = (n + rows - 1) / rows;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t num_warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  uint4* out = reinterpret_cast<uint4*>(t.out);

  auto issue = [&](int64_t batch, uint4* buf) {
    const int64_t first = batch * rows;
    const uint4* mine = nullptr;  // lane r resolves row r of the batch
    if (lane < rows && first + lane < n) {
      mine = row_address<uint4>(t, static_cast<int64_t>(__ldg(index + first + lane)));
    }
    for (int k0 = 0; k0 < stage_vecs; k0 += 32) {  // every lane shuffles, so no early exit
      const int k = k0 + lane;
      const int r = k < stage_vecs ? k / vpr : 0;
      const uint4* src = reinterpret_cast<const uint4*>(
          __shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(mine), r));
      if (k < stage_vecs) {
        if (src != nullptr) {
          cp_async_16(buf + k, src + (k - r * vpr));
        } else {
          buf[k] = make_uint4(0, 0, 0, 0);
        }
      }
    }
    cp_async_commit();
  };

  int stage = 0;
  if (warp < num_batches) issue(warp, buffers);
  for (int64_t batch = warp; batch < num_batches; batch += num_warps) {
    uint4* buf = buffers + stage * kStageVecs;
    const int64_t next = batch + num_warps;
    if (next < num_batches) {
      issue(next, buffers + (stage ^ 1) * kStageVecs);
    } else {
      cp_async_commit();  // an empty group keeps wait_group 1 meaning "all but the newest"
    }
    cp_async_wait_one();
    __syncwarp();
    const int64_t first = batch * rows;
    for (int k = lane; k < stage_vecs; k += 32) {
      const int r = k / vpr;
      const int64_t i = first + r;
      if (i < n) {
        const int64_t pos = out_pos != nullptr ? __ldg(out_pos + i) : i;
        __stcs(out + pos * vpr + (k - r * vpr), buf[k]);
      }
    }
    __syncwarp();  // the buffer is refilled two batches later
    stage ^= 1;
  }
}

template <typename index_t>
__global__ void __launch_bounds__(kThreads) gather_kernel_async(const __grid_constant__ GatherArgs args,
                                                               const index_t* __restrict__ index,
                                                               const int64_t* __restrict__ out_pos, int64_t n) {
  extern __shared__ uint4 smem[];
  const TableArgs& t = args.table[blockIdx.y];
  if (async_eligible(t)) {
    gather_table_async(t, index, out_pos, n, smem + (threadIdx.x >> 5) * 2 * kStageVecs);
  } else {
    gather_registers(t, index, out_pos, n);
  }
}

// The address the GPU reads a shard through: its own pointer for memory on
// this GPU or a peer (peer access enabled here), the UVA alias for pinned host memory.
const char* device_pointer(const at::Tensor& shard, int device) {
  if (shard.device().is_cpu()) {
    TORCH_CHECK(shard.is_pinned(), "gather: a CPU table read by a CUDA index must be in pinned memory "
                                   "(tensor.pin_memory()); got pageable memory");
    void* dptr = nullptr;
    C10_CUDA_CHECK(cudaHostGetDevicePointer(&dptr, shard.data_ptr(), 0));
    return static_cast<const char*>(dptr);
  }
  TORCH_CHECK(shard.device().is_cuda(), "gather: unsupported table device ", shard.device().str());
  const int peer = shard.device().index();
  if (peer != device) {
    int can_access = 0;
    C10_CUDA_CHECK(cudaDeviceCanAccessPeer(&can_access, device, peer));
    TORCH_CHECK(can_access, "gather: cuda:", std::to_string(device), " cannot read cuda:", std::to_string(peer),
                " peer-to-peer");
    cudaError_t err = cudaDeviceEnablePeerAccess(peer, 0);
    if (err == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
    } else {
      C10_CUDA_CHECK(err);
    }
  }
  return static_cast<const char*>(shard.data_ptr());
}

// Whether any (any_shard) or every (!any_shard) shard of the tables is in host memory.
bool reads_host_memory(const std::vector<ShardedTable>& tables, bool any_shard = true) {
  for (const ShardedTable& t : tables)
    for (const at::Tensor& s : t.shards)
      if (s.device().is_cpu() == any_shard) return any_shard;
  return !any_shard;
}

// Whether a shard of the tables is memory of another GPU than `device` (a peer's block
// mapped through CUDA IPC is labelled with this GPU; the driver knows where it lives).
bool reads_peer_memory(const std::vector<ShardedTable>& tables, int device) {
  for (const ShardedTable& t : tables) {
    for (const at::Tensor& s : t.shards) {
      if (!s.device().is_cuda() || s.numel() == 0) continue;
      cudaPointerAttributes attr{};
      C10_CUDA_CHECK(cudaPointerGetAttributes(&attr, s.data_ptr()));
      if (attr.type == cudaMemoryTypeDevice && attr.device != device) return true;
    }
  }
  return false;
}

// Blocks of `kernel` that fit on the whole GPU at once (computed once per kernel: the
// kernel is a template argument so that kernels of the same signature do not share it).
template <auto kernel>
int64_t resident_blocks(size_t smem_bytes = 0) {
  static const int per_sm = [&] {
    if (smem_bytes > 0) {
      C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(smem_bytes)));
    }
    int blocks = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, kThreads, smem_bytes));
    return std::max(blocks, 1);
  }();
  return static_cast<int64_t>(per_sm) * at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
}

int pick_vec_bytes(int64_t row_bytes, const std::vector<uintptr_t>& addresses) {
  for (int v : {16, 8, 4, 2}) {
    bool ok = row_bytes % v == 0;
    for (uintptr_t a : addresses) ok = ok && (a % v == 0);
    if (ok) return v;
  }
  return 1;
}

TableArgs describe_launch(const ShardedTable& table, const at::Tensor& out, int device) {
  TORCH_CHECK(static_cast<int>(table.shards.size()) <= kMaxShards, "gather: at most ",
              std::to_string(kMaxShards), " shards per table, got ", std::to_string(table.shards.size()));
  TableArgs a{};
  std::vector<uintptr_t> addresses{reinterpret_cast<uintptr_t>(out.data_ptr())};
  for (size_t s = 0; s < table.shards.size(); ++s) {
    a.shard_ptr[s] = device_pointer(table.shards[s], device);
    addresses.push_back(reinterpret_cast<uintptr_t>(a.shard_ptr[s]));
  }
  for (size_t s = 0; s < table.row_begin.size(); ++s) a.row_begin[s] = table.row_begin[s];
  a.num_shards = static_cast<int32_t>(table.shards.size());
  a.num_rows = table.num_rows;
  a.out = static_cast<char*>(out.data_ptr());
  a.vec_bytes = pick_vec_bytes(table.row_bytes, addresses);
  a.vecs_per_row = table.row_bytes / a.vec_bytes;
  int group_log2 = 0;
  while (group_log2 < 5 && (int64_t{1} << group_log2) < a.vecs_per_row) ++group_log2;
  a.group_log2 = group_log2;
  return a;
}

// Gathers every table at `index` with one kernel launch.
std::vector<at::Tensor> gather_tables(const std::vector<ShardedTable>& tables, const at::Tensor& index) {
  check_index(index);
  TORCH_CHECK(index.is_cuda(), "gather: the CUDA kernel needs a CUDA index");
  TORCH_CHECK(tables.size() <= static_cast<size_t>(kMaxTables), "multi_gather: at most ",
              std::to_string(kMaxTables), " tables per launch, got ", std::to_string(tables.size()));
  const c10::cuda::CUDAGuard guard(index.device());
  const int device = index.device().index();
  at::Tensor idx = index.contiguous();
  const int64_t n = idx.numel();

  std::vector<at::Tensor> outs;
  GatherArgs args{};
  int launch_tables = 0;
  int64_t max_group = 1;
  for (const ShardedTable& t : tables) {
    outs.push_back(alloc_rows(t, n, index.device()));
    if (n == 0 || t.row_bytes == 0) continue;
    args.table[launch_tables] = describe_launch(t, outs.back(), device);
    max_group = std::max<int64_t>(max_group, int64_t{1} << args.table[launch_tables].group_log2);
    ++launch_tables;
  }
  if (launch_tables == 0) return outs;

  // Reads of host memory: visit the rows in ascending order (writing each to its
  // own output slot) so that concurrent reads share GPU page-table walks.
  at::Tensor out_pos;
  if (n >= kSortThreshold && reads_host_memory(tables)) {
    auto sorted = at::sort(idx);
    idx = std::get<0>(sorted).contiguous();
    out_pos = std::get<1>(sorted).contiguous();
  }
  const int64_t* out_pos_ptr = out_pos.defined() ? out_pos.data_ptr<int64_t>() : nullptr;

  // A grid-stride kernel: launch at most what can be resident at once (no partial
  // second wave), fewer blocks when there are fewer rows than that.
  const int64_t groups_per_block = kThreads / max_group;
  int64_t wanted = (n + groups_per_block * kUnroll - 1) / (groups_per_block * kUnroll);
  // Only when every row comes over PCIe: a GPU cache's hits in the same launch need the
  // full grid (its 25% cache tier took 1.42 ms per batch capped, 1.15 ms uncapped).
  if (PYG_ACCEL_GATHER_HOST_SM_DIVISOR > 0 && reads_host_memory(tables, /*any_shard=*/false)) {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    wanted = std::min<int64_t>(wanted, std::max(1, sms / PYG_ACCEL_GATHER_HOST_SM_DIVISOR));
  }
  if (peer_sm_divisor() > 0 && reads_peer_memory(tables, device)) {
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    wanted = std::min<int64_t>(wanted, std::max(1, sms / peer_sm_divisor()));
  }
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_INDEX_TYPES(idx.scalar_type(), "gather_cuda", [&] {
    if (PYG_ACCEL_GATHER_ASYNC) {
      const int64_t resident = resident_blocks<gather_kernel_async<index_t>>(kAsyncSmemBytes);
      const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, resident))), launch_tables);
      gather_kernel_async<index_t><<<grid, kThreads, kAsyncSmemBytes, stream>>>(args, idx.data_ptr<index_t>(),
                                                                                out_pos_ptr, n);
    } else {
      const int64_t resident = resident_blocks<gather_kernel<index_t>>();
      const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, resident))), launch_tables);
      gather_kernel<index_t><<<grid, kThreads, 0, stream>>>(args, idx.data_ptr<index_t>(), out_pos_ptr, n);
    }
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return outs;
}

at::Tensor gather_cuda(const at::Tensor& table, const at::Tensor& index) {
  return gather_tables({describe_table({table}, "gather: table")}, index)[0];
}

std::vector<at::Tensor> multi_gather_cuda(at::TensorList tables, const at::Tensor& index) {
  std::vector<ShardedTable> described;
  for (const at::Tensor& t : tables) described.push_back(describe_table({t}, "multi_gather: table"));
  std::vector<at::Tensor> outs;
  // Launch in batches of kMaxTables (one launch for the usual handful).
  for (size_t b = 0; b < described.size(); b += kMaxTables) {
    std::vector<ShardedTable> batch(described.begin() + b,
                                    described.begin() + std::min(described.size(), b + kMaxTables));
    for (at::Tensor& o : gather_tables(batch, index)) outs.push_back(std::move(o));
  }
  return outs;
}

at::Tensor sharded_gather_cuda(at::TensorList shards, const at::Tensor& index) {
  return gather_tables({describe_table(shards.vec(), "sharded_gather: shards")}, index)[0];
}

}  // namespace

at::Tensor uva_view_cuda(const at::Tensor& host, int64_t device) {
  TORCH_CHECK(host.device().is_cpu() && host.is_pinned(), "uva_view: expected a tensor in pinned host memory "
              "(tensor.pin_memory()), got ", host.is_cpu() ? "pageable host memory" : host.device().str());
  TORCH_CHECK(device >= 0 && device < c10::cuda::device_count(), "uva_view: no CUDA device ", std::to_string(device));
  const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  // (the address the gather kernel reads a pinned table through)
  void* dptr = host.numel() > 0 ? const_cast<char*>(device_pointer(host, static_cast<int>(device))) : nullptr;
  auto* keep = new at::Tensor(host);  // the host memory lives as long as the view
  return at::for_blob(dptr, host.sizes())
      .strides(host.strides())
      .deleter([keep](void*) { delete keep; })
      .options(host.options().device(at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(device))))
      .make_tensor();
}

at::Tensor host_register_cuda(const at::Tensor& host) {
  TORCH_CHECK(host.device().is_cpu(), "host_register: expected a host tensor, got ", host.device().str());
  TORCH_CHECK(host.is_contiguous(), "host_register: expected a contiguous tensor");
  if (host.numel() == 0 || host.is_pinned()) return host;
  void* ptr = host.data_ptr();
  C10_CUDA_CHECK(cudaHostRegister(ptr, host.numel() * host.element_size(),
                                  cudaHostRegisterMapped | cudaHostRegisterPortable));
  auto* keep = new at::Tensor(host);  // unregistered before the memory goes
  return at::for_blob(ptr, host.sizes())
      .strides(host.strides())
      .deleter([keep, ptr](void*) {
        (void)cudaHostUnregister(ptr);  // (a deleter cannot throw; a failure leaves the pages locked)
        delete keep;
      })
      .options(host.options())
      .make_tensor();
}

TORCH_LIBRARY_IMPL(pyg_accel, CPU, m) {  // (the inputs are host tensors)
  m.impl("uva_view", &uva_view_cuda);
  m.impl("host_register", &host_register_cuda);
}

TORCH_LIBRARY_IMPL(pyg_accel, CUDA, m) {
  m.impl("gather", &gather_cuda);
  m.impl("multi_gather", &multi_gather_cuda);
  m.impl("sharded_gather", &sharded_gather_cuda);
}

}  // namespace pyg_accel
