// The mask node behind tile_granular_mask() (tile_granular.h): a mask whose
// kept set is rounded out to whole tiles of one grid over one map. Every
// question is answered by asking the wrapped mask to classify the tiles it
// touches, so an analytic mask stays O(1) per tile.
#pragma once

#include <cstdint>
#include <string>

#include "tilesplash/mask_node.h"
#include "tilesplash/plan.h"

namespace tilesplash::detail {

class TileGranularNode final : public MaskNode {
 public:
  // Lengths and block sizes >= 1 (checked by the caller).
  TileGranularNode(Mask inner, std::int64_t q_len, std::int64_t kv_len, BlockSizes tiles);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  bool is_analytic() const override { return inner_.is_analytic(); }
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

  const Mask& inner() const { return inner_; }

 private:
  // Whether the inner mask keeps a pair of tile (q_tile, kv_tile), clipped to the map.
  bool tile_kept(std::int64_t q_tile, std::int64_t kv_tile) const;
  IndexRange tile_rows(std::int64_t q_tile) const;
  IndexRange tile_cols(std::int64_t kv_tile) const;

  Mask inner_;
  std::int64_t q_len_;
  std::int64_t kv_len_;
  BlockSizes tiles_;
};

}  // namespace tilesplash::detail
