// The body of the k-means assignment loop, included once per target (see
// kmeans_assign.h). Plain C++ shaped for the vectoriser: 4 points x 16
// centroids of partial dot products stay in registers across the d loop.
#include <cstdint>
#include <limits>

#include "clusters/kmeans_assign.h"

namespace tilesplash::detail {
namespace {

constexpr int kRows = 4;
constexpr int kCols = static_cast<int>(kAssignColumns);

inline void assign_nearest_body(const float* points, std::int64_t d, std::int64_t begin,
                                std::int64_t end, const float* panels, const float* norms,
                                std::int64_t k_padded, std::int32_t* labels) {
  for (std::int64_t i0 = begin; i0 < end; i0 += kRows) {
    const std::int64_t rows = end - i0 < kRows ? end - i0 : kRows;
    const float* row[kRows];
    for (int r = 0; r < kRows; ++r) row[r] = points + (i0 + (r < rows ? r : rows - 1)) * d;
    float best[kRows];
    std::int32_t arg[kRows];
    for (int r = 0; r < kRows; ++r) {
      best[r] = std::numeric_limits<float>::infinity();
      arg[r] = 0;
    }
    for (std::int64_t c0 = 0; c0 < k_padded; c0 += kCols) {
      float acc[kRows][kCols] = {};
      const float* panel = panels + c0 * d;
      for (std::int64_t t = 0; t < d; ++t) {
        const float* c = panel + t * kCols;
        for (int r = 0; r < kRows; ++r) {
          const float x = row[r][t];
          for (int j = 0; j < kCols; ++j) acc[r][j] += x * c[j];
        }
      }
      for (int r = 0; r < kRows; ++r) {
        for (int j = 0; j < kCols; ++j) {
          const float distance = norms[c0 + j] - 2.0f * acc[r][j];
          if (distance < best[r]) {
            best[r] = distance;
            arg[r] = static_cast<std::int32_t>(c0 + j);
          }
        }
      }
    }
    for (std::int64_t r = 0; r < rows; ++r) labels[i0 - begin + r] = arg[r];
  }
}

}  // namespace
}  // namespace tilesplash::detail
