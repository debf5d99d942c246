// What each SIMD target's translation unit exports: its attention forward, the
// register-resident multiply-add loops that measure its peak, and the k-means
// assignment loop. Dispatch (kernel/isa_dispatch.h) holds one of these per
// target of targets.def, so every SIMD loop of the library follows the same
// run-time choice.
#pragma once

#include <cstdint>

#include "kernel/forward_params.h"

namespace tilesplash::kernel {

struct FmaLoop {
  // Runs `rounds` rounds of independent multiply-adds and returns a value that
  // depends on every accumulator, so the work cannot be optimised away.
  float (*run)(std::int64_t rounds) = nullptr;
  double flops_per_round = 0.0;
};

// Centroids per panel of the k-means assignment loop.
inline constexpr std::int64_t kCentroidPanel = 16;

// labels[i - begin] = argmin_c (norms[c] - 2 points[i] . c) over c < k_padded,
// the lowest c on a tie, for points i in [begin, end) of `points` (rows of d
// floats). `panels` holds k_padded / kCentroidPanel panels (k_padded a
// multiple of kCentroidPanel), panel p at p * d * kCentroidPanel with element
// (t, j) = coordinate t of centroid kCentroidPanel * p + j; padding centroids
// carry norms of +inf, so they are never the nearest.
using NearestCentroidFn = void (*)(const float* points, std::int64_t d, std::int64_t begin,
                                   std::int64_t end, const float* panels, const float* norms,
                                   std::int64_t k_padded, std::int32_t* labels);

// The router's ladder walk (routing/ladder_scorer.cc, kernel/ladder_walk-inl.h):
// out[i] = scale * q . keys[index[i] * d ...] for i < n, and acc[c] = acc[c] *
// alpha + sum_i p[i] * values[index[i] * dv + c] for c < dv, keys in order.
using GatherDotFn = void (*)(const float* q, const float* keys, std::int64_t d,
                             const std::int32_t* index, std::int64_t n, float scale, float* out);
using GatherAxpyFn = void (*)(const float* p, const float* values, std::int64_t dv,
                              const std::int32_t* index, std::int64_t n, float alpha, float* acc);

// o_r[c] = o_r[c] * alpha[r] + sum_j w[r * w_stride + j] * values[index[j] *
// dv + c] for the `rows` rows at o (o_stride apart) and every c < dv, keys in
// order: several rows' weighted sums of the same value rows at once, on a
// register tile (the walk's dense reference rows, the compensation pass).
using RowsAxpyFn = void (*)(const float* w, std::int64_t w_stride, const float* values,
                            std::int64_t dv, const std::int32_t* index, std::int64_t n,
                            const float* alpha, std::int64_t rows, float* o, std::int64_t o_stride);

// dst[i * t.dim + c] = t[head][row0 + i][c] widened to f32, for i < rows.
using WidenRowsFn = void (*)(const TensorView& t, std::int64_t head, std::int64_t row0,
                             std::int64_t rows, float* dst);

// Rows SumRowsFn adds in f32 before each add into its double sums: widening
// every element to double held that loop to a third of the f32 rate (one
// conversion per half vector), and 8 keys cost the f32 part at most 3 bits.
inline constexpr std::int64_t kSumGroup = 8;

// sum[c] += t[head][rows[i]][c] for i < n and c < t.dim: the rows in
// groups of kSumGroup from the first, each group summed in f32 in order,
// then added in double; the pooled tiles' key and value sums.
using SumRowsFn = void (*)(const TensorView& t, std::int64_t head, const std::int64_t* rows,
                           std::int64_t n, double* sum);

// x[i] = exp(x[i] - top) for i < n, in place, and their sum (in a fixed
// order): the walk's softmax weights, on the kernel's vector exp2.
using ExpWeightsFn = float (*)(float* x, std::int64_t n, float top);

// scores[j * rows_padded + i] = scale * q_i . key_j for the rows_padded rows
// of qt (transposed: [d][rows_padded], rows_padded a multiple of 16) and the
// n keys at `keys` (rows of d floats): the ladder walk's scores of every
// sampled row against a block of keys at once, rows in the vector lanes.
using KeyScoresFn = void (*)(const float* qt, std::int64_t rows_padded, std::int64_t d,
                             const float* keys, std::int64_t n, float scale, float* scores);

// out[i * keys + j] = sum_c q[i][c] * k[j][c] over d channels (a multiple of
// 4, at most kMaxHeadDim), exactly, through the target's int8 packing and
// Q.K^T micro-kernel: what the tests check every target's int8 arithmetic by.
using Int8DotFn = void (*)(const std::int8_t* q, std::int64_t rows, const std::int8_t* k,
                           std::int64_t keys, std::int64_t d, std::int32_t* out);

// One q-block of the compensation pass (compensation/compensate.cc): its
// `rows` query rows (f32, d apart) against the n skipped pooled tiles. Keys
// come in panels of kCentroidPanel (panel p at p * d * kCentroidPanel, element
// (t, j) = coordinate t of key kCentroidPanel * p + j), n_padded keys in all
// with bias[j] = log of tile j's key count and -inf for padding; values are
// rows of dv floats, tile j's at index[j] * dv. Each row's (o, lse) is merged
// in place: o_r = (e^(lse - top) o_r + sum_j e^(s_j - top) v_j) / sum, lse =
// top + log(sum), s_j = scale * q . key_j + bias[j]. `scores` is scratch of
// kMaxMergeRows * n_padded floats.
inline constexpr std::int64_t kMaxMergeRows = 8;
struct PooledMergeArgs {
  const float* q = nullptr;
  std::int64_t rows = 0, d = 0;
  const float* key_panels = nullptr;
  const float* bias = nullptr;
  std::int64_t n = 0, n_padded = 0;
  const float* values = nullptr;
  const std::int32_t* index = nullptr;
  std::int64_t dv = 0;
  float scale = 1.0f;
  float* o = nullptr;
  std::int64_t o_stride = 0;
  float* lse = nullptr;
  std::int64_t lse_stride = 1;
  float* scores = nullptr;
};
using PooledMergeFn = void (*)(const PooledMergeArgs& args);

// The same merge on the bf16 dot product (TargetOps::pooled_merge_dot, where
// the kernel runs bf16 inputs through it): both products through the
// kernel's own bf16 micro-kernels, the mean keys and values rounded to bf16
// and the weights too, as the kernel rounds its probabilities. Layouts are
// the kernel's (kernel/bf16_dot_path-inl.h): q rows of d / 2 pairs of adjacent
// channels, q_stride pairs apart; n_padded (a multiple of kDotMergePanel)
// keys in panels of kDotMergePanel, panel p at p * (d / 2) * kDotMergePanel
// with pair (c, j) = channels 2c, 2c + 1 of key kDotMergePanel * p + j;
// values as [n_padded / 2][dvp] pairs of adjacent keys, dvp = dv rounded up to
// kDotMergePanel, zero past dv and n. Scratch: `scores` kMaxMergeRows *
// n_padded floats, `probs` kMaxMergeRows * n_padded / 2 pairs, `acc`
// kMaxMergeRows * dvp floats.
inline constexpr std::int64_t kDotMergePanel = 64;
struct PooledMergeDotArgs {
  const std::uint32_t* q = nullptr;
  std::int64_t q_stride = 0, rows = 0, d = 0;
  const std::uint32_t* key_panels = nullptr;
  const float* bias = nullptr;
  std::int64_t n = 0, n_padded = 0;
  const std::uint32_t* value_pairs = nullptr;
  std::int64_t dv = 0, dvp = 0;
  float scale = 1.0f;
  float* o = nullptr;
  std::int64_t o_stride = 0;
  float* lse = nullptr;
  std::int64_t lse_stride = 1;
  float* scores = nullptr;
  std::uint32_t* probs = nullptr;
  float* acc = nullptr;
};
using PooledMergeDotFn = void (*)(const PooledMergeDotArgs& args);

// The ladder walk's loops on the bf16 dot product (vdpbf16ps), for bf16
// inputs where the kernel's product path is the dot product: the scores from
// K in place, and the weighted sums of V with the weights rounded to bf16 as
// the kernel rounds its probabilities. Blocks are kWalkDotBlock keys; values
// are a block's key pairs, [kWalkDotBlock / 2][dvp] (pair (i, c) = channel c
// of keys 2i, 2i + 1), dvp = dv rounded up to kDotMergePanel, zero past dv.
inline constexpr std::int64_t kWalkDotBlock = 64;
struct WalkDotOps {
  // scores[j * rows_padded + i] = scale * q_i . key_j, as KeyScoresFn: qt holds
  // pairs of bf16 (channels 2c, 2c + 1 of row i at c * rows_padded + i, d / 2
  // pairs), key j's d channels start at keys + j * key_stride. bf16 products
  // are exact in f32, so these are the widened scores up to the order of the
  // sums (pairs, in order).
  void (*key_scores)(const std::uint32_t* qt, std::int64_t rows_padded, std::int64_t d,
                     const std::uint16_t* keys, std::int64_t key_stride, std::int64_t n,
                     float scale, float* scores) = nullptr;
  // The block of t (bf16) from key0 as key pairs into `pairs`, keys at or past
  // `end` as zeros; false if one of the block's elements is NaN or Inf (the
  // zero weight of a pair's other key would make it NaN: the walk then takes
  // the f32 loops for the block).
  bool (*pack_values)(const TensorView& t, std::int64_t head, std::int64_t key0, std::int64_t end,
                      std::int64_t dvp, std::uint32_t* pairs) = nullptr;
  // RowsAxpyFn on the packed block: o_r[c] = o_r[c] * alpha[r] + sum_j
  // bf16(w[r * w_stride + j]) * values(j, c) for j < kWalkDotBlock (w zero past
  // the block's keys) and c < dvp (o's rows dvp apart or more). `probs`:
  // rows * kWalkDotBlock / 2 pairs, left holding row r's rounded weights
  // from r * kWalkDotBlock / 2 (as masked_axpy takes them).
  void (*rows_axpy)(const float* w, std::int64_t w_stride, const std::uint32_t* values,
                    std::int64_t dvp, const float* alpha, std::int64_t rows, float* o,
                    std::int64_t o_stride, std::uint32_t* probs) = nullptr;
  // GatherAxpyFn on the packed block: acc[c] = acc[c] * alpha + sum_i
  // bf16(p[i]) * values(index[i], c) for c < dvp, the keys' pairs in order.
  void (*gather_axpy)(const float* p, const std::int32_t* index, std::int64_t n,
                      const std::uint32_t* values, std::int64_t dvp, float alpha,
                      float* acc) = nullptr;
  // The same over the keys whose bit is set in `keys` (bit j: key j of the
  // block), their weights already rounded (probs: one row of rows_axpy's,
  // kWalkDotBlock / 2 pairs): acc[c] = acc[c] * alpha + sum_j probs(j) *
  // values(j, c). Returns the sum of w[j] (f32, kWalkDotBlock of them) over
  // the same keys: a ring's share of its row's weights (routing/ladder_scorer.cc).
  float (*masked_axpy)(const float* w, const std::uint32_t* probs, std::uint64_t keys,
                       const std::uint32_t* values, std::int64_t dvp, float alpha,
                       float* acc) = nullptr;
};

struct TargetOps {
  ForwardFn forward = nullptr;
  FmaLoop f32_peak;
  // The bf16 dot product's rate; run == nullptr on targets without one, where
  // bf16 is always widened to f32 (the f32 loop is then the bf16 peak too).
  // Where it exists, choose_product_path() (attention.h) compares the two.
  FmaLoop bf16_peak;
  // int8 multiply-adds (vpdpbusd where the target has VNNI), 2 ops each.
  FmaLoop int8_peak;
  // The assignment step of k-means (clusters/kmeans.cc).
  NearestCentroidFn nearest_centroid = nullptr;
  // The router's ladder walk (routing/ladder_scorer.cc).
  GatherDotFn gather_dot = nullptr;
  GatherAxpyFn gather_axpy = nullptr;
  KeyScoresFn key_scores = nullptr;
  ExpWeightsFn exp_weights = nullptr;
  WidenRowsFn widen_rows = nullptr;
  RowsAxpyFn rows_axpy = nullptr;
  // The pooled tiles' sums (compensation/pooled_tiles.cc).
  SumRowsFn sum_rows = nullptr;
  // The compensation pass's block merge (compensation/compensate.cc).
  PooledMergeFn pooled_merge = nullptr;
  // Its bf16 dot-product twin: null on targets without a bf16 dot product.
  PooledMergeDotFn pooled_merge_dot = nullptr;
  // The walk's dot-product loops: null members on targets without one.
  WalkDotOps walk_dot;
  Int8DotFn int8_dot = nullptr;
  const char* int8_dot_name = "";  // the instructions of the int8 products, for reports
  const char* bf16_dot_name = "";  // those of the bf16 dot product, where bf16_peak.run is set
};

}  // namespace tilesplash::kernel
