// CPU SpMM, SDDMM and edge softmax over a destination-sorted COO graph (schemas and
// semantics: csrc/ops.cpp). Destinations are independent, so every kernel runs a
// parallel loop over them and reduces each one's edges in a private accumulator
// (deterministic, no atomics; every reduction is a policy of one loop, reduce_rows); the
// transposed SpMM splits the features instead.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "../sparse_common.h"

namespace pyg_accel {
namespace {

constexpr int64_t kGrain = 64;  // destinations per parallel task

// One destination's reduction of its edges' rows, as a policy of reduce_rows (as ATen's
// SpmmReduceKernel templates one kernel over the reduction): start(d) before d's edges,
// add(e, row, first) per edge e (row = x[src_e], first for d's first edge), finish(d,
// empty) after them. Each parallel task works on its own copy of the policy (its own
// accumulators).
template <typename scalar_t>
struct SumRows {  // out[d] (+)= sum over d's edges of w_e * x[src_e], per head (mean: over the in-degree)
  using acc_t = at::opmath_type<scalar_t>;
  const scalar_t* w;      // [E, H] or null (1)
  scalar_t* out;          // [num_dst, H, C]
  int64_t H, C;
  bool accumulate;        // add to out's rows instead of overwriting them
  const int64_t* degree;  // mean: ptr, whose steps are the in-degrees (null: sum)
  std::vector<acc_t> acc;

  SumRows(const scalar_t* w, scalar_t* out, int64_t H, int64_t C, bool accumulate, const int64_t* mean_ptr = nullptr)
      : w(w), out(out), H(H), C(C), accumulate(accumulate), degree(mean_ptr), acc(H * C) {}
  void start(int64_t d) {
    for (int64_t f = 0; f < H * C; ++f) acc[f] = accumulate ? static_cast<acc_t>(out[d * H * C + f]) : acc_t(0);
  }
  void add(int64_t e, const scalar_t* row, bool /*first*/) {
    for (int64_t h = 0; h < H; ++h) {
      const acc_t we = w != nullptr ? static_cast<acc_t>(w[e * H + h]) : acc_t(1);
      acc_t* a = acc.data() + h * C;
      const scalar_t* r = row + h * C;
      _Pragma("omp simd")
      for (int64_t c = 0; c < C; ++c) a[c] += we * static_cast<acc_t>(r[c]);
    }
  }
  void finish(int64_t d, bool /*empty*/) {
    const int64_t count = degree != nullptr ? std::max<int64_t>(1, degree[d + 1] - degree[d]) : 1;
    const acc_t scale = acc_t(1) / static_cast<acc_t>(count);
    for (int64_t f = 0; f < H * C; ++f) out[d * H * C + f] = static_cast<scalar_t>(acc[f] * scale);
  }
};

template <typename scalar_t, Reduce R>
struct ExtremumRows {  // out[d] = the extremum R over d's edges of x[src_e] (NaN wins; no edges: 0), ties counted
  using acc_t = at::opmath_type<scalar_t>;
  scalar_t* out;  // [num_dst, F]
  int* ties;      // [num_dst, F]: how many edges reach the extremum
  int64_t F;
  std::vector<acc_t> best;
  std::vector<int> count;

