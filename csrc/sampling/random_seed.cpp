// draw_random_seed (schema and semantics: csrc/ops.cpp).
#include <torch/library.h>

#include <optional>

#include "sampling_seed.h"

namespace pyg_accel {
namespace {

int64_t draw_random_seed() { return resolve_random_seed(std::nullopt); }

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CompositeExplicitAutograd, m) { m.impl("draw_random_seed", &draw_random_seed); }

}  // namespace pyg_accel
