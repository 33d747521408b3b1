// The samplers' edge weights, read in the precision the caller holds them.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>

#include "../common/host_device.h"

namespace pyg_accel {

// [E] edge weights, float32 or float64, read as double. A float32 weight converts to
// double exactly, so the keys and draws made from it (and so the samples) are those of
// a float64 copy, which is never made: a float32 graph's weights are read in place, at
// 4 B per edge, with no E-sized copy (26 GB at papers100M's size).
struct EdgeWeights {
  const void* data = nullptr;  // null: no weights
  bool single = false;         // float32, else float64

  PYG_ACCEL_HD explicit operator bool() const { return data != nullptr; }
  PYG_ACCEL_HD double operator[](int64_t e) const {
    return single ? static_cast<double>(static_cast<const float*>(data)[e]) : static_cast<const double*>(data)[e];
  }
  // The weights as W (float when `single`, else double): for loops over many weights,
  // which then read one type without a test per weight.
  template <typename W>
  PYG_ACCEL_HD const W* as() const {
    return static_cast<const W*>(data);
  }
};

// The dtype the samplers read a weight tensor of dtype `t` in: float32 and float64 as
// they are, any other as float64 (exact for every float16/bfloat16 value and integer
// weights up to 2^53).
inline at::ScalarType sampler_weight_dtype(at::ScalarType t) { return t == at::kFloat ? at::kFloat : at::kDouble; }

// The view of `w` (contiguous, float32 or float64; undefined: no weights).
inline EdgeWeights edge_weights_of(const at::Tensor& w) {
  if (!w.defined()) return {};
  TORCH_CHECK(w.is_contiguous() && (w.scalar_type() == at::kFloat || w.scalar_type() == at::kDouble),
              "edge weights must be contiguous float32 or float64 here");
  return {w.data_ptr(), w.scalar_type() == at::kFloat};
}

}  // namespace pyg_accel
