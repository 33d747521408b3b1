// Per-node draws of the CUDA sampler: one thread decides which CSC positions one
// frontier node samples. Each function mirrors the CPU kernel's draw
// (csrc/sampling/cpu/neighbor_sample.cpp) number for number, with the shared counter-based RNG
// (csrc/sampling/sampling_rng.h), so a seed gives the same sample on either device. They keep
// no state beyond the output slots, so they run in registers and global memory only.
#pragma once

#include <cmath>
#include <cstdint>

#include "../edge_weights.h"
#include "../sampling_rng.h"

namespace pyg_accel {

// Floyd's algorithm: k distinct positions among [start, start + degree), drawn in
// `chosen` (which doubles as the set of positions chosen so far).
__device__ __forceinline__ void floyd(int64_t start, int64_t degree, int64_t k, uint64_t key, int64_t* chosen) {
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
__device__ inline void draw_uniform(int64_t start, int64_t degree, int64_t k, bool replace, uint64_t key,
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
  __device__ __forceinline__ bool operator()(int64_t e) const { return weight[e] > 0; }
};

// Whether edge e may be drawn in a tree whose seed time is `limit`.
__device__ inline bool temporally_eligible(int64_t e, int64_t limit, const int64_t* row, const int64_t* node_time,
                                           const int64_t* edge_time) {
  return (node_time == nullptr || node_time[row[e]] <= limit) && (edge_time == nullptr || edge_time[e] <= limit);
}

struct NotLater {  // temporal: neighbour and edge no later than the tree's seed time
  int64_t limit;
  const int64_t* row;
  const int64_t* node_time;
  const int64_t* edge_time;
  __device__ __forceinline__ bool operator()(int64_t e) const {
    return temporally_eligible(e, limit, row, node_time, edge_time);
  }
};

// How many positions of [start, start + degree) `ok` accepts, counted until `cap` is
// reached (a draw count needs no more: see count_cap).
template <typename Accept>
__device__ inline int64_t count_upto(const Accept& ok, int64_t start, int64_t degree, int64_t cap) {
  int64_t n = 0;
  for (int64_t e = start; e < start + degree && n < cap; ++e) n += ok(e);
  return n;
}

// The count of accepted neighbours a draw count needs: all of them for fanout -1, one
// when drawing with replacement (any makes `fanout` draws), else up to the fanout.
__device__ __forceinline__ int64_t count_cap(int64_t fanout, bool replace) {
  return fanout < 0 ? INT64_MAX : replace ? 1 : fanout;
}

// Draws per node from its count of positive weights (zero weights are never drawn);
// `positive` may be capped by count_cap(fanout, replace).
__device__ __forceinline__ int64_t weighted_draws(int64_t positive, int64_t fanout, bool replace) {
  if (replace && fanout >= 0) return positive > 0 ? fanout : 0;
  return fanout < 0 ? positive : min(fanout, positive);
}

// Whether an Efraimidis-Spirakis key log(u) / w (w > 0) may exceed `kth` (a key, so
// <= 0): false only where it surely does not. log(u) / w > kth <=> u > exp(kth w),
// tested in single precision with a margin (1e-4) far above that test's rounding (a
// few 1e-6 while exp(kth w) is a normal float; below that the bound is 0 and nothing is
// rejected), so the exact key, a double log and division, is computed only for the
// candidates that may enter a full top-k (about k log(degree / k) of a node's degree).
__device__ __forceinline__ bool may_exceed(double u, double w, double kth) {
  return static_cast<float>(u) >= __expf(static_cast<float>(kth * w)) * 0.9999f;
}

// Weighted draws: with replacement, inverse-CDF over the positive weights in CSC
// order; without, the k largest Efraimidis-Spirakis keys log(u) / w in decreasing
// order (`keys` is scratch for k doubles); fanout -1 takes every positive edge. W:
// float or double (weights widened to double as they are read).
template <typename W>
__device__ inline void draw_weighted(const W* weight, int64_t start, int64_t degree, int64_t fanout, bool replace,
                                     uint64_t key, int64_t k, int64_t* out, double* keys) {
  if (k == 0) return;
  if (replace && fanout >= 0) {
    double total = 0.0;
    for (int64_t e = start; e < start + degree; ++e) {
      if (weight[e] > 0) total += weight[e];
    }
    if (k <= kLocalDraws) {  // the same running sums, one pass for all targets (in increasing order)
      double target[kLocalDraws];
      int order[kLocalDraws];
      for (int j = 0; j < k; ++j) {
        const double t = uniform_open(key, degree + j) * total;
        int q = j;
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
      const double target = uniform_open(key, degree + j) * total;
      double running = 0.0;
      int64_t chosen = -1, last = -1;
      for (int64_t e = start; e < start + degree; ++e) {
        if (weight[e] > 0) {
          running += weight[e];
          last = e;
          if (running >= target) {
            chosen = e;
            break;
          }
        }
      }
      out[j] = chosen >= 0 ? chosen : last;
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
    int64_t q = n < k ? n++ : k - 1;  // insertion into the decreasing top-k
    while (q > 0 && keys[q - 1] < kj) {
      keys[q] = keys[q - 1];
      out[q] = out[q - 1];
      --q;
    }
    keys[q] = kj;
    out[q] = start + j;
  }
}

__device__ inline void draw_weighted(EdgeWeights weight, int64_t start, int64_t degree, int64_t fanout, bool replace,
                                     uint64_t key, int64_t k, int64_t* out, double* keys) {
  if (weight.single) {
    draw_weighted(weight.as<float>(), start, degree, fanout, replace, key, k, out, keys);
  } else {
    draw_weighted(weight.as<double>(), start, degree, fanout, replace, key, k, out, keys);
  }
}

// Draws per node from its count of eligible edges (capped by count_cap(fanout,
// replace), or by the fanout for 'last', which never draws with replacement).
__device__ __forceinline__ int64_t temporal_draws(int64_t eligible, int64_t fanout, bool replace, bool last) {
  if (last) return fanout < 0 ? eligible : min(fanout, eligible);
  return num_to_draw(fanout, eligible, replace);
}

// Temporal draws among the eligible edges: 'last' keeps the last k in CSC order,
// 'uniform' draws k ordinals as draw_uniform does over [0, n) and maps them to
// positions in one pass (ordinals are held as -(ordinal + 1) until mapped).
__device__ inline void draw_temporal(int64_t start, int64_t degree, int64_t fanout, bool replace, bool last,
                                     uint64_t key, int64_t k, int64_t limit, const int64_t* row,
                                     const int64_t* node_time, const int64_t* edge_time, int64_t* out) {
  if (k == 0) return;
  if (last) {
    int64_t c = 0;
    for (int64_t e = start + degree - 1; e >= start && c < k; --e) {
      if (temporally_eligible(e, limit, row, node_time, edge_time)) out[k - 1 - c++] = e;
    }
    return;
  }
  int64_t n = 0;
  for (int64_t e = start; e < start + degree; ++e) n += temporally_eligible(e, limit, row, node_time, edge_time);
  if (k == n && (fanout < 0 || !replace)) {
    int64_t q = 0;
    for (int64_t e = start; e < start + degree; ++e) {
      if (temporally_eligible(e, limit, row, node_time, edge_time)) out[q++] = e;
    }
    return;
  }
  draw_uniform(0, n, k, replace, key, out);
  for (int64_t q = 0; q < k; ++q) out[q] = -(out[q] + 1);
  int64_t ordinal = 0;
  for (int64_t e = start; e < start + degree; ++e) {
    if (!temporally_eligible(e, limit, row, node_time, edge_time)) continue;
    for (int64_t q = 0; q < k; ++q) {
      if (out[q] == -(ordinal + 1)) out[q] = e;
    }
    ++ordinal;
  }
}

// Temporal draws in a column sorted by time (ascending in max(node_time[row[e]],
// edge_time[e]) over the times given, as the sampler sorts its graph; the plan checks
// it once): the eligible edges are then a prefix [start, start + n) of the column, n
// found by binary search, and draw_temporal's result is had without a scan, since the
// eligible ordinal j is position start + j ('last': the prefix's last k).
__device__ inline int64_t eligible_prefix(const NotLater& ok, int64_t start, int64_t degree) {
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

__device__ inline void draw_temporal_prefix(int64_t start, int64_t n, int64_t fanout, bool replace, bool last,
                                            uint64_t key, int64_t k, int64_t* out) {
  if (last || (k == n && (fanout < 0 || !replace))) {  // (take-all: k == n)
    for (int64_t j = 0; j < k; ++j) out[j] = start + n - k + j;
  } else {
    draw_uniform(start, n, k, replace, key, out);
  }
}

}  // namespace pyg_accel