  ExtremumRows(scalar_t* out, int* ties, int64_t F) : out(out), ties(ties), F(F), best(F), count(F) {}
  void start(int64_t /*d*/) {}
  void add(int64_t /*e*/, const scalar_t* row, bool first) {
    if (first) {
      for (int64_t f = 0; f < F; ++f) best[f] = static_cast<acc_t>(row[f]), count[f] = 1;
      return;
    }
    for (int64_t f = 0; f < F; ++f) {  // (branch-free, so the compiler vectorises it)
      const acc_t v = static_cast<acc_t>(row[f]);
      const bool above = beats<R>(v, best[f]);
      count[f] = above ? 1 : count[f] + (v == best[f]);
      best[f] = above ? v : best[f];
    }
  }
  void finish(int64_t d, bool empty) {  // no edges: 0, as PyG's scatter max / min into zeros
    for (int64_t f = 0; f < F; ++f) {
      out[d * F + f] = empty ? scalar_t(0) : static_cast<scalar_t>(best[f]);
      ties[d * F + f] = empty ? 0 : count[f];
    }
  }
};

// Every destination's reduction of its edges' rows of x ([num_src, F] rows, F = H * C)
// under `policy`, destinations in parallel (deterministic: one task per destination range).
template <typename Policy, typename scalar_t>
void reduce_rows(const int64_t* p, const int64_t* s, const scalar_t* xs, int64_t F, int64_t num_dst,
                 const Policy& policy) {
  at::parallel_for(0, num_dst, kGrain, [&](int64_t begin, int64_t end) {
    Policy mine = policy;
    for (int64_t d = begin; d < end; ++d) {
      mine.start(d);
      for (int64_t e = p[d]; e < p[d + 1]; ++e) mine.add(e, xs + s[e] * F, e == p[d]);
      mine.finish(d, p[d] == p[d + 1]);
    }
  });
}

// out[d] (+)= sum over d's edges of w_e * x[src_e] (mean: over d's in-degree):
// `accumulate` adds to out's rows instead of overwriting them. out is [num_dst, H, C] in
// x's dtype.
void spmm_into(const at::Tensor& ptr_t, const at::Tensor& src_t, const std::optional<at::Tensor>& weight_t,
               const at::Tensor& x_t, at::Tensor& out, bool accumulate, bool mean = false) {
  const int64_t H = x_t.size(1), C = x_t.size(2), num_dst = ptr_t.numel() - 1;
  const at::Tensor ptr = ptr_t.contiguous(), src = src_t.to(at::kLong).contiguous(), x = x_t.contiguous();
  const at::Tensor weight = weight_t.has_value() ? weight_t->contiguous() : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_cpu", [&] {
    const scalar_t* w = weight.defined() ? weight.data_ptr<scalar_t>() : nullptr;
    const int64_t* p = ptr.data_ptr<int64_t>();
    reduce_rows(p, src.data_ptr<int64_t>(), x.data_ptr<scalar_t>(), H * C, num_dst,
                SumRows<scalar_t>(w, out.data_ptr<scalar_t>(), H, C, accumulate, mean ? p : nullptr));
  });
}

// out[d] = the extremum R (max, min) over d's edges of x[src_e], and its tie counts.
template <Reduce R>
void spmm_extremum_into(const at::Tensor& ptr_t, const at::Tensor& src_t, const at::Tensor& x_t, at::Tensor& out,
                        at::Tensor& ties) {
  const int64_t F = x_t.size(1) * x_t.size(2), num_dst = ptr_t.numel() - 1;
  const at::Tensor ptr = ptr_t.contiguous(), src = src_t.to(at::kLong).contiguous(), x = x_t.contiguous();
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_extremum_cpu", [&] {
    reduce_rows(ptr.data_ptr<int64_t>(), src.data_ptr<int64_t>(), x.data_ptr<scalar_t>(), F, num_dst,
                ExtremumRows<scalar_t, R>(out.data_ptr<scalar_t>(), ties.data_ptr<int>(), F));
  });
}

std::tuple<at::Tensor, at::Tensor> spmm_cpu(const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                                            const std::optional<at::Tensor>& weight, const at::Tensor& x,
                                            c10::string_view reduce_name) {
  const Reduce reduce = parse_reduce(reduce_name, "spmm");
  check_spmm(ptr, dst, src, weight, x, "spmm", reduce);
  at::Tensor out = at::empty({ptr.numel() - 1, x.size(1), x.size(2)}, x.options());
  return dispatch_reduce(reduce, [&](auto r) -> std::tuple<at::Tensor, at::Tensor> {
    constexpr Reduce R = decltype(r)::value;
    if constexpr (is_extremum(R)) {
      at::Tensor ties = at::empty(out.sizes(), x.options().dtype(at::kInt));
      spmm_extremum_into<R>(ptr, src, x, out, ties);
      return {out, ties};
    } else {
      spmm_into(ptr, src, weight, x, out, /*accumulate=*/false, divides_by_degree(R));
      return {out, at::empty({0}, x.options().dtype(at::kInt))};
    }
  });
}

void spmm_add_cpu(at::Tensor& out, const at::Tensor& ptr, const at::Tensor& dst, const at::Tensor& src,
                  const std::optional<at::Tensor>& weight, const at::Tensor& x) {
  check_spmm(ptr, dst, src, weight, x, "spmm_add_");
  check_accumulator(out, ptr, x, "spmm_add_");
  spmm_into(ptr, src, weight, x, out, /*accumulate=*/true);
}

