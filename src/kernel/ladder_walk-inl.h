// The inner loops of the router's incremental ladder scoring
// (routing/ladder_scorer.cc; contracts GatherDotFn and GatherAxpyFn in
// kernel/target_ops.h). Included by kernel-inl.h inside a target's namespace,
// so each target of targets.def compiles them with its own flags: the walk
// scores every sampled row against a whole block of keys at once (key_scores,
// the rows in the vector lanes), then each row's weighted sum of its kept
// keys' values is a matrix-vector loop over dv (gather_axpy); gather_dot, one
// row against listed keys, serves the router's compensation terms;
// panel_scores_tile (the register tile of k-means, nearest_centroid-inl.h's
// panel_dots) the compensation pass's scores. Sums run in a fixed
// order per target, so a target gives the same bits on any thread.

// out[i] = scale * q . keys[index[i]] for i < n (rows of d floats).
inline void gather_dot(const float* __restrict q, const float* __restrict keys, std::int64_t d,
                       const std::int32_t* __restrict index, std::int64_t n, float scale,
                       float* __restrict out) {
  const std::int64_t full = d / kLanes * kLanes;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* k = keys + static_cast<std::int64_t>(index[i]) * d;
    VF a0{}, a1{};
    std::int64_t t = 0;
    for (; t + 2 * kLanes <= full; t += 2 * kLanes) {
      a0 += load(q + t) * load(k + t);
      a1 += load(q + t + kLanes) * load(k + t + kLanes);
    }
    if (t < full) a0 += load(q + t) * load(k + t);
    float sum = reduce_add(a0 + a1);
    for (std::int64_t c = full; c < d; ++c) sum += q[c] * k[c];
    out[i] = scale * sum;
  }
}

// Column vectors gather_axpy accumulates per pass over the keys: every one a
// register of its own, with room for the broadcast weight and the loads: a
// quarter of the registers. On AVX-512 a head dim of 128 is one pass, so each key's
// weight and index are read once (two passes of four vectors ran at a third
// of the FMA rate).
constexpr int kAxpyVecs = Traits::kRegisters / 4;

// Columns [c, c + V * kLanes) of gather_axpy, on V accumulators.
template <int V>
inline void gather_axpy_columns(const float* __restrict p, const float* __restrict values,
                                std::int64_t dv, const std::int32_t* __restrict index,
                                std::int64_t n, float alpha, float* __restrict acc) {
  const VF a_scale = splat(alpha);
  VF a[V];
#pragma GCC unroll 16
  for (int j = 0; j < V; ++j) a[j] = load(acc + j * kLanes) * a_scale;
  for (std::int64_t i = 0; i < n; ++i) {
    const float* v = values + static_cast<std::int64_t>(index[i]) * dv;
    const VF w = splat(p[i]);
#pragma GCC unroll 16
    for (int j = 0; j < V; ++j) a[j] += w * load(v + j * kLanes);
  }
#pragma GCC unroll 16
  for (int j = 0; j < V; ++j) store(acc + j * kLanes, a[j]);
}

// acc[c] = acc[c] * alpha + sum_i p[i] * values[index[i]][c] for c < dv, keys
// in the order given (rows of dv floats). Each column's sum is in key order
// however the columns are split into passes.
inline void gather_axpy(const float* __restrict p, const float* __restrict values, std::int64_t dv,
                        const std::int32_t* __restrict index, std::int64_t n, float alpha,
                        float* __restrict acc) {
  const std::int64_t full = dv / kLanes * kLanes;
  std::int64_t c = 0;
  for (; c + kAxpyVecs * kLanes <= full; c += kAxpyVecs * kLanes) {
    gather_axpy_columns<kAxpyVecs>(p, values + c, dv, index, n, alpha, acc + c);
  }
  for (; c < full; c += kLanes) gather_axpy_columns<1>(p, values + c, dv, index, n, alpha, acc + c);
  for (std::int64_t c = full; c < dv; ++c) {
    float a = acc[c] * alpha;
    for (std::int64_t i = 0; i < n; ++i) {
      a += p[i] * values[static_cast<std::int64_t>(index[i]) * dv + c];
    }
    acc[c] = a;
  }
}

// scores[r * stride + j] = scale * x_r . key_j (+ bias[j] where bias is not
// null) for the R rows at x (rows d apart) and the kCentroidPanel keys of one
// panel: the walk's scores, and the compensation pass's (pooled_merge-inl.h)
// with the log of each pooled tile's size as its bias.
template <int R>
inline void panel_scores_tile(const float* __restrict x, std::int64_t d,
                              const float* __restrict panel, float scale,
                              const float* __restrict bias, float* __restrict scores,
                              std::int64_t stride) {
  VF acc[R][kCentroidVecs];
  panel_dots<R>(x, d, panel, acc);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < kCentroidVecs; ++j) {
      const VF scaled = acc[r][j] * splat(scale);
      store(scores + r * stride + j * kLanes,
            bias != nullptr ? scaled + load(bias + j * kLanes) : scaled);
    }
}

// KeyScoresFn: the sampled rows in the vector lanes, J keys at a time, each
// key's channel broadcast from its row, so K needs no transposed copy (the
// routing code's scalar transposing conversion cost more than the scores).
// Each score sums its channels in order, as panel_dots does.
template <int J>
inline void key_scores_tile(const float* __restrict qt, std::int64_t rows_padded, std::int64_t d,
                            const float* __restrict keys, float scale, float* __restrict scores) {
  for (std::int64_t v0 = 0; v0 < rows_padded; v0 += kLanes) {
    VF acc[J];
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) acc[j] = VF{};
    for (std::int64_t c = 0; c < d; ++c) {
      const VF q = load(qt + c * rows_padded + v0);
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) acc[j] += q * splat(keys[j * d + c]);
    }
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) store(scores + j * rows_padded + v0, acc[j] * splat(scale));
  }
}

inline void key_scores(const float* qt, std::int64_t rows_padded, std::int64_t d, const float* keys,
                       std::int64_t n, float scale, float* scores) {
  constexpr int kKeys = 8;
  std::int64_t j = 0;
  for (; j + kKeys <= n; j += kKeys) {
    key_scores_tile<kKeys>(qt, rows_padded, d, keys + j * d, scale, scores + j * rows_padded);
  }
  for (; j < n; ++j) {
    key_scores_tile<1>(qt, rows_padded, d, keys + j * d, scale, scores + j * rows_padded);
  }
}

// WalkDotOps, defined by kernel/ladder_walk_dot-inl.h in the translation
// units of targets with a bf16 dot product.
template <typename DotPath>
WalkDotOps walk_dot_ops();

// ExpWeightsFn: whole vectors on the softmax's exp2 (softmax_rows-inl.h), the
// last n % kLanes one at a time.
inline float exp_weights(float* x, std::int64_t n, float top) {
  constexpr float kLog2e = 1.4426950408889634f;
  const std::int64_t full = n / kLanes * kLanes;
  float sum = full > 0 ? exp_row(x, full, top, kLog2e, 0.0f) : 0.0f;
  for (std::int64_t i = full; i < n; ++i) {
    x[i] = exp2_scalar((x[i] - top) * kLog2e);
    sum += x[i];
  }
  return sum;
}
