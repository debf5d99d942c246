#include "kernel/int8_quantize.h"

#include <algorithm>
#include <cmath>

namespace tilesplash::kernel::int8 {

void add_row(const float* row, std::int64_t d, double* sums) {
  for (std::int64_t c = 0; c < d; ++c) sums[c] += static_cast<double>(row[c]);
}

void finish_mean(const double* block_sums, std::int64_t blocks, std::int64_t d, std::int64_t len,
                 float* mean) {
  for (std::int64_t c = 0; c < d; ++c) {
    double total = 0.0;
    for (std::int64_t b = 0; b < blocks; ++b) total += block_sums[b * d + c];
    mean[c] = static_cast<float>(total / static_cast<double>(len));
  }
}

float centred_amax(const float* x, const float* mean, std::int64_t d) {
  float amax = 0.0f;
  for (std::int64_t c = 0; c < d; ++c) {
    const float v = std::fabs(mean != nullptr ? x[c] - mean[c] : x[c]);
    if (!(v <= amax)) amax = v;  // NaN wins and stays
  }
  return amax;
}

Scale scale_for(float amax) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return {};
  return {amax / kLevels, kLevels / amax};
}

void quantize(const float* x, const float* mean, std::int64_t d, float inverse, std::int8_t* out) {
  for (std::int64_t c = 0; c < d; ++c) {
    const float centred = mean != nullptr ? x[c] - mean[c] : x[c];
    // (NaN only with check_finite off: the caller vouched for the data.)
    const float scaled = std::isnan(centred * inverse) ? 0.0f : centred * inverse;
    // Round to nearest, ties to even, as nearbyint does in the default mode:
    // adding and subtracting 1.5 * 2^23 leaves no fraction bits for |x| < 2^22
    // (a libm call per element would cost more than the rest of the pass).
    constexpr float kRound = 12582912.0f;
    const float bounded = std::clamp(scaled, -2.0f * kLevels, 2.0f * kLevels);
    const float level = std::clamp((bounded + kRound) - kRound, -kLevels, kLevels);
    out[c] = static_cast<std::int8_t>(level);
  }
}

double dot_with_mean(const float* x, const float* mean, std::int64_t d) {
  double sum = 0.0;
  for (std::int64_t c = 0; c < d; ++c) sum += static_cast<double>(x[c]) * mean[c];
  return sum;
}

}  // namespace tilesplash::kernel::int8
