// The random seed of a sample when the caller gave none: drawn from torch's default
// CPU generator, so torch.manual_seed makes runs reproducible (host code only).
#pragma once

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <cstdint>
#include <mutex>
#include <optional>

namespace pyg_accel {

inline int64_t resolve_random_seed(std::optional<int64_t> random_seed) {
  if (random_seed.has_value()) return *random_seed;
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  return static_cast<int64_t>(gen.get<at::CPUGeneratorImpl>()->random64() >> 2);  // [0, 2^62)
}

}  // namespace pyg_accel
