// Every pyg_accel operator schema, in one place. Kernels register against
// these names from csrc/cpu (CPU key) and csrc/cuda (CUDA key); fake (meta)
// kernels and autograd are registered from Python (pyg_accel/ops/).
#include <torch/library.h>

TORCH_LIBRARY(pyg_accel, m) {
  // Rows of `table` ([N, *]) at `index` ([M], int32/int64) -> [M, *].
  // A CUDA index with a pinned host table reads the host memory directly.
  m.def("gather(Tensor table, Tensor index) -> Tensor");
  // One launch for several tables that share one index (e.g. x and y).
  m.def("multi_gather(Tensor[] tables, Tensor index) -> Tensor[]");
  // One logical table whose rows are split, in order, across `shards`
  // (device, pinned host or peer-GPU memory); one launch over all of them.
  m.def("sharded_gather(Tensor[] shards, Tensor index) -> Tensor");
}