at::Tensor csr_ptr_cpu(const at::Tensor& key_t, int64_t num_rows) {
  check_csr_ptr(key_t, num_rows);
  const at::Tensor key = key_t.to(at::kLong).contiguous();
  at::Tensor ptr = at::empty({num_rows + 1}, key.options());
  const int64_t* k = key.data_ptr<int64_t>();
  int64_t* p = ptr.data_ptr<int64_t>();
  const int64_t E = key.numel();
  at::parallel_for(0, num_rows + 1, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) p[r] = std::lower_bound(k, k + E, r) - k;
  });
  return ptr;
}

at::Tensor mean_edge_weight_cpu(const at::Tensor& ptr_t, const at::Tensor& dst_t, at::ScalarType dtype) {
  check_mean_edge_weight(ptr_t, dst_t, dtype);
  const at::Tensor ptr = ptr_t.contiguous(), dst = dst_t.to(at::kLong).contiguous();
  at::Tensor out = at::empty({dst.numel()}, dst.options().dtype(dtype));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "mean_edge_weight_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t* p = ptr.data_ptr<int64_t>();
    const int64_t* d = dst.data_ptr<int64_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, dst.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t e = begin; e < end; ++e) {
        o[e] = static_cast<scalar_t>(acc_t(1) / static_cast<acc_t>(std::max<int64_t>(1, p[d[e] + 1] - p[d[e]])));
      }
    });
  });
  return out;
}

// out[src_e] += w_e * x[dst_e], edge by edge in order: each task owns a slice of the
// features (a fixed summation order whatever the thread count).
at::Tensor spmm_transposed_cpu(const at::Tensor& ptr, const at::Tensor& dst_t, const at::Tensor& src_t,
                               const std::optional<at::Tensor>& weight_t, const at::Tensor& x_t, int64_t num_src) {
  check_spmm_transposed(ptr, dst_t, src_t, weight_t, x_t, num_src);
  const int64_t E = src_t.numel(), H = x_t.size(1), C = x_t.size(2), F = H * C;
  const at::Tensor dst = dst_t.to(at::kLong).contiguous(), src = src_t.to(at::kLong).contiguous(), x = x_t.contiguous();
  const at::Tensor weight = weight_t.has_value() ? weight_t->contiguous() : at::Tensor();
  const at::ScalarType acc_type = at::toOpMathType(x.scalar_type());
  at::Tensor acc = at::zeros({num_src, H, C}, x.options().dtype(acc_type));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_transposed_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t* d = dst.data_ptr<int64_t>();
    const int64_t* s = src.data_ptr<int64_t>();
    const scalar_t* xs = x.data_ptr<scalar_t>();
    const scalar_t* w = weight.defined() ? weight.data_ptr<scalar_t>() : nullptr;
    acc_t* o = acc.data_ptr<acc_t>();
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 15) / std::max<int64_t>(E, 1));
    at::parallel_for(0, F, grain, [&](int64_t f_begin, int64_t f_end) {
      for (int64_t e = 0; e < E; ++e) {
        const scalar_t* row = xs + d[e] * F;
        acc_t* out_row = o + s[e] * F;
        for (int64_t f = f_begin; f < f_end; ++f) {
          const acc_t we = w != nullptr ? static_cast<acc_t>(w[e * H + f / C]) : acc_t(1);
          out_row[f] += we * static_cast<acc_t>(row[f]);
        }
      }
    });
  });
  return acc.scalar_type() == x.scalar_type() ? acc : acc.to(x.scalar_type());
}

