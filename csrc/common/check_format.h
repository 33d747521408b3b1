// Numbers and shapes for TORCH_CHECK messages, as strings.
//
// Every integer in a check's message goes through std::to_string (or shape_str): streaming
// an integer into a TORCH_CHECK message crashed the process (SIGSEGV in
// ostream::_M_insert<long>) when the check was reached from an nvcc-compiled CUDA entry
// point (H100 and H200 machines, torch 2.11), where the same check on the CPU path raised.
// tests/test_csrc_style.py holds every check in csrc/ to this.
#pragma once

#include <ATen/ATen.h>

#include <string>

namespace pyg_accel {

// "[a, b]" for a shape.
inline std::string shape_str(at::IntArrayRef dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

}  // namespace pyg_accel
