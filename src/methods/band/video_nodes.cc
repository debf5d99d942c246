// Tile classification of the video masks from index arithmetic.
//
// Spatial band: a tile's differences k - q form one interval (as for the core
// band masks), once the tile is clipped to the video tokens.
// Temporal band on frame-major indices: a run of consecutive video indices is
// at most three "frame rectangles" (a frame range times a patch range: the
// partial first frame, the whole frames between, the partial last frame).
// For a rectangle of rows against one of keys, q' - k' = (pq - pk) * F +
// (fq - fk) where the patch difference d and the frame difference e each take
// every integer of an interval, independently. All pairs are kept iff the
// extreme values d1 * F + e1 <= W and d0 * F + e0 >= -W; some pair is kept iff
// some d in [d0, d1] has d * F in [-W - e1, W - e0]. So a tile costs at most
// nine such checks, never a scan of its elements.
#include "methods/band/video_nodes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "geometry/frame_rects.h"
#include "masks/mask_util.h"

namespace tilesplash::detail {
namespace {

constexpr std::size_t kVideoTag = 0x766964656f;
constexpr std::size_t kSinkSegmentTag = 0x73696e6b;

}  // namespace

VideoMaskNode::VideoMaskNode(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                             VideoMaskOptions options)
    : info_{kind, geometry, band, options},
      layout_((geometry.validate(), geometry)),
      band_(clamp_bound(band)) {
  if (band < 0) {
    throw std::invalid_argument("video mask: band must be >= 0 (a half-width in tokens), got " +
                                std::to_string(band));
  }
}

bool VideoMaskNode::band_keeps(std::int64_t q, std::int64_t k) const {
  if (info_.kind == VideoMaskKind::kSpatial) return std::abs(q - k) <= band_;
  const VideoGeometry& g = info_.geometry;
  return std::abs(g.to_token_major(q) - g.to_token_major(k)) <= band_;
}

bool VideoMaskNode::keeps(std::int64_t q, std::int64_t k) const {
  if (q < 0 || k < 0 || q >= layout_.tokens || k >= layout_.tokens) return false;
  const bool q_video = q >= layout_.video.begin && q < layout_.video.end;
  const bool k_video = k >= layout_.video.begin && k < layout_.video.end;
  if (q_video && k_video && band_keeps(q, k)) return true;
  if (info_.options.sink && q_video && k < layout_.frame0.end && k >= layout_.frame0.begin) {
    return true;
  }
  return has_text() && (!q_video || !k_video);
}

TileKind VideoMaskNode::classify(IndexRange rows, IndexRange cols) const {
  const TileKind kinds[3] = {
      classify_band(rows, cols),
      info_.options.sink ? classify_sink(rows, cols) : TileKind::kEmpty,
      has_text() ? classify_text(rows, cols) : TileKind::kEmpty,
  };
  int partial = 0;
  for (const TileKind kind : kinds) {
    if (kind == TileKind::kFull) return TileKind::kFull;
    partial += kind == TileKind::kPartial;
  }
  if (partial == 0) return TileKind::kEmpty;
  if (partial == 1) return TileKind::kPartial;
  // Two partial areas may still cover the tile between them; such tiles sit
  // on the area boundaries only.
  return scan_in_tokens(*this, layout_.tokens, rows, cols);
}

TileKind VideoMaskNode::classify_band(IndexRange rows, IndexRange cols) const {
  const IndexRange vr = intersect(rows, layout_.video);
  const IndexRange vc = intersect(cols, layout_.video);
  if (vr.empty() || vc.empty()) return TileKind::kEmpty;
  const bool whole = vr == rows && vc == cols;
  if (info_.kind == VideoMaskKind::kSpatial) {
    const std::int64_t dmin = vc.begin - (vr.end - 1);
    const std::int64_t dmax = (vc.end - 1) - vr.begin;
    if (dmax < -band_ || dmin > band_) return TileKind::kEmpty;
    return whole && dmin >= -band_ && dmax <= band_ ? TileKind::kFull : TileKind::kPartial;
  }
  const std::int64_t base = layout_.video.begin;
  const std::int64_t f = layout_.frames;
  FrameRect row_rects[3];
  FrameRect col_rects[3];
  const int nr = split_frames(vr.begin - base, vr.end - base, layout_.patches, row_rects);
  const int nc = split_frames(vc.begin - base, vc.end - base, layout_.patches, col_rects);
  bool any = false;
  bool all = true;
  for (int i = 0; i < nr; ++i) {
    for (int j = 0; j < nc; ++j) {
      const FrameRect& r = row_rects[i];
      const FrameRect& c = col_rects[j];
      const std::int64_t d0 = r.p0 - c.p1, d1 = r.p1 - c.p0;
      const std::int64_t e0 = r.f0 - c.f1, e1 = r.f1 - c.f0;
      all = all && d1 * f + e1 <= band_ && d0 * f + e0 >= -band_;
      const std::int64_t lo = std::max(d0, ceil_div(-band_ - e1, f));
      const std::int64_t hi = std::min(d1, floor_div(band_ - e0, f));
      any = any || lo <= hi;
    }
  }
  if (!any) return TileKind::kEmpty;
  return whole && all ? TileKind::kFull : TileKind::kPartial;
}

TileKind VideoMaskNode::classify_sink(IndexRange rows, IndexRange cols) const {
  if (intersect(rows, layout_.video).empty() || intersect(cols, layout_.frame0).empty()) {
    return TileKind::kEmpty;
  }
  return contains(layout_.video, rows) && contains(layout_.frame0, cols) ? TileKind::kFull
                                                                         : TileKind::kPartial;
}

TileKind VideoMaskNode::classify_text(IndexRange rows, IndexRange cols) const {
  return classify_text_area(layout_.text, layout_.tokens, rows, cols);
}

IndexRange VideoMaskNode::band_hull(IndexRange vr) const {
  const std::int64_t base = layout_.video.begin;
  if (info_.kind == VideoMaskKind::kSpatial) {
    return {std::max(base, vr.begin - band_), std::min(layout_.video.end, vr.end + band_)};
  }
  // |q' - k'| <= W with |fq - fk| <= F - 1 bounds the patch distance by
  // (W + F - 1) / F. The frame is not bounded: patch p's last frame sits next
  // to patch p + 1's first in token-major order.
  const std::int64_t f = layout_.frames, p = layout_.patches;
  const std::int64_t u0 = vr.begin - base, u1 = vr.end - 1 - base;
  const bool one_frame = u0 / p == u1 / p;
  const std::int64_t pmin = one_frame ? u0 % p : 0;
  const std::int64_t pmax = one_frame ? u1 % p : p - 1;
  const std::int64_t reach = floor_div(band_ + f - 1, f);
  const std::int64_t kp0 = std::max<std::int64_t>(0, pmin - reach);
  const std::int64_t kp1 = std::min(p - 1, pmax + reach);
  return {base + kp0, base + (f - 1) * p + kp1 + 1};
}

IndexRange VideoMaskNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  IndexRange hull{};
  const auto add = [&hull](IndexRange part) {
    if (part.empty()) return;
    hull = hull.empty()
               ? part
               : IndexRange{std::min(hull.begin, part.begin), std::max(hull.end, part.end)};
  };
  const IndexRange vr = intersect(rows, layout_.video);
  if (!vr.empty()) {
    add(band_hull(vr));
    if (info_.options.sink) add(layout_.frame0);
  }
  if (has_text()) {
    const IndexRange r = intersect(rows, {0, layout_.tokens});
    if (!intersect(r, layout_.text).empty()) {
      add({0, layout_.tokens});
    } else if (!r.empty()) {
      add(layout_.text);
    }
  }
  return intersect(hull, {0, kv_len});
}

void VideoMaskNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                             std::uint8_t* keep) const {
  std::memset(keep, 0, static_cast<std::size_t>(n));
  if (q < 0 || q >= layout_.tokens) return;
  const IndexRange video = layout_.video;
  const bool q_video = q >= video.begin && q < video.end;
  if (q_video) {
    if (info_.kind == VideoMaskKind::kSpatial) {
      set_ones(keep, k0, n, std::max(video.begin, q - band_), std::min(video.end, q + band_ + 1));
    } else {
      // Per key frame fk, the kept patches form one interval around pq.
      const std::int64_t f = layout_.frames, p = layout_.patches;
      const std::int64_t fq = (q - video.begin) / p, pq = (q - video.begin) % p;
      const std::int64_t first = std::max(k0, video.begin), last = std::min(k0 + n, video.end) - 1;
      for (std::int64_t fk = (first - video.begin) / p;
           first <= last && fk <= (last - video.begin) / p; ++fk) {
        const std::int64_t df = fq - fk;
        const std::int64_t lo = std::max<std::int64_t>(0, pq - floor_div(band_ - df, f));
        const std::int64_t hi = std::min(p - 1, pq + floor_div(band_ + df, f));
        if (lo <= hi)
          set_ones(keep, k0, n, video.begin + fk * p + lo, video.begin + fk * p + hi + 1);
      }
    }
    if (info_.options.sink) set_ones(keep, k0, n, layout_.frame0.begin, layout_.frame0.end);
  }
  if (has_text()) {
    if (q_video) {
      set_ones(keep, k0, n, layout_.text.begin, layout_.text.end);
    } else {
      set_ones(keep, k0, n, 0, layout_.tokens);
    }
  }
}

