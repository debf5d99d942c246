// The mask node behind segment_minus() (tile_granular.h): a key segment's
// mask without the pairs a band already keeps at those keys. Tiles the band
// leaves alone keep the segment's O(1) classification; only tiles where the
// two meet are scanned.
#pragma once

#include <cstdint>
#include <string>

#include "tilesplash/mask_node.h"

namespace tilesplash::detail {

class SegmentMinusNode final : public MaskNode {
 public:
  // first >= 0, stride >= 1 (checked by the caller).
  SegmentMinusNode(Mask segment, Mask band, std::int64_t first, std::int64_t stride);

  bool keeps(std::int64_t q, std::int64_t j) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  bool is_analytic() const override { return false; }
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

 private:
  // The band's key of segment key j, or -1 past INT64_MAX.
  std::int64_t band_key(std::int64_t j) const;

  Mask segment_;
  Mask band_;
  std::int64_t first_;
  std::int64_t stride_;
};

}  // namespace tilesplash::detail
