#include "kernel/int8_quantize.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tilesplash::kernel::int8 {
namespace {

float centred(const float* x, const float* mean, const float* mul, std::int64_t c) {
  const float v = mean != nullptr ? x[c] - mean[c] : x[c];
  return mul != nullptr ? v * mul[c] : v;  // mul is a power of two: exact
}

}  // namespace

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

void add_row_range(const float* row, std::int64_t d, double* sums, float* lo, float* hi) {
  // Selects, not conditional stores, so that the compiler vectorizes the
  // channels (each independent: the same bits as one channel at a time).
  for (std::int64_t c = 0; c < d; ++c) {
    const float x = row[c], l = lo[c], h = hi[c];
    sums[c] += static_cast<double>(x);
    lo[c] = !(x >= l) && l == l ? x : l;  // NaN wins and stays
    hi[c] = !(x <= h) && h == h ? x : h;
  }
}

void finish_amax(const float* block_lo, const float* block_hi, std::int64_t blocks,
                 const float* mean, std::int64_t d, float* amax) {
  for (std::int64_t c = 0; c < d; ++c) {
    float a = 0.0f;
    for (std::int64_t b = 0; b < blocks; ++b) {
      const float lo = block_lo[b * d + c], hi = block_hi[b * d + c];
      if (!(lo <= hi)) {  // an empty block (no rows), or a NaN
        if (std::isnan(lo) || std::isnan(hi)) a = NAN;
        continue;
      }
      const float v = std::max(hi - mean[c], mean[c] - lo);
      if (!(v <= a) && !std::isnan(a)) a = v;
    }
    amax[c] = a;
  }
}

float migration(float q_amax, float k_amax) {
  if (!(q_amax > 0.0f) || !(k_amax > 0.0f) || !std::isfinite(q_amax) || !std::isfinite(k_amax)) {
    return 1.0f;
  }
  const double half_log = 0.5 * std::log2(static_cast<double>(q_amax) / k_amax);
  const int e = static_cast<int>(
      std::clamp(std::nearbyint(half_log), double{-kMaxMigration}, double{kMaxMigration}));
  return std::ldexp(1.0f, e);
}

float centred_amax(const float* x, const float* mean, const float* mul, std::int64_t d) {
  // kLanes running maxima, one per channel modulo kLanes, then one across
  // them: the maximum of non-negative floats is exact in any order, so this
  // is the same value as one running maximum, and the lanes vectorize. A NaN
  // anywhere makes the result NaN, as before.
  constexpr int kLanes = 16;
  float lanes[kLanes] = {};
  bool nan = false;
  std::int64_t c = 0;
  for (; c + kLanes <= d; c += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const float v = std::fabs(centred(x, mean, mul, c + l));
      nan |= v != v;
      lanes[l] = v > lanes[l] ? v : lanes[l];
    }
  }
  for (; c < d; ++c) {
    const float v = std::fabs(centred(x, mean, mul, c));
    nan |= v != v;
    lanes[0] = v > lanes[0] ? v : lanes[0];
  }
  float amax = 0.0f;
  for (const float v : lanes) amax = v > amax ? v : amax;
  return nan ? std::numeric_limits<float>::quiet_NaN() : amax;
}

Scale scale_for(float amax) {
  if (!(amax > 0.0f) || !std::isfinite(amax)) return {};
  return {amax / kLevels, kLevels / amax};
}

void quantize(const float* x, const float* mean, const float* mul, std::int64_t d, float inverse,
              std::int8_t* out) {
  for (std::int64_t c = 0; c < d; ++c) {
    const float v = centred(x, mean, mul, c);
    // (NaN only with check_finite off: the caller vouched for the data.)
    const float scaled = std::isnan(v * inverse) ? 0.0f : v * inverse;
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

double centred_dot(const float* x, const float* centre, const float* w, std::int64_t d) {
  double sum = 0.0;
  for (std::int64_t c = 0; c < d; ++c) {
    sum += static_cast<double>(x[c] - centre[c]) * static_cast<double>(w[c]);
  }
  return sum;
}

}  // namespace tilesplash::kernel::int8
