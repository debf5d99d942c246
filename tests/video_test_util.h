// Shared pieces of the video tests: small geometries of every kind and the
// Sparse VideoGen mask definitions written out independently of the library
// (from frame and patch numbers, not from its index maps).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "tilesplash/video.h"

namespace tilesplash::test {

// Text before, after and none; one frame, one patch per frame; P that is not
// a multiple of anything a tile uses.
inline std::vector<VideoGeometry> small_geometries() {
  return {
      {3, 2, 3, 0, TextPlacement::kNone},    // N = 18
      {4, 3, 2, 5, TextPlacement::kBefore},  // N = 29
      {5, 1, 4, 3, TextPlacement::kAfter},   // N = 23
      {1, 4, 4, 0, TextPlacement::kNone},    // one frame
      {7, 1, 1, 2, TextPlacement::kAfter},   // one patch per frame
  };
}

struct RefVideo {
  explicit RefVideo(const VideoGeometry& g)
      : frames(g.frames),
        patches(g.height * g.width),
        text(g.text),
        first(g.text_at == TextPlacement::kBefore ? g.text : 0),
        tokens(g.frames * g.height * g.width + g.text) {}

  bool video(std::int64_t n) const { return n >= first && n < first + frames * patches; }
  bool text_token(std::int64_t n) const { return n >= 0 && n < tokens && !video(n); }
  std::int64_t frame(std::int64_t n) const { return (n - first) / patches; }
  std::int64_t patch(std::int64_t n) const { return (n - first) % patches; }
  std::int64_t token_major(std::int64_t n) const {
    return video(n) ? first + patch(n) * frames + frame(n) : n;
  }

  bool keeps(VideoMaskKind kind, std::int64_t band, VideoMaskOptions options, std::int64_t q,
             std::int64_t k) const {
    if (q < 0 || k < 0 || q >= tokens || k >= tokens) return false;
    if (video(q) && video(k)) {
      const std::int64_t distance =
          kind == VideoMaskKind::kSpatial ? q - k : token_major(q) - token_major(k);
      if (std::llabs(distance) <= band) return true;
      if (options.sink && frame(k) == 0) return true;
      return false;
    }
    return options.text_full && (text_token(q) || text_token(k));
  }

  std::int64_t frames, patches, text, first, tokens;
};

inline std::string describe(const VideoGeometry& g, VideoMaskKind kind, std::int64_t band,
                            VideoMaskOptions options) {
  return std::string(to_string(kind)) + " " + g.to_string() + " band=" + std::to_string(band) +
         (options.sink ? " sink" : "") + (options.text_full ? " text_full" : "");
}

}  // namespace tilesplash::test
