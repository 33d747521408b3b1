// One node's draw of neighbours, shared by the CPU kernel and both CUDA pipelines
// (homogeneous and heterogeneous): NodeDraw says how many neighbours a node whose edges
// are the CSC positions [start, start + degree) draws (count) and which (draw), under
// its edge type's bias: uniform, weighted (edge weights) or temporal (node and edge
// times no later than the tree's seed time). bias_of is the one rule choosing a bias
// from what an edge type carries. Every function runs on the host and the device with
// the shared counter-based RNG (sampling_rng.h), so a seed gives the same sample on
// either; they keep no state beyond the output slots (and, on the host only, a set or
// a buffer for draws too many for the device's local arrays). The CUDA samplers add
// warp- and block-wide versions of the filtered draws for nodes with many neighbours
// (cuda/sample_warp_draws.cuh), which give these functions' results.
#pragma once

#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#ifndef __CUDA_ARCH__
#include <algorithm>
#include <unordered_set>
#include <vector>
#endif

#include "../common/host_device.h"
#include "edge_weights.h"
#include "sampling_rng.h"

namespace pyg_accel {

PYG_ACCEL_HD int64_t min_of(int64_t a, int64_t b) { return a < b ? a : b; }

// An edge type's bias, from what it carries: temporal when it has node or edge times
// (and the sample has seed times), else weighted when it has weights, else uniform.
enum class Bias : int { kUniform, kWeighted, kTemporal };
PYG_ACCEL_HD Bias bias_of(bool has_weight, bool has_time) {
  return has_time ? Bias::kTemporal : has_weight ? Bias::kWeighted : Bias::kUniform;
}

// Floyd's algorithm: k distinct positions among [start, start + degree), drawn in
// `chosen` (which doubles as the set of positions chosen so far).
PYG_ACCEL_HD_INLINE void floyd(int64_t start, int64_t degree, int64_t k, uint64_t key, int64_t* chosen) {
#ifndef __CUDA_ARCH__
  if (k > 64) {  // (the host: a hash set instead of a linear scan; the same draws)
    std::unordered_set<int64_t> taken;
    taken.reserve(2 * k);
    for (int64_t j = degree - k, n = 0; j < degree; ++j, ++n) {
      int64_t t = start + uniform_below(key, j, j + 1);
      if (!taken.insert(t).second) {
        t = start + j;
        taken.insert(t);
      }
      chosen[n] = t;
    }
    return;
  }
#endif
  for (int64_t j = degree - k, n = 0; j < degree; ++j, ++n) {
    int64_t t = start + uniform_below(key, j, j + 1);
    for (int64_t q = 0; q < n; ++q) {
      if (chosen[q] == t) {
        t = start + j;
        break;
      }
    }
    chosen[n] = t;
  }
}

// Up to this many draws are made in thread-local memory (L1-cached) rather than by
// re-reading the global output, which does not stay in L1.
constexpr int64_t kLocalDraws = 32;

// k uniform draws among positions [start, start + degree): with replacement, or
// without (Floyd's algorithm).
PYG_ACCEL_HD_INLINE void draw_uniform(int64_t start, int64_t degree, int64_t k, bool replace, uint64_t key,
                                      int64_t* out) {
  if (replace) {
    for (int64_t j = 0; j < k; ++j) out[j] = start + uniform_below(key, j, degree);
  } else if (k <= kLocalDraws) {
    int64_t chosen[kLocalDraws];
    floyd(start, degree, k, key, chosen);
    for (int64_t j = 0; j < k; ++j) out[j] = chosen[j];
  } else {
    floyd(start, degree, k, key, out);
  }
}

// Which CSC positions a weighted or temporal draw may take.
struct PositiveWeight {  // weighted: zero weights are never drawn
  EdgeWeights weight;
  PYG_ACCEL_HD bool operator()(int64_t e) const { return weight[e] > 0; }
};

// Temporal: edge e may be drawn in a tree whose seed time is `limit` when its
// neighbour (node_time) and the edge itself (edge_time) are no later. A row outside the
// `num_src` nodes of node_time is never eligible (nothing is read outside node_time;
// the samplers check rows before sampling and report a row out of range when they
// read a drawn edge's neighbour).
struct NotLater {
  int64_t limit = 0;
  const int64_t* row = nullptr;
  const int64_t* node_time = nullptr;  // [num_src] or null
  const int64_t* edge_time = nullptr;  // [E] or null
  int64_t num_src = 0;
  PYG_ACCEL_HD bool operator()(int64_t e) const {
    if (node_time != nullptr) {
      const int64_t u = row[e];
      if (u < 0 || u >= num_src || node_time[u] > limit) return false;
    }
    return edge_time == nullptr || edge_time[e] <= limit;
  }
  PYG_ACCEL_HD bool given() const { return node_time != nullptr || edge_time != nullptr; }
};

// How many positions of [start, start + degree) `ok` accepts, counted until `cap` is
// reached (a draw count needs no more: see count_cap).
template <typename Accept>
PYG_ACCEL_HD_INLINE int64_t count_upto(const Accept& ok, int64_t start, int64_t degree, int64_t cap) {
  int64_t n = 0;
  for (int64_t e = start; e < start + degree && n < cap; ++e) n += ok(e);
  return n;
}

// The count of accepted neighbours a draw count needs: all of them for fanout -1, one
// when drawing with replacement (any makes `fanout` draws), else up to the fanout.
PYG_ACCEL_HD int64_t count_cap(int64_t fanout, bool replace) {
  return fanout < 0 ? INT64_MAX : replace ? 1 : fanout;
}

// Draws per node from its count of positive weights (zero weights are never drawn);
// `positive` may be capped by count_cap(fanout, replace).
PYG_ACCEL_HD int64_t weighted_draws(int64_t positive, int64_t fanout, bool replace) {
  if (replace && fanout >= 0) return positive > 0 ? fanout : 0;
  return fanout < 0 ? positive : min_of(fanout, positive);
}

// Whether an Efraimidis-Spirakis key log(u) / w (w > 0) may exceed `kth` (a key, so
// <= 0): false only where it surely does not. log(u) / w > kth <=> u > exp(kth w),
// tested in single precision with a margin (1e-4) far above that test's rounding (a
// few 1e-6 while exp(kth w) is a normal float; below that the bound is 0 and nothing is
// rejected), so the exact key, a double log and division, is computed only for the
// candidates that may enter a full top-k (about k log(degree / k) of a node's degree).
PYG_ACCEL_HD bool may_exceed(double u, double w, double kth) {
#ifdef __CUDA_ARCH__
  const float bound = __expf(static_cast<float>(kth * w));
#else
  const float bound = std::exp(static_cast<float>(kth * w));
#endif
  return static_cast<float>(u) >= bound * 0.9999f;
}

// Weighted draws with replacement: k inverse-CDF draws over the positive weights of
// [start, start + degree) in CSC order, target j = uniform_open(key, degree + j) x
// their total. All targets are placed in one pass over the running sums once sorted
// (in `target` / `order`, room for k each); without that room (null: the device, more
// than kLocalDraws draws) each target scans the sums itself.
template <typename W>
PYG_ACCEL_HD_INLINE void draw_weighted_replace(const W* weight, int64_t start, int64_t degree, uint64_t key,
                                               int64_t k, int64_t* out, double* target, int64_t* order) {
  double total = 0.0;
  for (int64_t e = start; e < start + degree; ++e) {
    if (weight[e] > 0) total += weight[e];
  }
  if (target != nullptr) {
    for (int64_t j = 0; j < k; ++j) {  // (insertion: equal targets keep draw order)
      const double t = uniform_open(key, degree + j) * total;
      int64_t q = j;
      for (; q > 0 && target[q - 1] > t; --q) target[q] = target[q - 1], order[q] = order[q - 1];
      target[q] = t, order[q] = j;
    }
    double running = 0.0;
    int64_t last = -1, next = 0;
    for (int64_t e = start; e < start + degree && next < k; ++e) {
      if (weight[e] > 0) {
        running += weight[e];
        last = e;
        for (; next < k && running >= target[next]; ++next) out[order[next]] = e;
      }
    }
    for (; next < k; ++next) out[order[next]] = last;  // (targets past the rounded total)
    return;
  }
  for (int64_t j = 0; j < k; ++j) {
    const double goal = uniform_open(key, degree + j) * total;
    double running = 0.0;
    int64_t chosen = -1, last = -1;
    for (int64_t e = start; e < start + degree; ++e) {
      if (weight[e] > 0) {
        running += weight[e];
        last = e;
        if (running >= goal) {
          chosen = e;
          break;
        }
      }
    }
    out[j] = chosen >= 0 ? chosen : last;
  }
}

// Weighted draws: with replacement, inverse-CDF over the positive weights in CSC
// order; without, the k largest Efraimidis-Spirakis keys log(u) / w in decreasing
// order, equal keys by position (`keys` is scratch for k doubles); fanout -1 takes
// every positive edge. W: float or double (weights widened to double as they are read).
template <typename W>
PYG_ACCEL_HD_INLINE void draw_weighted(const W* weight, int64_t start, int64_t degree, int64_t fanout, bool replace,
                                       uint64_t key, int64_t k, int64_t* out, double* keys) {
  if (k == 0) return;
  if (replace && fanout >= 0) {
    if (k <= kLocalDraws) {
      double target[kLocalDraws];
      int64_t order[kLocalDraws];
      draw_weighted_replace(weight, start, degree, key, k, out, target, order);
    } else {
#ifdef __CUDA_ARCH__
      draw_weighted_replace(weight, start, degree, key, k, out, static_cast<double*>(nullptr),
                            static_cast<int64_t*>(nullptr));
#else
      std::vector<double> target(k);
      std::vector<int64_t> order(k);
      draw_weighted_replace(weight, start, degree, key, k, out, target.data(), order.data());
#endif
    }
    return;
  }
  if (fanout < 0) {
    int64_t n = 0;
    for (int64_t e = start; e < start + degree; ++e) {
      if (weight[e] > 0) out[n++] = e;
    }
    return;
  }
  int64_t n = 0;
  for (int64_t j = 0; j < degree; ++j) {
    const double w = weight[start + j];
    if (!(w > 0)) continue;
    const double u = uniform_open(key, j);
    if (n == k && !may_exceed(u, w, keys[k - 1])) continue;
    const double kj = log(u) / w;
    if (n == k && !(kj > keys[k - 1])) continue;
    int64_t q = n < k ? n++ : k - 1;  // insertion into the decreasing top-k, after the equal keys held
    while (q > 0 && keys[q - 1] < kj) {
      keys[q] = keys[q - 1];
      out[q] = out[q - 1];
      --q;
    }
    keys[q] = kj;
    out[q] = start + j;
  }
}

PYG_ACCEL_HD_INLINE void draw_weighted(EdgeWeights weight, int64_t start, int64_t degree, int64_t fanout,
                                       bool replace, uint64_t key, int64_t k, int64_t* out, double* keys) {
  if (weight.single) {
    draw_weighted(weight.as<float>(), start, degree, fanout, replace, key, k, out, keys);
  } else {
    draw_weighted(weight.as<double>(), start, degree, fanout, replace, key, k, out, keys);
  }
}

// Draws per node from its count of eligible edges (capped by count_cap(fanout,
// replace), or by the fanout for 'last', which never draws with replacement).
PYG_ACCEL_HD int64_t temporal_draws(int64_t eligible, int64_t fanout, bool replace, bool last) {
  if (last) return fanout < 0 ? eligible : min_of(fanout, eligible);
  return num_to_draw(fanout, eligible, replace);
}

// Temporal draws among the eligible edges: 'last' keeps the last k in CSC order,
// 'uniform' draws k ordinals as draw_uniform does over [0, n) and maps them to
// positions in one pass (ordinals are held as -(ordinal + 1) until mapped).
PYG_ACCEL_HD_INLINE void draw_temporal(const NotLater& ok, int64_t start, int64_t degree, int64_t fanout,
                                       bool replace, bool last, uint64_t key, int64_t k, int64_t* out) {
  if (k == 0) return;
  if (last) {
    int64_t c = 0;
    for (int64_t e = start + degree - 1; e >= start && c < k; --e) {
      if (ok(e)) out[k - 1 - c++] = e;
    }
    return;
  }
  int64_t n = 0;
  for (int64_t e = start; e < start + degree; ++e) n += ok(e);
  if (k == n && (fanout < 0 || !replace)) {
    int64_t q = 0;
    for (int64_t e = start; e < start + degree; ++e) {
      if (ok(e)) out[q++] = e;
    }
    return;
  }
  draw_uniform(0, n, k, replace, key, out);
  for (int64_t q = 0; q < k; ++q) out[q] = -(out[q] + 1);
  int64_t ordinal = 0;
  for (int64_t e = start; e < start + degree; ++e) {
    if (!ok(e)) continue;
    for (int64_t q = 0; q < k; ++q) {
      if (out[q] == -(ordinal + 1)) out[q] = e;
    }
    ++ordinal;
  }
}

// Temporal draws in a column sorted by time (ascending in max(node_time[row[e]],
// edge_time[e]) over the times given, as the sampler sorts its graph; the samplers
// check it once): the eligible edges are then a prefix [start, start + n) of the
// column, n found by binary search, and draw_temporal's result is had without a scan,
// since the eligible ordinal j is position start + j ('last': the prefix's last k).
PYG_ACCEL_HD_INLINE int64_t eligible_prefix(const NotLater& ok, int64_t start, int64_t degree) {
  int64_t lo = 0, hi = degree;  // ok(start + p) for p < lo; not for p >= hi
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (ok(start + mid)) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

PYG_ACCEL_HD_INLINE void draw_temporal_prefix(int64_t start, int64_t n, int64_t fanout, bool replace, bool last,
                                              uint64_t key, int64_t k, int64_t* out) {
  if (last || (k == n && (fanout < 0 || !replace))) {  // (take-all: k == n)
    for (int64_t j = 0; j < k; ++j) out[j] = start + n - k + j;
  } else {
    draw_uniform(start, n, k, replace, key, out);
  }
}

// One node's draw: its edges, the hop's fanout and replacement, and its edge type's
// bias (weights; or times and the tree's seed time, 'last' or 'uniform', and whether
// the columns are in time order). The samplers fill one per node and ask it how many
// neighbours the node draws, then which.
struct NodeDraw {
  int64_t start = 0, degree = 0, fanout = 0;
  bool replace = false;
  EdgeWeights weight;        // read when the bias is weighted
  NotLater time;             // given: the bias is temporal
  bool last = false;         // temporal strategy 'last' (else 'uniform')
  bool time_sorted = false;  // temporal, every column in ascending time: the eligible edges are a prefix

  PYG_ACCEL_HD Bias bias() const { return bias_of(static_cast<bool>(weight), time.given()); }
  PYG_ACCEL_HD bool weighted() const { return bias() == Bias::kWeighted; }
  PYG_ACCEL_HD bool temporal() const { return bias() == Bias::kTemporal; }
  // Whether counting the draws looks at every neighbour (weights, or times in a column
  // not in time order); the CUDA samplers let warps take such nodes when large.
  PYG_ACCEL_HD bool filtered() const { return weighted() || (temporal() && !time_sorted); }
  // Whether a uniform node takes each of its neighbours once, in CSC order (k draws).
  PYG_ACCEL_HD bool takes_all(int64_t k) const {
    return bias() == Bias::kUniform && k == degree && (fanout < 0 || !replace);
  }

  // How many neighbours the node draws (<= num_to_draw(fanout, degree, replace)).
  PYG_ACCEL_HD_INLINE int64_t count() const {
    switch (bias()) {
      case Bias::kUniform:
        return num_to_draw(fanout, degree, replace);
      case Bias::kWeighted:
        return weighted_draws(count_upto(PositiveWeight{weight}, start, degree, count_cap(fanout, replace)), fanout,
                              replace);
      default:
        return temporal_draws(time_sorted ? eligible_prefix(time, start, degree)
                                          : count_upto(time, start, degree, count_cap(fanout, replace && !last)),
                              fanout, replace, last);
    }
  }

  // The CSC positions of its k = count() draws, into out[0, k). `keys`: scratch for k
  // doubles (weighted draws without replacement; else unused).
  PYG_ACCEL_HD_INLINE void draw(uint64_t key, int64_t k, int64_t* out, double* keys) const {
    if (k == 0) return;
    switch (bias()) {
      case Bias::kUniform:
        if (takes_all(k)) {
          for (int64_t j = 0; j < k; ++j) out[j] = start + j;
        } else {
          draw_uniform(start, degree, k, replace, key, out);
        }
        return;
      case Bias::kWeighted:
        draw_weighted(weight, start, degree, fanout, replace, key, k, out, keys);
        return;
      default:
        if (time_sorted) {
          draw_temporal_prefix(start, eligible_prefix(time, start, degree), fanout, replace, last, key, k, out);
        } else {
          draw_temporal(time, start, degree, fanout, replace, last, key, k, out);
        }
    }
  }

  // The host's check of the values these draws read: weights finite and non-negative,
  // or a ValueError naming `op`. The CPU kernel runs it on each node it draws for (the
  // caller's tensor may change between calls, also through numpy, which no version
  // counter sees); the CUDA samplers check a graph's values once per plan
  // (check_bias_values, sampler_inputs.cpp).
  void check_values(const char* op) const {
    if (!weighted()) return;
    for (int64_t e = start; e < start + degree; ++e) {
      const double w = weight[e];
      TORCH_CHECK_VALUE(w >= 0 && w < std::numeric_limits<double>::infinity(), op,
                        ": edge_weight must be finite and non-negative, got ", std::to_string(w), " at edge ",
                        std::to_string(e));
    }
  }
};

// What an edge type's draws read besides its CSC, as pointers valid where the sampler
// runs (built once per call or plan from the checked inputs: bias_views in
// sampler_inputs.h): its weights, its source type's node times and its edge times.
struct BiasView {
  EdgeWeights weight;                  // [E] or none
  const int64_t* node_time = nullptr;  // [num_src] or null
  const int64_t* edge_time = nullptr;  // [E] or null
  int64_t num_src = 0;                 // nodes of the source type
  bool time_sorted = false;            // times given and every column in ascending time
};

// The draw of a node whose edges are [start, start + degree) of an edge type with rows
// `row` and inputs `bias`, at a hop of `fanout`; `limit`: its tree's seed time (read
// only where the type has times, which makes the sample temporal).
PYG_ACCEL_HD NodeDraw node_draw_of(const BiasView& bias, const int64_t* row, int64_t start, int64_t degree,
                                   int64_t fanout, bool replace, bool last, int64_t limit) {
  NodeDraw d;
  d.start = start, d.degree = degree, d.fanout = fanout, d.replace = replace;
  d.weight = bias.weight, d.last = last, d.time_sorted = bias.time_sorted;
  if (bias.node_time != nullptr || bias.edge_time != nullptr) {
    d.time = {limit, row, bias.node_time, bias.edge_time, bias.num_src};
  }
  return d;
}

}  // namespace pyg_accel
