// What the CUDA samplers' plans share (neighbor_sample.cu: a homogeneous graph,
// hetero_sample.cu: a heterogeneous one). A plan is one sampling configuration (graph,
// batch shape, fanouts, options) with its buffers sized by upper bounds; its sample is a
// fixed kernel sequence that reads the call's parameters from the first kernel's
// argument, so from the plan's second call on it is replayed as one CUDA graph
// (SampleReplay). The host waits for the sample's end by SampleWait, and the most
// recently used plans are kept in a PlanCache.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <list>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include "../../common/tensor_id.h"
#include "sample_table.cuh"
#include "sample_wait.h"

namespace pyg_accel {

// Drops the heterogeneous sampler's plans (hetero_sample.cu); returns how many.
int64_t clear_hetero_sampler_plans();

// Notes how long (wall clock, microseconds) the calling thread just waited for a
// sample, which sampler_last_wait_us reports (neighbor_sample.cu).
void note_sample_wait_us(double us);

// The degrees max_in_degree remembers, one memo for both samplers (neighbor_sample.cu;
// cleared with the plans by clear_sampler_plans).
DerivedMemo<int64_t>& sampler_degree_memo();

namespace {

// A plan's kernel sequence recorded as a CUDA graph from its second sample on (the
// first runs eagerly; PYG_ACCEL_SAMPLER_CUDA_GRAPHS=0 keeps every sample eager), and
// replayed with each call's parameters set as the argument of the graph's first kernel.
// On any capture failure the plan stays eager.
class SampleReplay {
 public:
  SampleReplay() = default;
  SampleReplay(const SampleReplay&) = delete;
  SampleReplay& operator=(const SampleReplay&) = delete;
  ~SampleReplay() {  // errors ignored: this may run while the process exits
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
    if (capture_stream_ != nullptr) cudaStreamDestroy(capture_stream_);
  }

  // Before a sample: records `enqueue(stream)` (which enqueues the whole sequence) once
  // it is due, and sets `args` (the first kernel's argument pointers for this call) into
  // the graph. `first_kernels`: the kernels the sequence may start with (a list read
  // only at capture: nothing is allocated per call).
  template <typename Enqueue>
  void prepare(std::initializer_list<const void*> first_kernels, void** args, const Enqueue& enqueue) {
    ++uses_;
    if (exec_ == nullptr && uses_ >= 2 && !failed_ && cuda_graphs_enabled()) capture(first_kernels, enqueue);
    if (exec_ != nullptr) {
      cudaKernelNodeParams node = first_params_;
      node.kernelParams = args;
      C10_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec_, first_node_, &node));
    }
  }

  // The sample on `stream`: the graph's replay, or enqueue(stream) itself.
  template <typename Enqueue>
  void launch(cudaStream_t stream, const Enqueue& enqueue) {
    if (exec_ != nullptr) {
      C10_CUDA_CHECK(cudaGraphLaunch(exec_, stream));
    } else {
      enqueue(stream);
    }
  }

  bool replays() const { return exec_ != nullptr; }

