// The mask of a pooled-score selection (pooled.h): kept (query tile, key
// tile) pairs over tokens x tokens, each kept tile kept whole. A 2-D prefix
// sum of the kept tiles classifies any rectangle in O(1); memory is O(tiles).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilesplash/mask_node.h"
#include "tilesplash/plan.h"
#include "tilesplash/pooled.h"

namespace tilesplash::detail {

class PooledTilesNode final : public MaskNode {
 public:
  explicit PooledTilesNode(const PooledSelection& selection);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  // Selections are made per head and step, never cached: only copies of one
  // mask compare equal.
  bool equals(const MaskNode& other) const override { return this == &other; }
  void check_lengths(std::int64_t q_len, std::int64_t kv_len) const override;

 private:
  // Kept tiles in query tiles [a0, a1) x key tiles [b0, b1).
  std::int64_t kept_in(std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) const;

  std::int64_t tokens_, q_tiles_, kv_tiles_;
  BlockSizes blocks_;
  double p_;
  std::vector<std::int32_t> prefix_;                  // (q_tiles + 1) x (kv_tiles + 1)
  std::vector<std::int32_t> first_kept_, last_kept_;  // per query tile; -1: none
};

}  // namespace tilesplash::detail
