// CUDA pad_hop_rows / pad_hop_edges (schemas and semantics: csrc/ops.cpp): one launch
// each, the node rows as 16-byte words where the rows allow it, every column of the
// padded edge_index.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "../pad_common.h"

namespace pyg_accel {
namespace {

constexpr int kPadThreads = 256;

int pad_blocks(int64_t n) {
  const int64_t blocks = (n + kPadThreads - 1) / kPadThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 65535 * 8 ? 65535 * 8 : blocks));
}

// x_out[r + shift(r)] = x[r] for every real row r, in words of word_t (rows of `words` words).
template <typename word_t>
__global__ void pad_rows_kernel(const word_t* __restrict__ x, word_t* __restrict__ x_out, int64_t words,
                                NodeLayout layout) {
  const int64_t total = layout.num_real_nodes * words;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t row = i / words;
    x_out[padded_id(layout, row) * words + (i - row * words)] = x[i];
  }
}

__global__ void pad_edges_kernel(const int64_t* __restrict__ edge_index, int64_t num_edges,
                                 int64_t* __restrict__ out, int64_t num_out, EdgeLayout layout) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < num_out;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t k = 0;
    while (k + 1 < layout.num_hops && c >= layout.padded_edge_start[k + 1]) ++k;
    write_padded_column(layout, k, c, edge_index, num_edges, out, num_out);
  }
}

template <typename word_t>
void launch_rows(const at::Tensor& x, at::Tensor& x_out, int64_t row_bytes, const NodeLayout& layout,
                 cudaStream_t stream) {
  const int64_t words = row_bytes / static_cast<int64_t>(sizeof(word_t));
  pad_rows_kernel<word_t><<<pad_blocks(layout.num_real_nodes * words), kPadThreads, 0, stream>>>(
      static_cast<const word_t*>(x.data_ptr()), static_cast<word_t*>(x_out.data_ptr()), words, layout);
}

void pad_hop_rows_cuda(const at::Tensor& x_t, at::IntArrayRef nodes, at::IntArrayRef padded_nodes,
                       at::Tensor& x_out) {
  const NodeLayout layout = make_row_layout(x_t, nodes, padded_nodes, x_out);
  const c10::cuda::CUDAGuard guard(x_t.device());
  const at::Tensor x = x_t.contiguous();
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const int64_t row_bytes = x.size(1) * x.element_size();
  const auto aligned = [&](int64_t bytes) {
    return row_bytes % bytes == 0 && reinterpret_cast<uintptr_t>(x.data_ptr()) % bytes == 0 &&
           reinterpret_cast<uintptr_t>(x_out.data_ptr()) % bytes == 0;
  };
  if (layout.num_real_nodes == 0 || row_bytes == 0) return;
  if (aligned(16)) {
    launch_rows<int4>(x, x_out, row_bytes, layout, stream);
  } else if (aligned(4)) {
    launch_rows<int32_t>(x, x_out, row_bytes, layout, stream);
  } else {
    launch_rows<int8_t>(x, x_out, row_bytes, layout, stream);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

void pad_hop_edges_cuda(const at::Tensor& edge_index_t, at::IntArrayRef edges, at::IntArrayRef padded_edges,
                        at::IntArrayRef src_nodes, at::IntArrayRef src_padded_nodes, at::IntArrayRef dst_nodes,
                        at::IntArrayRef dst_padded_nodes, at::Tensor& edge_index_out) {
  const EdgeLayout layout = make_edge_layout(edge_index_t, edges, padded_edges, src_nodes, src_padded_nodes, dst_nodes,
                                             dst_padded_nodes, edge_index_out);
  const int64_t num_out = edge_index_out.size(1);
  if (num_out == 0) return;
  const c10::cuda::CUDAGuard guard(edge_index_t.device());
  const at::Tensor edge_index = edge_index_t.contiguous();
  pad_edges_kernel<<<pad_blocks(num_out), kPadThreads, 0, at::cuda::getCurrentCUDAStream()>>>(
      edge_index.data_ptr<int64_t>(), edge_index.size(1), edge_index_out.data_ptr<int64_t>(), num_out, layout);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CUDA, m) {
  m.impl("pad_hop_rows", &pad_hop_rows_cuda);
  m.impl("pad_hop_edges", &pad_hop_edges_cuda);
}

}  // namespace pyg_accel
