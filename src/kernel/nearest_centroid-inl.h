// The inner loop of k-means, the nearest centroid of every point (the
// contract is NearestCentroidFn in kernel/target_ops.h). Included by
// kernel-inl.h inside a target's namespace, so each target of targets.def
// compiles it with its own flags and sizes it from its traits.
//
// A register tile of kPointRows points against one panel of kCentroidPanel
// centroids: per coordinate, kCentroidVecs loads of the panel and one
// broadcast per point feed kPointRows * kCentroidVecs FMAs. Panels are the
// outer loop, so one panel (kCentroidPanel * d floats, 8 KiB at d = 128) stays
// in L1 while a block of points passes it. Tiles: avx2 6 x 16 (12 of 16 ymm
// accumulate), avx512 8 x 16 (8 zmm chains), 128-bit targets 6 x 16 with 32
// registers (24 accumulators), 2 x 16 with 16.

constexpr int kCentroidVecs = static_cast<int>(kCentroidPanel) / kLanes;
// kCentroidVecs loaded vectors and one broadcast beside the accumulators;
// more than 8 chains only lengthen the tail.
constexpr int kPointRows = std::min(8, (Traits::kRegisters - kCentroidVecs - 1) / kCentroidVecs);
static_assert(kCentroidPanel % kLanes == 0, "a centroid panel must be whole vectors");
static_assert(kPointRows >= 1, "the centroid tile must fit the register file");

// acc[r][j] = the dot products of the R rows at x (d apart) with the panel's
// kCentroidPanel columns (kCentroidVecs vectors of them): the register tile
// shared by k-means and the compensation pass (pooled_merge-inl.h).
template <int R>
inline void panel_dots(const float* __restrict x, std::int64_t d, const float* __restrict panel,
                       VF (&acc)[R][kCentroidVecs]) {
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int j = 0; j < kCentroidVecs; ++j) acc[r][j] = VF{};
  for (std::int64_t t = 0; t < d; ++t) {
    VF c[kCentroidVecs];
#pragma GCC unroll 4
    for (int j = 0; j < kCentroidVecs; ++j) c[j] = load(panel + t * kCentroidPanel + j * kLanes);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const VF xr = splat(x[r * d + t]);
#pragma GCC unroll 4
      for (int j = 0; j < kCentroidVecs; ++j) acc[r][j] += xr * c[j];
    }
  }
}

// The R points at x (rows d apart) against the panel of centroids c0 ..
// c0 + kCentroidPanel - 1: lowers best[r] and sets labels[r] where a centroid
// is strictly nearer, so the lowest index wins a tie.
template <int R>
inline void nearest_in_panel(const float* __restrict x, std::int64_t d,
                             const float* __restrict panel, const float* __restrict norms,
                             std::int64_t c0, float* __restrict best,
                             std::int32_t* __restrict labels) {
  VF acc[R][kCentroidVecs];
  panel_dots<R>(x, d, panel, acc);
  for (int r = 0; r < R; ++r) {
    alignas(64) float distance[kCentroidPanel];
#pragma GCC unroll 4
    for (int j = 0; j < kCentroidVecs; ++j) {
      store(distance + j * kLanes, load(norms + j * kLanes) - splat(2.0f) * acc[r][j]);
    }
    for (int j = 0; j < static_cast<int>(kCentroidPanel); ++j) {
      if (distance[j] < best[r]) {
        best[r] = distance[j];
        labels[r] = static_cast<std::int32_t>(c0 + j);
      }
    }
  }
}

inline void nearest_centroid(const float* points, std::int64_t d, std::int64_t begin,
                             std::int64_t end, const float* panels, const float* norms,
                             std::int64_t k_padded, std::int32_t* labels) {
  // Blocks of points small enough for their best distances to live on the stack.
  constexpr std::int64_t kBlock = 256;
  float best[kBlock];
  for (std::int64_t b0 = begin; b0 < end; b0 += kBlock) {
    const std::int64_t n = std::min(kBlock, end - b0);
    const std::int64_t full = n / kPointRows * kPointRows;
    const float* x = points + b0 * d;
    std::int32_t* out = labels + (b0 - begin);
    std::fill(best, best + n, std::numeric_limits<float>::infinity());
    std::fill(out, out + n, 0);
    for (std::int64_t c0 = 0; c0 < k_padded; c0 += kCentroidPanel) {
      const float* panel = panels + c0 * d;
      for (std::int64_t i = 0; i < full; i += kPointRows) {
        nearest_in_panel<kPointRows>(x + i * d, d, panel, norms + c0, c0, best + i, out + i);
      }
      for (std::int64_t i = full; i < n; ++i) {
        nearest_in_panel<1>(x + i * d, d, panel, norms + c0, c0, best + i, out + i);
      }
    }
  }
}
