// Pinned host memory backed by transparent huge pages where the kernel allows them.
//
// The GPU reads pinned host memory through its own page tables; random row reads over
// a multi-GB table miss its TLB when the memory is mapped in 4 KB pages. Memory that
// is 2 MB aligned and advised MADV_HUGEPAGE before cudaHostRegister pins it can be
// mapped in 2 MB pages instead.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <torch/library.h>

#include <cuda_runtime.h>
#include <sys/mman.h>

#include <string>

namespace pyg_accel {
namespace {

constexpr uintptr_t kHugePage = uintptr_t{2} << 20;

uintptr_t round_up(uintptr_t value, uintptr_t step) { return (value + step - 1) / step * step; }

at::Tensor huge_pinned_empty(int64_t nbytes) {
  TORCH_CHECK(nbytes >= 0, "huge_pinned_empty: nbytes must be non-negative, got ", std::to_string(nbytes));
  const size_t size = round_up(static_cast<uintptr_t>(std::max<int64_t>(nbytes, 1)), kHugePage);
  void* raw = mmap(nullptr, size + kHugePage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  TORCH_CHECK(raw != MAP_FAILED, "huge_pinned_empty: mmap of ", std::to_string(size), " bytes failed");
  void* aligned = reinterpret_cast<void*>(round_up(reinterpret_cast<uintptr_t>(raw), kHugePage));
  (void)madvise(aligned, size, MADV_HUGEPAGE);  // best effort: THP may be disabled
  const cudaError_t err = cudaHostRegister(aligned, size, cudaHostRegisterDefault);
  if (err != cudaSuccess) {
    munmap(raw, size + kHugePage);
    C10_CUDA_CHECK(err);
  }
  auto release = [raw, aligned, size](void*) {
    (void)cudaHostUnregister(aligned);
    munmap(raw, size + kHugePage);
  };
  return at::from_blob(aligned, {nbytes}, release, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CompositeExplicitAutograd, m) {
  m.impl("huge_pinned_empty", &huge_pinned_empty);
}

}  // namespace pyg_accel