std::string VideoMaskNode::to_string() const {
  std::string text = std::string(tilesplash::to_string(info_.kind)) + ":" +
                     info_.geometry.to_string() + ",band=" + std::to_string(info_.band);
  if (info_.options.sink) text += ",sink";
  if (info_.options.text_full) text += ",text_full";
  return text;
}

// Outside its geometry's tokens a video mask keeps nothing, so a plan over
// other lengths would silently leave rows empty (or ignore tokens).
void VideoMaskNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  if (q_len == layout_.tokens && kv_len == layout_.tokens) return;
  throw std::invalid_argument(
      "mask " + to_string() + ": its geometry has " + std::to_string(layout_.tokens) +
      " tokens, so q_len and kv_len must both be " + std::to_string(layout_.tokens) +
      "; got q_len " + std::to_string(q_len) + ", kv_len " + std::to_string(kv_len));
}

std::size_t VideoMaskNode::hash() const {
  const VideoGeometry& g = info_.geometry;
  std::size_t h = hash_combine(kVideoTag, static_cast<std::uint64_t>(info_.kind));
  for (const std::int64_t value :
       {g.frames, g.height, g.width, g.text, static_cast<std::int64_t>(g.text_at), info_.band}) {
    h = hash_combine(h, static_cast<std::uint64_t>(value));
  }
  return hash_combine(h, (info_.options.sink ? 1u : 0u) | (info_.options.text_full ? 2u : 0u));
}

bool VideoMaskNode::equals(const MaskNode& other) const {
  const VideoMaskInfo& o = static_cast<const VideoMaskNode&>(other).info_;
  return info_.kind == o.kind && info_.geometry == o.geometry && info_.band == o.band &&
         info_.options == o.options;
}

SinkSegmentNode::SinkSegmentNode(IndexRange video, std::int64_t patches, std::int64_t band,
                                 std::int64_t stride)
    : video_(video), patches_(patches), band_(clamp_bound(band)), stride_(stride) {
  if (video.empty() || patches < 1 || band < 0 || stride < 1) {
    throw std::invalid_argument(
        "sink segment: needs a non-empty video range, patches >= 1, band >= 0 and stride >= 1");
  }
}

