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

namespace {

// The mean: per block of rows a double sum in row order, the blocks' sums
// added in block order, divided by the row count, rounded to float.
std::vector<float> mean_of(const TensorView& t, std::int64_t head) {
  const std::int64_t d = t.dim;
  std::vector<double> total(static_cast<std::size_t>(d), 0.0);
  for (std::int64_t r0 = 0; r0 < t.len; r0 += kInt8KeyBlock) {
    std::vector<double> block(static_cast<std::size_t>(d), 0.0);
    for (std::int64_t r = r0; r < std::min(t.len, r0 + kInt8KeyBlock); ++r) {
      for (std::int64_t c = 0; c < d; ++c) block[c] += element(t, head, r, c);
    }
    for (std::int64_t c = 0; c < d; ++c) total[c] += block[c];
  }
  std::vector<float> mean(static_cast<std::size_t>(d));
  for (std::int64_t c = 0; c < d; ++c) {
    mean[c] = static_cast<float>(total[c] / static_cast<double>(t.len));
  }
  return mean;
}

float channel_amax(const TensorView& t, std::int64_t head, std::int64_t c, float mean) {
  float amax = 0.0f;
  for (std::int64_t r = 0; r < t.len; ++r) {
    amax = std::max(amax, std::fabs(element(t, head, r, c) - mean));
  }
  return amax;
}

// m = 2^round(log2(a / b) / 2), exponent within +-24; 1 when a or b is 0.
float migration_of(float a, float b) {
  if (!(a > 0.0f) || !(b > 0.0f) || !std::isfinite(a) || !std::isfinite(b)) return 1.0f;
  const double e = std::nearbyint(0.5 * std::log2(static_cast<double>(a) / b));
  return std::ldexp(1.0f, static_cast<int>(std::clamp(e, -24.0, 24.0)));
}

}  // namespace

QuantizedHead quantize_head(const TensorView& q, const TensorView& k, std::int64_t head) {
  const std::int64_t d = q.dim;
  QuantizedHead h;
  h.d = d;
  h.mean = mean_of(k, head);
  h.mean_q = mean_of(q, head);
  for (std::int64_t c = 0; c < d; ++c) {
    h.mul.push_back(
        migration_of(channel_amax(q, head, c, h.mean_q[c]), channel_amax(k, head, c, h.mean[c])));
  }
  const auto k_value = [&](std::int64_t key, std::int64_t c) {
    return (element(k, head, key, c) - h.mean[c]) * h.mul[c];
  };
  const auto q_value = [&](std::int64_t i, std::int64_t c) {
    return (element(q, head, i, c) - h.mean_q[c]) * (1.0f / h.mul[c]);
  };

  h.k8.resize(static_cast<std::size_t>(k.len * d));
  for (std::int64_t key = 0; key < k.len; ++key) {
    float amax = 0.0f;
    for (std::int64_t c = 0; c < d; ++c) amax = std::max(amax, std::fabs(k_value(key, c)));
    const Scale s = scale_of(amax);
    h.k_scale.push_back(s.scale);
    double bias = 0.0;
    for (std::int64_t c = 0; c < d; ++c) {
      h.k8[key * d + c] = quantize_value(k_value(key, c), s.inverse);
      bias += static_cast<double>(element(k, head, key, c) - h.mean[c]) * h.mean_q[c];
    }
    h.bias.push_back(static_cast<float>(bias));
  }

  h.q8.resize(static_cast<std::size_t>(q.len * d));
  for (std::int64_t i = 0; i < q.len; ++i) {
    float amax = 0.0f;
    double offset = 0.0;
    for (std::int64_t c = 0; c < d; ++c) {
      amax = std::max(amax, std::fabs(q_value(i, c)));
      offset += static_cast<double>(element(q, head, i, c)) * h.mean[c];
    }
    const Scale s = scale_of(amax);
    h.q_scale.push_back(s.scale);
    h.q_offset.push_back(offset);
    for (std::int64_t c = 0; c < d; ++c) h.q8[i * d + c] = quantize_value(q_value(i, c), s.inverse);
  }
  return h;
}

std::int32_t QuantizedHead::dot(std::int64_t i, std::int64_t j) const {
  std::int32_t sum = 0;
  for (std::int64_t c = 0; c < d; ++c) sum += q8[i * d + c] * k8[j * d + c];
  return sum;
}

double QuantizedHead::score(std::int64_t i, std::int64_t j) const {
  return static_cast<double>(dot(i, j)) * q_scale[i] * k_scale[j] + bias[j];
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
