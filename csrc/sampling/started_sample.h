// A sample started by neighbor_sample_start / hetero_neighbor_sample_start (schemas:
// csrc/ops.cpp): the sampling op's outputs, still to be read. On a GPU the op returns
// once the sample's kernels are enqueued, and finish() waits for the per-hop counts that
// size the outputs; the caller does other host work (e.g. enqueues a training step)
// while the GPU samples. On the CPU the sample is made at once and finish() returns it.
// Registered as a TorchScript class in csrc/ops.cpp.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <c10/util/intrusive_ptr.h>

#include <functional>
#include <tuple>
#include <utility>
#include <vector>

namespace pyg_accel {

// neighbor_sample's outputs: node, row, col, edge, batch, num_sampled_nodes, num_sampled_edges.
using SampleOutput = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor>;
// hetero_neighbor_sample's outputs: node and batch per node type, then as above.
using HeteroOutput = std::tuple<std::vector<at::Tensor>, std::vector<at::Tensor>, at::Tensor, at::Tensor, at::Tensor,
                                at::Tensor, at::Tensor>;

template <typename Output>
class StartedSample : public torch::CustomClassHolder {
 public:
  explicit StartedSample(std::function<Output()> finish) : finish_(std::move(finish)) {}

  // A sample already made.
  static c10::intrusive_ptr<StartedSample> done(Output out) {
    return c10::make_intrusive<StartedSample>([out = std::move(out)] { return out; });
  }

  // The sample's outputs (waiting for the GPU if it is still sampling); once.
  Output finish() {
    TORCH_CHECK(static_cast<bool>(finish_), "pyg_accel: a started sample was already finished");
    std::function<Output()> finish = std::move(finish_);
    finish_ = nullptr;  // (released first: an error in finish() leaves nothing to retry)
    return finish();
  }

 private:
  std::function<Output()> finish_;
};

using StartedNeighborSample = StartedSample<SampleOutput>;
using StartedHeteroSample = StartedSample<HeteroOutput>;

// The start op of a sampling kernel that samples at once: Kernel's sample, started
// done (the CPU kernels' start ops).
template <auto Kernel>
struct StartNow;
template <typename Output, typename... Args, Output (*Kernel)(Args...)>
struct StartNow<Kernel> {
  static c10::intrusive_ptr<StartedSample<Output>> call(Args... args) {
    return StartedSample<Output>::done(Kernel(std::forward<Args>(args)...));
  }
};

}  // namespace pyg_accel
