// The video masks as MaskNode types (see mask_node.h). VideoMaskNode is one
// spatial or temporal mask with its optional sink and text areas, on the
// original frame-major indices; SinkSegmentNode is the extra key segment the
// front door runs for the sink (frame-0 keys the band does not already keep).
// Both classify tiles from index arithmetic alone.
#pragma once

#include <cstdint>
#include <string>

#include "geometry/frame_rects.h"
#include "tilesplash/mask_node.h"
#include "tilesplash/video.h"

namespace tilesplash::detail {

class VideoMaskNode final : public MaskNode {
 public:
  // Validates the geometry; throws std::invalid_argument when band < 0.
  VideoMaskNode(VideoMaskKind kind, const VideoGeometry& geometry, std::int64_t band,
                VideoMaskOptions options);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

  const VideoMaskInfo& info() const { return info_; }

 private:
  bool band_keeps(std::int64_t q, std::int64_t k) const;
  TileKind classify_band(IndexRange rows, IndexRange cols) const;
  TileKind classify_sink(IndexRange rows, IndexRange cols) const;
  TileKind classify_text(IndexRange rows, IndexRange cols) const;
  IndexRange band_hull(IndexRange video_rows) const;
  bool has_text() const { return info_.options.text_full && !layout_.text.empty(); }

  VideoMaskInfo info_;
  VideoLayout layout_;
  std::int64_t band_;  // info_.band clamped to kUnbounded
};

// Rows q over a sequence, keys j in [0, patches): kept when q is a video token
// (u = q - video.begin) and |u - j * stride| > band. With stride 1 this is
// frame 0 in frame-major order (key j at u = j); with stride F, frame 0 in
// token-major order (patch j's frame-0 key at u = j * F). The band's excluded
// keys of row u form [ceil((u - band) / stride), floor((u + band) / stride)],
// whose ends both grow with u, so every tile classifies in O(1).
class SinkSegmentNode final : public MaskNode {
 public:
  SinkSegmentNode(IndexRange video, std::int64_t patches, std::int64_t band, std::int64_t stride);

  bool keeps(std::int64_t q, std::int64_t j) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

 private:
  std::int64_t excluded_begin(std::int64_t u) const;  // first key the band keeps
  std::int64_t excluded_last(std::int64_t u) const;   // last key the band keeps

  IndexRange video_;
  std::int64_t patches_;
  std::int64_t band_;  // clamped
  std::int64_t stride_;
};

}  // namespace tilesplash::detail
