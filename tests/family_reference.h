// The new mask families written out from their definitions (docs/masks.md),
// independently of the library: from frame, patch and tile numbers, with
// bit lengths counted by a loop and L(d) as a power, for brute-force checks.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

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

struct RefSta {
  RefSta(const VideoGeometry& g, std::array<std::int64_t, 3> tile,
         std::array<std::int64_t, 3> window)
      : video(g), dims{g.frames, g.height, g.width}, tile(tile), window(window) {}

  std::array<std::int64_t, 3> coords(std::int64_t n) const {  // (f, y, x) of a video token
    const std::int64_t p = video.patch(n);
    return {video.frame(n), p / dims[2], p % dims[2]};
  }
  bool dimension_keeps(int d, std::int64_t q, std::int64_t k) const {
    const std::int64_t count = (dims[d] + tile[d] - 1) / tile[d];
    if (window[d] >= count) return true;
    const std::int64_t half = window[d] / 2;
    const std::int64_t centre = std::min(std::max(q, half), count - 1 - half);
    return std::llabs(centre - k) <= half;
  }
  bool keeps(std::int64_t q, std::int64_t k) const {
    if (q < 0 || k < 0 || q >= video.tokens || k >= video.tokens) return false;
    if (video.text_token(q) || video.text_token(k)) return true;
    const auto a = coords(q), b = coords(k);
    for (int d = 0; d < 3; ++d) {
      if (!dimension_keeps(d, a[d] / tile[d], b[d] / tile[d])) return false;
    }
    return true;
  }
  // Tile-major order: tiles in raster order, raster order inside, text last.
  std::vector<std::int64_t> tile_major() const {
    std::vector<std::int64_t> order;
    const std::int64_t first = video.first;
    for (std::int64_t a = 0; a * tile[0] < dims[0]; ++a) {
      for (std::int64_t b = 0; b * tile[1] < dims[1]; ++b) {
        for (std::int64_t c = 0; c * tile[2] < dims[2]; ++c) {
          for (std::int64_t f = a * tile[0]; f < std::min(dims[0], (a + 1) * tile[0]); ++f) {
            for (std::int64_t y = b * tile[1]; y < std::min(dims[1], (b + 1) * tile[1]); ++y) {
              for (std::int64_t x = c * tile[2]; x < std::min(dims[2], (c + 1) * tile[2]); ++x) {
                order.push_back(first + (f * dims[1] + y) * dims[2] + x);
              }
            }
          }
        }
      }
    }
    for (std::int64_t n = 0; n < video.tokens; ++n) {
      if (video.text_token(n)) order.push_back(n);
    }
    return order;
  }

  RefVideo video;
  std::array<std::int64_t, 3> dims, tile, window;
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
