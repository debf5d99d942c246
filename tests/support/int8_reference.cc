#include "support/int8_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tilesplash::test {
namespace {

struct Scale {
  float scale = 0.0f;
  float inverse = 0.0f;
};

Scale scale_of(float amax) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return {};
  return {amax / 127.0f, 127.0f / amax};
}

float element(const TensorView& t, std::int64_t head, std::int64_t row, std::int64_t col) {
  return static_cast<float>(load_element(t, head, row, col));  // exact: every input is a float
}

}  // namespace

std::int8_t quantize_value(float x, float inverse) {
  const float scaled = x * inverse;
  if (std::isnan(scaled)) return 0;
  return static_cast<std::int8_t>(std::clamp(std::nearbyint(scaled), -127.0f, 127.0f));
}

QuantizedHead quantize_head(const TensorView& q, const TensorView& k, std::int64_t head) {
  const std::int64_t d = q.dim;
  QuantizedHead h;
  h.d = d;
  // The mean: per block of keys a double sum in key order, the blocks' sums
  // added in block order, divided by the key count, rounded to float.
  std::vector<double> total(static_cast<std::size_t>(d), 0.0);
  for (std::int64_t key0 = 0; key0 < k.len; key0 += kInt8KeyBlock) {
    std::vector<double> block(static_cast<std::size_t>(d), 0.0);
    for (std::int64_t key = key0; key < std::min(k.len, key0 + kInt8KeyBlock); ++key) {
      for (std::int64_t c = 0; c < d; ++c) block[c] += element(k, head, key, c);
    }
    for (std::int64_t c = 0; c < d; ++c) total[c] += block[c];
  }
  h.mean.resize(static_cast<std::size_t>(d));
  for (std::int64_t c = 0; c < d; ++c) {
    h.mean[c] = static_cast<float>(total[c] / static_cast<double>(k.len));
  }

  h.k8.resize(static_cast<std::size_t>(k.len * d));
  for (std::int64_t key0 = 0; key0 < k.len; key0 += kInt8KeyBlock) {
    const std::int64_t key1 = std::min(k.len, key0 + kInt8KeyBlock);
    float amax = 0.0f;
    for (std::int64_t key = key0; key < key1; ++key) {
      for (std::int64_t c = 0; c < d; ++c) {
        amax = std::max(amax, std::fabs(element(k, head, key, c) - h.mean[c]));
      }
    }
    const Scale s = scale_of(amax);
    h.k_scale.push_back(s.scale);
    for (std::int64_t key = key0; key < key1; ++key) {
      for (std::int64_t c = 0; c < d; ++c) {
        h.k8[key * d + c] = quantize_value(element(k, head, key, c) - h.mean[c], s.inverse);
      }
    }
  }

  h.q8.resize(static_cast<std::size_t>(q.len * d));
  for (std::int64_t i = 0; i < q.len; ++i) {
    float amax = 0.0f;
    double offset = 0.0;
    for (std::int64_t c = 0; c < d; ++c) {
      amax = std::max(amax, std::fabs(element(q, head, i, c)));
      offset += static_cast<double>(element(q, head, i, c)) * h.mean[c];
    }
    const Scale s = scale_of(amax);
    h.q_scale.push_back(s.scale);
    h.q_offset.push_back(offset);
    for (std::int64_t c = 0; c < d; ++c) {
      h.q8[i * d + c] = quantize_value(element(q, head, i, c), s.inverse);
    }
  }
  return h;
}

std::int32_t QuantizedHead::dot(std::int64_t i, std::int64_t j) const {
  std::int32_t sum = 0;
  for (std::int64_t c = 0; c < d; ++c) sum += q8[i * d + c] * k8[j * d + c];
  return sum;
}

double QuantizedHead::score(std::int64_t i, std::int64_t j) const {
  return static_cast<double>(dot(i, j)) * q_scale[i] * k_scale[j / kInt8KeyBlock];
}

ReferenceHead int8_reference_attention(const Mask& mask, const TensorView& q, const TensorView& k,
                                       const TensorView& v, std::int64_t head,
                                       std::optional<double> scale) {
  const std::int64_t dv = v.dim;
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(q.dim)));
  const QuantizedHead h = quantize_head(q, k, head);
  ReferenceHead result;
  result.out.assign(static_cast<std::size_t>(q.len * dv), 0.0);
  result.lse.assign(static_cast<std::size_t>(q.len), -std::numeric_limits<double>::infinity());
  std::vector<double> scores(static_cast<std::size_t>(k.len));
  std::vector<std::int64_t> kept;
  for (std::int64_t i = 0; i < q.len; ++i) {
    kept.clear();
    double max_score = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < k.len; ++j) {
      if (!mask.keeps(i, j)) continue;
      scores[j] = s * h.score(i, j);
      max_score = std::max(max_score, scores[j]);
      kept.push_back(j);
    }
    if (kept.empty()) continue;
    double* out_row = result.out.data() + i * dv;
    double sum = 0.0;
    for (const std::int64_t j : kept) {
      const double p = std::exp(scores[j] - max_score);
      sum += p;
      for (std::int64_t c = 0; c < dv; ++c) out_row[c] += p * load_element(v, head, j, c);
    }
    for (std::int64_t c = 0; c < dv; ++c) out_row[c] /= sum;
    result.lse[i] = max_score + std::log(sum) + s * h.q_offset[i];
  }
  return result;
}

}  // namespace tilesplash::test
