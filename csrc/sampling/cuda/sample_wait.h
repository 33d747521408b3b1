// Host-side knobs of the CUDA sampler: CUDA-graph replay, tracing, and how the host
// waits for a sample's counts. Included by neighbor_sample.cu only.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cuda_runtime.h>
#include <sys/prctl.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <string>
#include <thread>

namespace pyg_accel {
namespace {

bool cuda_graphs_enabled() {
  const char* env = std::getenv("PYG_ACCEL_SAMPLER_CUDA_GRAPHS");
  return env == nullptr || std::string(env) != "0";
}

// PYG_ACCEL_SAMPLER_TRACE=1: one line per sample on stderr with its host phases.
bool trace_enabled() {
  static const bool enabled = std::getenv("PYG_ACCEL_SAMPLER_TRACE") != nullptr;
  return enabled;
}

// CPU time of the calling thread, in microseconds.
double thread_cpu_us() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

// How the host waits for the counts (PYG_ACCEL_SAMPLER_WAIT):
// - spin (default): poll without sleeping, the lowest latency (PyTorch's default);
// - block: the driver's blocking wait (the thread sleeps until the GPU signals it);
// - sleep: sleep through most of the time the previous sample of this plan took, then
//   poll with short naps, with the thread's timer slack at 1 us meanwhile (Linux's 50 us
//   default would oversleep).
enum class WaitMode { kSpin, kBlock, kSleep };

WaitMode wait_mode() {
  const char* env = std::getenv("PYG_ACCEL_SAMPLER_WAIT");
  if (env == nullptr) return WaitMode::kSpin;
  const std::string mode(env);
  if (mode == "block") return WaitMode::kBlock;
  if (mode == "sleep") return WaitMode::kSleep;
  TORCH_CHECK(mode == "spin", "PYG_ACCEL_SAMPLER_WAIT must be spin, block or sleep, got '", mode, "'");
  return WaitMode::kSpin;
}

// The sleeping wait: one nap of about the time the sample takes, then polls a few
// microseconds apart. The nap adapts to the plan (each plan samples batches of one
// shape): it grows when the sample was still running after more than one poll and
// shrinks a sixteenth when it was done at the first check (the nap overslept, or
// nearly). The thread's timer slack is 1 us meanwhile (Linux's 50 us would oversleep).
class Napper {
 public:
  // Waits for `done`; returns how many polls found it still running.
  int wait(cudaEvent_t done) {
    using namespace std::chrono_literals;
    constexpr auto kPoll = 4us;
    const int old_slack = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    if (nap_ > 0ns) std::this_thread::sleep_for(nap_);
    int polls = 0;
    while (true) {
      const cudaError_t state = cudaEventQuery(done);
      if (state == cudaSuccess) break;
      if (state != cudaErrorNotReady) C10_CUDA_CHECK(state);
      ++polls;
      std::this_thread::sleep_for(kPoll);
    }
    if (old_slack > 0) prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(old_slack), 0, 0, 0);
    if (polls == 0) {
      nap_ -= nap_ / 16;
    } else if (polls > 1) {
      nap_ += (polls - 1) * kPoll;
    }
    return polls;
  }

 private:
  std::chrono::nanoseconds nap_{0};
};

}  // namespace
}  // namespace pyg_accel
