// The Radial Attention mask as a MaskNode (see radial.h for the definition).
// Frame distances d >= 2 fall into classes of equal bitlen(d); within a class
// the window w(d) and the subsampling stride are constant, so a tile (at most
// three frame rectangles per side) is classified by a handful of interval
// checks per class: O(log F), no scan of its elements.
#pragma once

#include <cstdint>
#include <string>

#include "geometry/frame_rects.h"
#include "tilesplash/mask_node.h"
#include "tilesplash/radial.h"

namespace tilesplash::detail {

// What every frame distance of one bitlen class keeps.
struct RadialRule {
  std::int64_t window = 0;  // floor(w(d)), at most P
  std::int64_t stride = 1;  // d is kept only when d % stride == 0
};

// The rule of frame distances d with bitlen(d) == bits (d >= 2).
RadialRule radial_rule(const VideoGeometry& geometry, const RadialOptions& options, int bits);

// Throws std::invalid_argument naming a bad option.
void check_radial_options(const RadialOptions& options);

class RadialNode final : public MaskNode {
 public:
  RadialNode(const VideoGeometry& geometry, RadialOptions options);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

  const RadialMaskInfo& info() const { return info_; }

 private:
  // -1: frame pair (i, j) drops every pair; else the window (>= P: all kept).
  std::int64_t frame_window(std::int64_t i, std::int64_t j) const;
  TileKind classify_video(IndexRange rows, IndexRange cols) const;
  void accumulate(const FrameRect& rows, const FrameRect& cols, bool& any, bool& all) const;

  RadialMaskInfo info_;
  VideoLayout layout_;
  RadialRule rules_[64];  // by bitlen(d), for d >= 2
};

}  // namespace tilesplash::detail
