// The new mask families written out from their definitions (docs/masks.md),
// independently of the library: from frame, patch and tile numbers, with
// bit lengths counted by a loop and L(d) as a power, for brute-force checks.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>

#include "tilesplash/mask.h"
#include "video_test_util.h"

namespace tilesplash::test {

inline int ref_bitlen(std::int64_t x) {
  int bits = 0;
  for (; x > 0; x /= 2) ++bits;
  return bits;
}

struct RefRadial {
  RefRadial(const VideoGeometry& g, double decay, std::int64_t block, bool sink)
      : video(g), decay(decay), block(block), sink(sink) {}

  bool frame_pair_kept_whole(std::int64_t i, std::int64_t j) const {
    return (sink && j == 0) || std::llabs(i - j) <= 1;
  }
  // Kept in-frame pair (r, c) for frame distance d >= 2?
  bool far_keeps(std::int64_t d, std::int64_t r, std::int64_t c) const {
    const double l =
        std::pow(2.0, ref_bitlen(video.patches)) / std::pow(2.0, ref_bitlen(d));  // L(d)
    const double w = std::max(l * decay, static_cast<double>(block));
    if (l < static_cast<double>(block)) {
      const auto m = static_cast<std::int64_t>(std::floor(static_cast<double>(block) / l));
      if (d % m != 0) return false;
    }
    return static_cast<double>(std::llabs(r - c)) <= w;
  }
  bool keeps(std::int64_t q, std::int64_t k) const {
    if (q < 0 || k < 0 || q >= video.tokens || k >= video.tokens) return false;
    if (video.text_token(q) || video.text_token(k)) return true;
    const std::int64_t i = video.frame(q), j = video.frame(k);
    if (frame_pair_kept_whole(i, j)) return true;
    return far_keeps(std::llabs(i - j), video.patch(q), video.patch(k));
  }

  RefVideo video;
  double decay;
  std::int64_t block;
  bool sink;
};

// Kind of the tile rows x cols under any predicate, by visiting every pair.
template <typename Keeps>
TileKind brute_kind(const Keeps& keeps, IndexRange rows, IndexRange cols) {
  bool kept = false, dropped = false;
  for (std::int64_t q = rows.begin; q < rows.end; ++q) {
    for (std::int64_t k = cols.begin; k < cols.end; ++k) (keeps(q, k) ? kept : dropped) = true;
  }
  if (!kept) return TileKind::kEmpty;
  return dropped ? TileKind::kPartial : TileKind::kFull;
}

}  // namespace tilesplash::test