// Over the forward's own graph: every source that reaches a destination's maximum (or
// minimum) gets the destination's gradient over its share of the ties. Threads take slices of the
// features, each walking all edges in order, so sums come in edge order (deterministic)
// and no two threads write one element.
at::Tensor spmm_extremum_backward_cpu(const at::Tensor& ptr_t, const at::Tensor& dst_t, const at::Tensor& src_t,
                                      const at::Tensor& x_t, const at::Tensor& out_t, const at::Tensor& ties_t,
                                      const at::Tensor& grad_t) {
  check_extremum_backward(ptr_t, dst_t, src_t, x_t, out_t, ties_t, grad_t);
  const int64_t F = x_t.size(1) * x_t.size(2), num_dst = ptr_t.numel() - 1;
  const at::Tensor ptr = ptr_t.contiguous(), src = src_t.to(at::kLong).contiguous(), x = x_t.contiguous(),
                   out = out_t.contiguous(), ties = ties_t.contiguous(), grad = grad_t.contiguous();
  at::Tensor grad_x = at::zeros(x.sizes(), x.options().dtype(at::toOpMathType(x.scalar_type())));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x.scalar_type(), "spmm_extremum_backward_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t* p = ptr.data_ptr<int64_t>();
    const int64_t* s = src.data_ptr<int64_t>();
    const scalar_t* xs = x.data_ptr<scalar_t>();
    const scalar_t* os = out.data_ptr<scalar_t>();
    const int* ts = ties.data_ptr<int>();
    const scalar_t* gs = grad.data_ptr<scalar_t>();
    acc_t* gx = grad_x.data_ptr<acc_t>();
    at::parallel_for(0, F, 1, [&](int64_t f0, int64_t f1) {
      std::vector<acc_t> best(f1 - f0), share(f1 - f0);  // the destination's, per feature of the slice
      for (int64_t d = 0; d < num_dst; ++d) {
        if (p[d] == p[d + 1]) continue;
        for (int64_t f = f0; f < f1; ++f) {
          best[f - f0] = static_cast<acc_t>(os[d * F + f]);
          share[f - f0] = static_cast<acc_t>(gs[d * F + f]) / extremum_share(best[f - f0], ts[d * F + f]);
        }
        for (int64_t e = p[d]; e < p[d + 1]; ++e) {
          const scalar_t* row = xs + s[e] * F;
          acc_t* to = gx + s[e] * F;
          for (int64_t f = f0; f < f1; ++f) {  // (a branch: few sources reach an extremum, so few writes)
            if (extremum_reaches(static_cast<acc_t>(row[f]), best[f - f0])) to[f] += share[f - f0];
          }
        }
      }
    });
  });
  return grad_x.scalar_type() == x.scalar_type() ? grad_x : grad_x.to(x.scalar_type());
}

at::Tensor sddmm_cpu(const at::Tensor& ptr_t, const at::Tensor& dst_t, const at::Tensor& src_t, const at::Tensor& a_t,
                     const at::Tensor& b_t) {
  const int64_t E = check_sparse_graph(ptr_t, dst_t, src_t, "sddmm");
  check_node_values(a_t, ptr_t, "sddmm", "a");
  check_node_values(b_t, ptr_t, "sddmm", "b");
  TORCH_CHECK(a_t.size(1) == b_t.size(1) && a_t.size(2) == b_t.size(2) && a_t.scalar_type() == b_t.scalar_type(),
              "sddmm: a and b must share heads, channels and dtype");
  TORCH_CHECK(a_t.size(0) >= ptr_t.numel() - 1, "sddmm: a needs a row per destination");
  const int64_t H = a_t.size(1), C = a_t.size(2), num_dst = ptr_t.numel() - 1;
  const at::Tensor ptr = ptr_t.contiguous(), src = src_t.to(at::kLong).contiguous(), a = a_t.contiguous(),
                   b = b_t.contiguous();
  at::Tensor out = at::empty({E, H}, a.options());
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "sddmm_cpu", [&] {
    using acc_t = at::opmath_type<scalar_t>;
    const int64_t* p = ptr.data_ptr<int64_t>();
    const int64_t* s = src.data_ptr<int64_t>();
    const scalar_t* as = a.data_ptr<scalar_t>();
    const scalar_t* bs = b.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, num_dst, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t d = begin; d < end; ++d) {
        const scalar_t* arow = as + d * H * C;
        for (int64_t e = p[d]; e < p[d + 1]; ++e) {
          const scalar_t* brow = bs + s[e] * H * C;
          for (int64_t h = 0; h < H; ++h) {
            acc_t sum = 0;
            _Pragma("omp simd reduction(+ : sum)")
            for (int64_t c = 0; c < C; ++c) {
              sum += static_cast<acc_t>(arow[h * C + c]) * static_cast<acc_t>(brow[h * C + c]);
            }
            o[e * H + h] = static_cast<scalar_t>(sum);
          }
        }
      }
    });
  });
  return out;
}