 private:
  template <typename Enqueue>
  void capture(std::initializer_list<const void*> first_kernels, const Enqueue& enqueue) {
    if (capture_stream_ == nullptr) {
      C10_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_stream_, cudaStreamNonBlocking));
    }
    cudaGraph_t graph = nullptr;
    C10_CUDA_CHECK(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue(capture_stream_);
    } catch (...) {
      cudaStreamEndCapture(capture_stream_, &graph);
      if (graph != nullptr) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      failed_ = true;
      return;
    }
    if (cudaStreamEndCapture(capture_stream_, &graph) != cudaSuccess || !find_first_node(graph, first_kernels) ||
        cudaGraphInstantiate(&exec_, graph, 0) != cudaSuccess) {
      exec_ = nullptr;
      failed_ = true;
      (void)cudaGetLastError();
      if (graph != nullptr) cudaGraphDestroy(graph);
      return;
    }
    graph_ = graph;  // (kept: its first node names the node to update in exec_)
  }

  // Finds the first kernel's node in a captured graph and keeps its launch parameters.
  bool find_first_node(cudaGraph_t graph, std::initializer_list<const void*> first_kernels) {
    size_t count = 0;
    if (cudaGraphGetNodes(graph, nullptr, &count) != cudaSuccess) return false;
    std::vector<cudaGraphNode_t> nodes(count);
    if (cudaGraphGetNodes(graph, nodes.data(), &count) != cudaSuccess) return false;
    for (cudaGraphNode_t node : nodes) {
      cudaGraphNodeType type;
      cudaKernelNodeParams params{};
      if (cudaGraphNodeGetType(node, &type) != cudaSuccess || type != cudaGraphNodeTypeKernel ||
          cudaGraphKernelNodeGetParams(node, &params) != cudaSuccess) {
        continue;
      }
      for (const void* kernel : first_kernels) {
        if (params.func != kernel) continue;
        first_node_ = node;
        first_params_ = params;
        first_params_.kernelParams = nullptr;
        first_params_.extra = nullptr;
        return true;
      }
    }
    return false;
  }

  int64_t uses_ = 0;
  bool failed_ = false;
  cudaStream_t capture_stream_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  cudaGraphNode_t first_node_ = nullptr;
  cudaKernelNodeParams first_params_{};
};

// The per-hop counts of a started sample, as its last kernel published them to its
// plan's pinned buffer, copied out by the host (SampleWait).
struct SampleCounts {
  std::vector<int64_t> words;
  bool read = false;
  int polls = -1;  // how many polls found the sample running (sleep mode), else -1
};

// The host's wait for a plan's samples (PYG_ACCEL_SAMPLER_WAIT, sample_wait.h). A sample
// is started by record() after its kernels are enqueued; its counts are read (waiting
// for it) when its finish needs them, or before the plan enqueues its next sample, which
// overwrites the pinned buffer: read_unread().
class SampleWait {
 public:
  SampleWait() {
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&done_blocking_, cudaEventBlockingSync | cudaEventDisableTiming));
  }
  SampleWait(const SampleWait&) = delete;
  SampleWait& operator=(const SampleWait&) = delete;
  ~SampleWait() {
    cudaEventDestroy(done_);
    cudaEventDestroy(done_blocking_);
  }

  // After a sample is enqueued on `stream` (its last kernel writes `host`, the plan's
  // pinned counts): the sample's counts, unread. The previous ones must have been read.
  std::shared_ptr<SampleCounts> record(cudaStream_t stream, WaitMode mode, const at::Tensor& host) {
    TORCH_INTERNAL_ASSERT(unread_ == nullptr, "a sample was enqueued before the previous one's counts were read");
    mode_ = mode;
    C10_CUDA_CHECK(cudaEventRecord(mode == WaitMode::kBlock ? done_blocking_ : done_, stream));
    host_ = host;
    unread_ = std::make_shared<SampleCounts>();
    return unread_;
  }

  // Reads the unread counts, if any, waiting for their sample: a host synchronisation
  // (which PyTorch's sync debug mode reports), whose wall time is noted for
  // sampler_last_wait_us.
  void read_unread() {
    if (unread_ == nullptr) return;
    c10::cuda::warn_or_error_on_sync();
    const auto start = std::chrono::steady_clock::now();
    int polls = -1;
    if (mode_ == WaitMode::kSleep) {
      polls = napper_.wait(done_);
    } else {
      C10_CUDA_CHECK(cudaEventSynchronize(mode_ == WaitMode::kBlock ? done_blocking_ : done_));
    }
    note_sample_wait_us(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    const int64_t* host = host_.data_ptr<int64_t>();
    unread_->words.assign(host, host + host_.numel());
    unread_->polls = polls;
    unread_->read = true;
    unread_.reset();
  }

  // The counts of a started sample of this plan, read now if they were not.
  const SampleCounts& counts(const std::shared_ptr<SampleCounts>& counts) {
    if (!counts->read) {
      TORCH_INTERNAL_ASSERT(counts == unread_, "a started sample's counts were lost");
      read_unread();
    }
    return *counts;
  }

 private:
  cudaEvent_t done_ = nullptr, done_blocking_ = nullptr;
  WaitMode mode_ = WaitMode::kSpin;
  Napper napper_;
  at::Tensor host_;                       // the pinned counts the unread sample writes
  std::shared_ptr<SampleCounts> unread_;  // the last recorded sample's, until read
};

