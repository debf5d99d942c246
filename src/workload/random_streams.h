// Counter-based random numbers for the synthetic workload: every value is a
// hash of (key, index, position), so data can be generated in any order and
// on any number of threads with the same result.
#pragma once

#include <cmath>
#include <cstdint>

#include "masks/mask_util.h"

namespace tilesplash::detail {

// Standard normals from a counter: Box-Muller on two hashed uniforms.
class Gaussian {
 public:
  explicit Gaussian(std::uint64_t key) : key_(key) {}
  // Fills out[0, n) with N(0, 1) * factor.
  void fill(std::uint64_t index, float* out, std::int64_t n, double factor) const {
    constexpr double kTwoPi = 6.283185307179586;
    for (std::int64_t i = 0; i < n; i += 2) {
      const std::uint64_t x = mix64(key_ ^ (index * 0x9e3779b97f4a7c15ULL + i));
      const std::uint64_t y = mix64(x ^ 0x5851f42d4c957f2dULL);
      const double u1 = static_cast<double>((x >> 11) + 1) * 0x1.0p-53;  // (0, 1]
      const double u2 = static_cast<double>(y >> 11) * 0x1.0p-53;
      const double r = std::sqrt(-2.0 * std::log(u1)) * factor;
      out[i] = static_cast<float>(r * std::cos(kTwoPi * u2));
      if (i + 1 < n) out[i + 1] = static_cast<float>(r * std::sin(kTwoPi * u2));
    }
  }

 private:
  std::uint64_t key_;
};

// Uniform 64-bit words from a counter.
inline std::uint64_t hashed_word(std::uint64_t key, std::uint64_t index) {
  return mix64(key ^ mix64(index * 0x9e3779b97f4a7c15ULL + 0x2545f4914f6cdd1dULL));
}

}  // namespace tilesplash::detail