// One destination's softmax (forward) or its backward, per head.
template <typename scalar_t>
void softmax_segment(int64_t begin, int64_t end, int64_t H, const scalar_t* logits, scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t h = 0; h < H; ++h) {
    acc_t mx = -std::numeric_limits<acc_t>::infinity();
    for (int64_t e = begin; e < end; ++e) mx = std::max(mx, static_cast<acc_t>(logits[e * H + h]));
    acc_t sum = 0;
    for (int64_t e = begin; e < end; ++e) sum += std::exp(static_cast<acc_t>(logits[e * H + h]) - mx);
    const acc_t scale = acc_t(1) / (sum + acc_t(1e-16));
    for (int64_t e = begin; e < end; ++e) {
      out[e * H + h] = static_cast<scalar_t>(std::exp(static_cast<acc_t>(logits[e * H + h]) - mx) * scale);
    }
  }
}

template <typename scalar_t>
void softmax_backward_segment(int64_t begin, int64_t end, int64_t H, const scalar_t* y, const scalar_t* g,
                              scalar_t* out) {
  using acc_t = at::opmath_type<scalar_t>;
  for (int64_t h = 0; h < H; ++h) {
    acc_t dot = 0;
    for (int64_t e = begin; e < end; ++e) dot += static_cast<acc_t>(y[e * H + h]) * static_cast<acc_t>(g[e * H + h]);
    for (int64_t e = begin; e < end; ++e) {
      out[e * H + h] = static_cast<scalar_t>(static_cast<acc_t>(y[e * H + h]) *
                                             (static_cast<acc_t>(g[e * H + h]) - dot));
    }
  }
}

at::Tensor edge_softmax_cpu(const at::Tensor& ptr_t, const at::Tensor& logits_t) {
  TORCH_CHECK(ptr_t.dim() == 1 && ptr_t.numel() >= 1 && ptr_t.scalar_type() == at::kLong,
              "edge_softmax: ptr must be a 1-D int64 tensor");
  check_edge_values(logits_t, ptr_t, logits_t.dim() == 2 ? logits_t.size(0) : -1, -1, "edge_softmax", "logits");
  const at::Tensor ptr = ptr_t.contiguous(), logits = logits_t.contiguous();
  const int64_t H = logits.size(1), num_dst = ptr.numel() - 1;
  at::Tensor out = at::empty_like(logits);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, logits.scalar_type(), "edge_softmax_cpu", [&] {
    const int64_t* p = ptr.data_ptr<int64_t>();
    at::parallel_for(0, num_dst, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t d = begin; d < end; ++d) {
        softmax_segment(p[d], p[d + 1], H, logits.data_ptr<scalar_t>(), out.data_ptr<scalar_t>());
      }
    });
  });
  return out;
}

at::Tensor edge_softmax_backward_cpu(const at::Tensor& ptr_t, const at::Tensor& y_t, const at::Tensor& g_t) {
  TORCH_CHECK(ptr_t.dim() == 1 && ptr_t.numel() >= 1 && ptr_t.scalar_type() == at::kLong,
              "edge_softmax_backward: ptr must be a 1-D int64 tensor");
  TORCH_CHECK(y_t.sizes() == g_t.sizes() && y_t.dim() == 2 && y_t.scalar_type() == g_t.scalar_type(),
              "edge_softmax_backward: out and grad must be [E, H] tensors of one dtype");
  const at::Tensor ptr = ptr_t.contiguous(), y = y_t.contiguous(), g = g_t.contiguous();
  const int64_t H = y.size(1), num_dst = ptr.numel() - 1;
  at::Tensor out = at::empty_like(y);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, y.scalar_type(), "edge_softmax_backward_cpu", [&] {
    const int64_t* p = ptr.data_ptr<int64_t>();
    at::parallel_for(0, num_dst, kGrain, [&](int64_t begin, int64_t end) {
      for (int64_t d = begin; d < end; ++d) {
        softmax_backward_segment(p[d], p[d + 1], H, y.data_ptr<scalar_t>(), g.data_ptr<scalar_t>(),
                                 out.data_ptr<scalar_t>());
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(pyg_accel, CPU, m) {
  m.impl("spmm", &spmm_cpu);
  m.impl("spmm_add_", &spmm_add_cpu);
  m.impl("spmm_transposed", &spmm_transposed_cpu);
  m.impl("csr_ptr", &csr_ptr_cpu);
  m.impl("mean_edge_weight", &mean_edge_weight_cpu);
  m.impl("spmm_extremum_backward", &spmm_extremum_backward_cpu);
  m.impl("sddmm", &sddmm_cpu);
  m.impl("edge_softmax", &edge_softmax_cpu);
  m.impl("edge_softmax_backward", &edge_softmax_backward_cpu);
}

}  // namespace pyg_accel
