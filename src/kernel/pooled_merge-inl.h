// The compensation pass's inner loops (compensation/compensate.cc; contract
// PooledMergeFn in kernel/target_ops.h). Included by kernel-inl.h inside a
// target's namespace, after nearest_centroid-inl.h, whose register tile and
// panel layout the scores reuse.
//
// Every row of a q-block skips the same pooled tiles, so the pass is a small
// attention of the block's rows over those tiles' mean keys: register tiles of
// kPointRows rows share every key and value load (a row at a time, as the
// router's gather_dot and gather_axpy do, re-reads both per row and was 3-4x
// slower), and the exponentials run a vector at a time (exp_row). Sums run in
// a fixed order per target, so the bits do not depend on the thread.

static_assert(kPointRows <= kMaxMergeRows, "the scores scratch holds kMaxMergeRows rows");

// Vectors of output columns per pass of the weighted sum: R rows of them
// accumulate while one value row streams through.
constexpr int kMergeVecs = 2;

// o_r[c] = o_r[c] * alpha[r] + sum_j w[r * stride + j] * values[index[j]][c]
// for the R rows at o (o_stride apart) and columns [c0, c0 + kMergeVecs lanes).
template <int R>
inline void pooled_axpy_columns(const float* __restrict w, std::int64_t stride,
                                const float* __restrict values, std::int64_t dv,
                                const std::int32_t* __restrict index, std::int64_t n,
                                const float* __restrict alpha, float* __restrict o,
                                std::int64_t o_stride, std::int64_t c0) {
  VF acc[R][kMergeVecs];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < kMergeVecs; ++c)
      acc[r][c] = load(o + r * o_stride + c0 + c * kLanes) * splat(alpha[r]);
  for (std::int64_t j = 0; j < n; ++j) {
    const float* value = values + static_cast<std::int64_t>(index[j]) * dv + c0;
    VF x[kMergeVecs];
#pragma GCC unroll 4
    for (int c = 0; c < kMergeVecs; ++c) x[c] = load(value + c * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const VF wr = splat(w[r * stride + j]);
#pragma GCC unroll 4
      for (int c = 0; c < kMergeVecs; ++c) acc[r][c] += wr * x[c];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int c = 0; c < kMergeVecs; ++c) store(o + r * o_stride + c0 + c * kLanes, acc[r][c]);
}

// The same for the columns past the last whole kMergeVecs group, one at a time.
inline void pooled_axpy_tail(const float* w, std::int64_t stride, const float* values,
                             std::int64_t dv, const std::int32_t* index, std::int64_t n,
                             const float* alpha, std::int64_t rows, float* o, std::int64_t o_stride,
                             std::int64_t c0) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = c0; c < dv; ++c) {
      float a = o[r * o_stride + c] * alpha[r];
      for (std::int64_t j = 0; j < n; ++j) {
        a += w[r * stride + j] * values[static_cast<std::int64_t>(index[j]) * dv + c];
      }
      o[r * o_stride + c] = a;
    }
  }
}

// R rows' weighted sums over every column (RowsAxpyFn for R rows).
template <int R>
inline void rows_axpy_tile(const float* w, std::int64_t w_stride, const float* values,
                           std::int64_t dv, const std::int32_t* index, std::int64_t n,
                           const float* alpha, float* o, std::int64_t o_stride) {
  const std::int64_t whole = dv / (kMergeVecs * kLanes) * (kMergeVecs * kLanes);
  for (std::int64_t c0 = 0; c0 < whole; c0 += kMergeVecs * kLanes) {
    pooled_axpy_columns<R>(w, w_stride, values, dv, index, n, alpha, o, o_stride, c0);
  }
  if (whole < dv) pooled_axpy_tail(w, w_stride, values, dv, index, n, alpha, R, o, o_stride, whole);
}

inline void rows_axpy(const float* w, std::int64_t w_stride, const float* values, std::int64_t dv,
                      const std::int32_t* index, std::int64_t n, const float* alpha,
                      std::int64_t rows, float* o, std::int64_t o_stride) {
  const std::int64_t full = rows / kPointRows * kPointRows;
  for (std::int64_t r = 0; r < full; r += kPointRows) {
    rows_axpy_tile<kPointRows>(w + r * w_stride, w_stride, values, dv, index, n, alpha + r,
                               o + r * o_stride, o_stride);
  }
  for (std::int64_t r = full; r < rows; ++r) {
    rows_axpy_tile<1>(w + r * w_stride, w_stride, values, dv, index, n, alpha + r, o + r * o_stride,
                      o_stride);
  }
}

// R rows of one q-block: scores, the merge with each row's (o, lse), and the
// weighted sum of the mean values (see compensate_row in compensation.h for
// the formula; here top is the max over lse and the row's scores).
template <int R>
inline void pooled_merge_rows(const PooledMergeArgs& a, std::int64_t row0) {
  const std::int64_t stride = a.n_padded;
  float* scores = a.scores;
  for (std::int64_t p = 0; p < a.n_padded; p += kCentroidPanel) {
    panel_scores_tile<R>(a.q + row0 * a.d, a.d, a.key_panels + p * a.d, a.scale, a.bias + p,
                         scores + p, stride);
  }
  constexpr float kLog2e = 1.4426950408889634f;
  float alpha[R];
  for (int r = 0; r < R; ++r) {
    float* lse = a.lse + (row0 + r) * a.lse_stride;
    float* row = scores + r * stride;
    const float top = std::max(*lse, row_max(row, a.n_padded));
    const float exact = *lse == kNegInf ? 0.0f : exp2_scalar((*lse - top) * kLog2e);
    const float sum = exact + exp_row(row, a.n_padded, top, kLog2e, 0.0f);
    const float inv = 1.0f / sum;
    alpha[r] = exact * inv;
    for (std::int64_t j = 0; j < a.n; ++j) row[j] *= inv;
    *lse = top + std::log(sum);
  }
  rows_axpy_tile<R>(scores, stride, a.values, a.dv, a.index, a.n, alpha, a.o + row0 * a.o_stride,
                    a.o_stride);
}

inline void pooled_merge(const PooledMergeArgs& a) {
  const std::int64_t full = a.rows / kPointRows * kPointRows;
  for (std::int64_t r = 0; r < full; r += kPointRows) pooled_merge_rows<kPointRows>(a, r);
  for (std::int64_t r = full; r < a.rows; ++r) pooled_merge_rows<1>(a, r);
}

// The bf16 dot-product merge (PooledMergeDotFn), defined by
// kernel/pooled_merge_dot-inl.h in the translation units of targets with one.
template <typename DotPath>
void pooled_merge_dot(const PooledMergeDotArgs& a);
