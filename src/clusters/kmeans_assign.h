// The inner loop of k-means: the nearest centroid of every point, as a
// register-blocked product of a few points against 16 centroids at a time
// (the centroids packed in panels of 16, d x 16 floats each and contiguous,
// so one load feeds several FMAs and a panel stays in L1).
// Compiled once per SIMD target; dispatch happens once per call, at the top.
#pragma once

#include <cstdint>

namespace tilesplash::detail {

// labels[i - begin] = argmin_c (norms[c] - 2 points[i] . c) over c < k, the
// lowest c on a tie, for points i in [begin, end) of `points` (rows of d
// floats). `panels` holds k_padded / 16 panels (k_padded a multiple of 16),
// panel p at p * d * 16 with element (t, j) = coordinate t of centroid
// 16 p + j; the padding centroids carry norms of +inf.
using AssignFn = void (*)(const float* points, std::int64_t d, std::int64_t begin, std::int64_t end,
                          const float* panels, const float* norms, std::int64_t k_padded,
                          std::int32_t* labels);

void assign_nearest_generic(const float* points, std::int64_t d, std::int64_t begin,
                            std::int64_t end, const float* panels, const float* norms,
                            std::int64_t k_padded, std::int32_t* labels);
void assign_nearest_avx2(const float* points, std::int64_t d, std::int64_t begin, std::int64_t end,
                         const float* panels, const float* norms, std::int64_t k_padded,
                         std::int32_t* labels);

// The target the attention kernel uses (TILESPLASH_ISA / set_isa included):
// the AVX2 loop on every x86 target that has it, else the portable one.
AssignFn active_assign();

constexpr std::int64_t kAssignColumns = 16;

}  // namespace tilesplash::detail
