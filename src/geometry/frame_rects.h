// Index arithmetic shared by the video mask nodes: a geometry's ranges,
// range intersection, and the split of a run of frame-major video indices
// into at most three "frame rectangles" (a frame range times a patch range:
// the partial first frame, the whole frames between, the partial last
// frame), the shape every video node classifies in O(1) instead of scanning.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "masks/mask_util.h"
#include "tilesplash/mask.h"
#include "tilesplash/video.h"

namespace tilesplash::detail {

// The numbers of a geometry that every keeps/classify call of a video
// mask node needs.
struct VideoLayout {
  explicit VideoLayout(const VideoGeometry& geometry)
      : frames(geometry.frames),
        patches(geometry.tokens_per_frame()),
        tokens(geometry.tokens()),
        video(geometry.video_range()),
        frame0{video.begin, video.begin + patches},
        text(geometry.text_range()) {}
  std::int64_t frames;   // F
  std::int64_t patches;  // P
  std::int64_t tokens;   // N
  IndexRange video;      // frame-major video tokens
  IndexRange frame0;     // keys of frame 0
  IndexRange text;       // empty without text
};

inline IndexRange intersect(IndexRange a, IndexRange b) {
  const IndexRange r{std::max(a.begin, b.begin), std::min(a.end, b.end)};
  return r.empty() ? IndexRange{} : r;
}

inline bool contains(IndexRange outer, IndexRange inner) {
  return inner.begin >= outer.begin && inner.end <= outer.end;
}

inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return -floor_div(-a, b); }

// keep[i] = 1 for sequence indices [begin, end) that fall in [k0, k0 + n).
// In 128 bits: k0 may lie anywhere in the int64 range, far from the tokens.
inline void set_ones(std::uint8_t* keep, std::int64_t k0, std::int64_t n, std::int64_t begin,
                     std::int64_t end) {
  const auto lo = static_cast<std::int64_t>(std::clamp<Wide>(Wide{begin} - k0, 0, n));
  const auto hi = static_cast<std::int64_t>(std::clamp<Wide>(Wide{end} - k0, lo, n));
  if (hi > lo) std::memset(keep + lo, 1, static_cast<std::size_t>(hi - lo));
}

// classify_by_scan for a mask that keeps nothing outside [0, tokens)^2: the
// scan walks only the tile's part inside, so a tile reaching INT64_MIN or
// INT64_MAX costs what its in-range part costs; any pair outside is dropped.
inline TileKind scan_in_tokens(const MaskNode& node, std::int64_t tokens, IndexRange rows,
                               IndexRange cols) {
  const IndexRange r = intersect(rows, {0, tokens});
  const IndexRange c = intersect(cols, {0, tokens});
  if (r.empty() || c.empty()) return TileKind::kEmpty;
  const TileKind kind = classify_by_scan(node, r, c);
  return kind == TileKind::kFull && (r != rows || c != cols) ? TileKind::kPartial : kind;
}

struct FrameRect {
  std::int64_t f0, f1;  // frames, inclusive
  std::int64_t p0, p1;  // patches, inclusive
};

// Splits video-relative indices [u0, u1) (non-empty) into frame rectangles;
// returns how many (1 to 3).
inline int split_frames(std::int64_t u0, std::int64_t u1, std::int64_t patches, FrameRect* out) {
  const std::int64_t fa = u0 / patches, pa = u0 % patches;
  const std::int64_t fb = (u1 - 1) / patches, pb = (u1 - 1) % patches;
  if (fa == fb) {
    out[0] = {fa, fa, pa, pb};
    return 1;
  }
  int count = 0;
  out[count++] = {fa, fa, pa, patches - 1};
  if (fb > fa + 1) out[count++] = {fa + 1, fb - 1, 0, patches - 1};
  out[count++] = {fb, fb, 0, pb};
  return count;
}

// The kind of a tile against the text area (every pair with a text query or
// a text key, in [0, tokens)): full only when the tile lies in range and
// inside the text rows or the text columns.
inline TileKind classify_text_area(IndexRange text, std::int64_t tokens, IndexRange rows,
                                   IndexRange cols) {
  const IndexRange all{0, tokens};
  const IndexRange r = intersect(rows, all);
  const IndexRange c = intersect(cols, all);
  if (r.empty() || c.empty() || text.empty()) return TileKind::kEmpty;
  if (intersect(r, text).empty() && intersect(c, text).empty()) return TileKind::kEmpty;
  const bool in_range = r == rows && c == cols;
  const bool covered = contains(text, rows) || contains(text, cols);
  return in_range && covered ? TileKind::kFull : TileKind::kPartial;
}

}  // namespace tilesplash::detail
