// The k-means assignment loop for AVX2 + FMA (flags from the central target
// list, cmake/TilesplashIsa.cmake): 6 points x 16 centroids of dot products
// in 12 ymm accumulators, one broadcast per point and two loads per step of
// d, so the loop is bound by its FMAs. A tail of fewer than 6 points falls
// back to the portable body compiled here. The result equals the portable
// loop's up to the rounding of the dot products.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "clusters/kmeans_assign-inl.h"

namespace tilesplash::detail {
namespace {

constexpr int kBlockRows = 6;

}  // namespace

void assign_nearest_avx2(const float* points, std::int64_t d, std::int64_t begin, std::int64_t end,
                         const float* panels, const float* norms, std::int64_t k_padded,
                         std::int32_t* labels) {
  // Centroid panels outermost: one panel (16 x d floats) stays in L1 while
  // every point of the chunk passes it.
  const std::int64_t n = end - begin;
  std::vector<float> best(static_cast<std::size_t>(n), std::numeric_limits<float>::infinity());
  std::fill(labels, labels + n, 0);
  const std::int64_t full = n / kBlockRows * kBlockRows;
  const __m256 two = _mm256_set1_ps(2.0f);
  for (std::int64_t c0 = 0; c0 < k_padded; c0 += kAssignColumns) {
    const __m256 n_lo = _mm256_loadu_ps(norms + c0);
    const __m256 n_hi = _mm256_loadu_ps(norms + c0 + 8);
    for (std::int64_t i0 = 0; i0 < full; i0 += kBlockRows) {
      const float* x = points + (begin + i0) * d;
      // Twelve named accumulators: an array of them would be kept in memory.
      __m256 a0 = _mm256_setzero_ps(), b0 = a0, a1 = a0, b1 = a0, a2 = a0, b2 = a0;
      __m256 a3 = a0, b3 = a0, a4 = a0, b4 = a0, a5 = a0, b5 = a0;
      const float* c = panels + c0 * d;
      for (std::int64_t t = 0; t < d; ++t, c += kAssignColumns) {
        const __m256 lo = _mm256_loadu_ps(c);
        const __m256 hi = _mm256_loadu_ps(c + 8);
        __m256 xr = _mm256_broadcast_ss(x + t);
        a0 = _mm256_fmadd_ps(xr, lo, a0);
        b0 = _mm256_fmadd_ps(xr, hi, b0);
        xr = _mm256_broadcast_ss(x + d + t);
        a1 = _mm256_fmadd_ps(xr, lo, a1);
        b1 = _mm256_fmadd_ps(xr, hi, b1);
        xr = _mm256_broadcast_ss(x + 2 * d + t);
        a2 = _mm256_fmadd_ps(xr, lo, a2);
        b2 = _mm256_fmadd_ps(xr, hi, b2);
        xr = _mm256_broadcast_ss(x + 3 * d + t);
        a3 = _mm256_fmadd_ps(xr, lo, a3);
        b3 = _mm256_fmadd_ps(xr, hi, b3);
        xr = _mm256_broadcast_ss(x + 4 * d + t);
        a4 = _mm256_fmadd_ps(xr, lo, a4);
        b4 = _mm256_fmadd_ps(xr, hi, b4);
        xr = _mm256_broadcast_ss(x + 5 * d + t);
        a5 = _mm256_fmadd_ps(xr, lo, a5);
        b5 = _mm256_fmadd_ps(xr, hi, b5);
      }
      const __m256 acc[kBlockRows][2] = {{a0, b0}, {a1, b1}, {a2, b2},
                                         {a3, b3}, {a4, b4}, {a5, b5}};
      for (int r = 0; r < kBlockRows; ++r) {
        alignas(32) float distance[kAssignColumns];
        _mm256_store_ps(distance, _mm256_fnmadd_ps(two, acc[r][0], n_lo));
        _mm256_store_ps(distance + 8, _mm256_fnmadd_ps(two, acc[r][1], n_hi));
        float& b = best[static_cast<std::size_t>(i0 + r)];
        for (int j = 0; j < kAssignColumns; ++j) {
          if (distance[j] < b) {
            b = distance[j];
            labels[i0 + r] = static_cast<std::int32_t>(c0 + j);
          }
        }
      }
    }
  }
  if (full < n) {
    assign_nearest_body(points, d, begin + full, end, panels, norms, k_padded, labels + full);
  }
}

}  // namespace tilesplash::detail