std::int64_t SinkSegmentNode::excluded_begin(std::int64_t u) const {
  return ceil_div(u - band_, stride_);
}

std::int64_t SinkSegmentNode::excluded_last(std::int64_t u) const {
  return floor_div(u + band_, stride_);
}

bool SinkSegmentNode::keeps(std::int64_t q, std::int64_t j) const {
  if (q < video_.begin || q >= video_.end || j < 0 || j >= patches_) return false;
  return std::abs(q - video_.begin - j * stride_) > band_;
}

TileKind SinkSegmentNode::classify(IndexRange rows, IndexRange cols) const {
  const IndexRange vr = intersect(rows, video_);
  const IndexRange vc = intersect(cols, {0, patches_});
  if (vr.empty() || vc.empty()) return TileKind::kEmpty;
  const std::int64_t ua = vr.begin - video_.begin, ub = vr.end - 1 - video_.begin;
  const std::int64_t c0 = vc.begin, c1 = vc.end - 1;
  // Both ends of the excluded interval grow with u: the last row has the
  // most keys left of it, the first row the most keys right of it.
  const bool any = c0 < excluded_begin(ub) || c1 > excluded_last(ua);
  if (!any) return TileKind::kEmpty;
  // Every pair kept iff no key j of the tile has j * stride within the band
  // of some row, i.e. within [ua - W, ub + W].
  const std::int64_t hit0 = std::max(c0, ceil_div(ua - band_, stride_));
  const std::int64_t hit1 = std::min(c1, floor_div(ub + band_, stride_));
  const bool all = hit0 > hit1;
  return all && vr == rows && vc == cols ? TileKind::kFull : TileKind::kPartial;
}

IndexRange SinkSegmentNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  const IndexRange vr = intersect(rows, video_);
  if (vr.empty()) return {};
  const std::int64_t ua = vr.begin - video_.begin, ub = vr.end - 1 - video_.begin;
  const IndexRange left{0, std::clamp<std::int64_t>(excluded_begin(ub), 0, patches_)};
  const IndexRange right{std::clamp<std::int64_t>(excluded_last(ua) + 1, 0, patches_), patches_};
  IndexRange hull{};
  if (!left.empty() && !right.empty()) {
    hull = {0, patches_};
  } else {
    hull = left.empty() ? right : left;
  }
  return intersect(hull, {0, kv_len});
}

void SinkSegmentNode::eval_row(std::int64_t q, std::int64_t k0, std::int64_t n,
                               std::uint8_t* keep) const {
  std::memset(keep, 0, static_cast<std::size_t>(n));
  if (q < video_.begin || q >= video_.end) return;
  const std::int64_t u = q - video_.begin;
  set_ones(keep, k0, n, 0, std::clamp<std::int64_t>(excluded_begin(u), 0, patches_));
  set_ones(keep, k0, n, std::clamp<std::int64_t>(excluded_last(u) + 1, 0, patches_), patches_);
}

std::string SinkSegmentNode::to_string() const {
  return "sink_segment:video=" + std::to_string(video_.begin) + ".." + std::to_string(video_.end) +
         ",keys=" + std::to_string(patches_) + ",band=" + std::to_string(band_) +
         ",stride=" + std::to_string(stride_);
}

std::size_t SinkSegmentNode::hash() const {
  std::size_t h = kSinkSegmentTag;
  for (const std::int64_t value : {video_.begin, video_.end, patches_, band_, stride_}) {
    h = hash_combine(h, static_cast<std::uint64_t>(value));
  }
  return h;
}

bool SinkSegmentNode::equals(const MaskNode& other) const {
  const auto& o = static_cast<const SinkSegmentNode&>(other);
  return video_ == o.video_ && patches_ == o.patches_ && band_ == o.band_ && stride_ == o.stride_;
}

}  // namespace tilesplash::detail