// The epoch of a plan's samples: the tag of the dedup table's slots and of the scans'
// look-back words, so neither is cleared between samples. Where the tags would wrap,
// next() calls clear() (which zeroes both) once and starts again at 1.
class SampleEpoch {
 public:
  template <typename Clear>
  int64_t next(const Clear& clear) {
    if (++epoch_ > kMaxEpoch) {
      clear();
      epoch_ = 1;
    }
    return epoch_;
  }

 private:
  int64_t epoch_ = 0;
};

// An output allocated at its upper bound, shrunk to the `n` entries the sample used
// (in place: no dispatch per view).
inline void shrink_to(const at::Tensor& t, int64_t n) { t.unsafeGetTensorImpl()->set_sizes_contiguous({n}); }

// The largest in-degree of a CSC (fanout -1's bound on its draws): read from the
// device (a host sync) the first time a colptr tensor is seen, then remembered while
// the caller passes that same, unmodified tensor (plans differ by their seed counts,
// so a link loader's batches make many). `given` is the caller's tensor (the memo's
// key), `colptr` its int64 contiguous form.
inline int64_t max_in_degree(const at::Tensor& given, const at::Tensor& colptr) {
  if (colptr.numel() <= 1) return 0;
  return sampler_degree_memo().get({TensorId::of(&given)},
                                   [&] { return (colptr.slice(0, 1) - colptr.slice(0, 0, -1)).max().item<int64_t>(); });
}

// One sampling configuration, the key of its plan: the type structure (a homogeneous
// graph: one node type, one edge type), seeds per node type, fanouts (edge type by edge
// type, hop by hop), options, and the caller's graph tensors by identity (a plan is used
// only while the caller passes these very tensors, unmodified; graph_input_ids).
struct PlanKey {
  int device;
  std::vector<int64_t> num_nodes, src_type, dst_type, fanouts, num_seeds;
  int64_t num_hops;
  bool replace, disjoint, last;  // last: temporal strategy 'last'
  std::vector<TensorId> inputs;

  bool alive() const { return all_alive(inputs); }
  bool same(const PlanKey& o) const {
    return device == o.device && num_nodes == o.num_nodes && src_type == o.src_type && dst_type == o.dst_type &&
           fanouts == o.fanouts && num_seeds == o.num_seeds && num_hops == o.num_hops && replace == o.replace &&
           disjoint == o.disjoint && last == o.last && all_same(inputs, o.inputs);
  }
};

// The most recently used plans of one kind (a plan holds buffers sized by its batch's
// upper bounds; one whose input tensors were freed is dropped at the next lookup).
// Plan::key() has alive() and same(). Never destroyed: no CUDA calls at exit.
template <typename Plan>
class PlanCache {
 public:
  static constexpr size_t kCapacity = 8;

  // The plan of `key`, made by make(key) if there is none.
  template <typename Make>
  std::shared_ptr<Plan> get(PlanKey key, const Make& make) {
    std::lock_guard<std::mutex> lock(mutex_);
    plans_.remove_if([](const std::shared_ptr<Plan>& p) { return !p->key().alive(); });
    for (auto it = plans_.begin(); it != plans_.end(); ++it) {
      if ((*it)->key().same(key)) {
        plans_.splice(plans_.begin(), plans_, it);
        return plans_.front();
      }
    }
    std::shared_ptr<Plan> plan = make(std::move(key));
    plans_.push_front(plan);
    if (plans_.size() > kCapacity) plans_.pop_back();
    return plan;
  }

  int64_t clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    const int64_t n = static_cast<int64_t>(plans_.size());
    plans_.clear();  // a plan in use by another thread lives until that call returns
    return n;
  }

  static PlanCache& instance() {
    static PlanCache* cache = new PlanCache();
    return *cache;
  }

 private:
  std::mutex mutex_;
  std::list<std::shared_ptr<Plan>> plans_;
};

}  // namespace
}  // namespace pyg_accel
