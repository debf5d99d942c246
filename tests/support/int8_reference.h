// The int8 path (Precision::kInt8) written out again in plain scalar code from
// its specification (src/kernel/int8_quantize.h), sharing nothing with the
// library: K smoothed by its mean over the keys, Q by its mean over the rows
// (the bias mu_q . (k - mu_k) added to each key's scores), range migrated per
// channel by a power of two, Q and K quantized per row (scale amax / 127),
// round to nearest even, [-127, 127]. The kernel must reproduce these
// int8 values and scales exactly; the attention over the dequantized scores,
// computed here in double, is what its output must match within f32
// rounding (on data where no tile falls back to f32).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "support/reference.h"
#include "tilesplash/mask.h"
#include "tilesplash/tensor.h"

namespace tilesplash::test {

inline constexpr std::int64_t kInt8KeyBlock = 64;  // rows per block of the means' sums

// One value of the recipe: round(x * inverse) to nearest even, clamped to
// [-127, 127], NaN as 0.
std::int8_t quantize_value(float x, float inverse);

struct QuantizedHead {
  std::int64_t d = 0;
  std::vector<float> mean;       // K's mean over the keys, per channel
  std::vector<float> mean_q;     // Q's mean over the rows, per channel
  std::vector<float> mul;        // K's migration per channel (Q's is 1 / mul)
  std::vector<float> bias;       // per key: mu_q . (k - mu_k), rounded to float
  std::vector<std::int8_t> q8;   // q_len x d
  std::vector<float> q_scale;    // per query row
  std::vector<std::int8_t> k8;   // kv_len x d, of the smoothed K
  std::vector<float> k_scale;    // per key
  std::vector<double> q_offset;  // per query row: q . mean, K's smoothing's shift

  // Q.K^T of query i and key j in int32, exactly.
  std::int32_t dot(std::int64_t i, std::int64_t j) const;
  // The score the int8 path attends with (before the softmax scale).
  double score(std::int64_t i, std::int64_t j) const;
};

QuantizedHead quantize_head(const TensorView& q, const TensorView& k, std::int64_t head);

// Attention over the quantized scores (double), LSE shifted back by the
// smoothing (scale * q . mean), so it is the LSE of the original scores up to
// the quantization error.
ReferenceHead int8_reference_attention(const Mask& mask, const TensorView& q, const TensorView& k,
                                       const TensorView& v, std::int64_t head,
                                       std::optional<double> scale = std::nullopt);

}  // namespace tilesplash::test
