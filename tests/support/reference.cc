#include "support/reference.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace tilesplash::test {
namespace {

// A head's rows converted once, so the pair loop below stays a plain dot product.
std::vector<double> load_head(const TensorView& t, std::int64_t head) {
  std::vector<double> rows(static_cast<std::size_t>(t.len * t.dim));
  for (std::int64_t r = 0; r < t.len; ++r) {
    for (std::int64_t c = 0; c < t.dim; ++c) {
      rows[static_cast<std::size_t>(r * t.dim + c)] = load_element(t, head, r, c);
    }
  }
  return rows;
}

}  // namespace

double load_element(const TensorView& t, std::int64_t head, std::int64_t row, std::int64_t col) {
  const std::int64_t index = head * t.head_stride + row * t.row_stride + col;
  const auto* bytes = static_cast<const unsigned char*>(t.data) + index * size_of(t.dtype);
  switch (t.dtype) {
    case DType::kF32: {
      float value;
      std::memcpy(&value, bytes, sizeof value);
      return value;
    }
    case DType::kBF16: {
      std::uint16_t bits;
      std::memcpy(&bits, bytes, sizeof bits);
      return bf16_to_float(bits);
    }
    case DType::kF16: {
      std::uint16_t bits;
      std::memcpy(&bits, bytes, sizeof bits);
      return f16_to_float(bits);
    }
  }
  return std::numeric_limits<double>::quiet_NaN();
}

ReferenceHead reference_attention(const Mask& mask, const TensorView& q, const TensorView& k,
                                  const TensorView& v, std::int64_t head,
                                  std::optional<double> scale) {
  const std::int64_t d = q.dim;
  const std::int64_t dv = v.dim;
  const double s = scale.value_or(1.0 / std::sqrt(static_cast<double>(d)));
  const std::vector<double> keys = load_head(k, head);
  const std::vector<double> values = load_head(v, head);

  ReferenceHead result;
  result.out.assign(static_cast<std::size_t>(q.len * dv), 0.0);
  result.lse.assign(static_cast<std::size_t>(q.len), -std::numeric_limits<double>::infinity());

  std::vector<double> query(static_cast<std::size_t>(d));
  std::vector<double> scores(static_cast<std::size_t>(k.len));
  std::vector<std::int64_t> kept;
  for (std::int64_t i = 0; i < q.len; ++i) {
    for (std::int64_t c = 0; c < d; ++c)
      query[static_cast<std::size_t>(c)] = load_element(q, head, i, c);

    kept.clear();
    double max_score = -std::numeric_limits<double>::infinity();
    for (std::int64_t j = 0; j < k.len; ++j) {
      if (!mask.keeps(i, j)) continue;
      double dot = 0.0;
      for (std::int64_t c = 0; c < d; ++c) {
        dot += query[static_cast<std::size_t>(c)] * keys[static_cast<std::size_t>(j * d + c)];
      }
      scores[static_cast<std::size_t>(j)] = s * dot;
      max_score = std::max(max_score, s * dot);
      kept.push_back(j);
    }
    if (kept.empty()) continue;  // output stays 0, LSE -inf

    double* out_row = result.out.data() + i * dv;
    double sum = 0.0;
    for (std::int64_t j : kept) {
      const double p = std::exp(scores[static_cast<std::size_t>(j)] - max_score);
      sum += p;
      for (std::int64_t c = 0; c < dv; ++c)
        out_row[c] += p * values[static_cast<std::size_t>(j * dv + c)];
    }
    for (std::int64_t c = 0; c < dv; ++c) out_row[c] /= sum;
    result.lse[static_cast<std::size_t>(i)] = max_score + std::log(sum);
  }
  return result;
}

}  // namespace tilesplash::test
