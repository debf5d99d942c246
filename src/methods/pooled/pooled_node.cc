// PooledTilesNode: the kept tiles of a pooled-score selection as a mask.
#include "methods/pooled/pooled_node.h"

#include <algorithm>
#include <functional>
#include <stdexcept>

namespace tilesplash::detail {

PooledTilesNode::PooledTilesNode(const PooledSelection& selection)
    : tokens_(selection.tokens),
      q_tiles_(selection.q_tiles),
      kv_tiles_(selection.kv_tiles),
      blocks_(selection.blocks),
      p_(selection.p),
      prefix_(static_cast<std::size_t>((q_tiles_ + 1) * (kv_tiles_ + 1)), 0),
      first_kept_(static_cast<std::size_t>(q_tiles_), -1),
      last_kept_(static_cast<std::size_t>(q_tiles_), -1) {
  const std::int64_t width = kv_tiles_ + 1;
  std::vector<std::int32_t> row(static_cast<std::size_t>(kv_tiles_));
  for (std::int64_t a = 0; a < q_tiles_; ++a) {
    std::fill(row.begin(), row.end(), 0);
    const auto begin = selection.row_offsets[static_cast<std::size_t>(a)];
    const auto end = selection.row_offsets[static_cast<std::size_t>(a) + 1];
    for (auto i = begin; i < end; ++i) row[static_cast<std::size_t>(selection.kept[i])] = 1;
    if (end > begin) {
      first_kept_[static_cast<std::size_t>(a)] = selection.kept[static_cast<std::size_t>(begin)];
      last_kept_[static_cast<std::size_t>(a)] = selection.kept[static_cast<std::size_t>(end - 1)];
    }
    for (std::int64_t b = 0; b < kv_tiles_; ++b) {
      prefix_[static_cast<std::size_t>((a + 1) * width + b + 1)] =
          prefix_[static_cast<std::size_t>(a * width + b + 1)] +
          prefix_[static_cast<std::size_t>((a + 1) * width + b)] -
          prefix_[static_cast<std::size_t>(a * width + b)] + row[static_cast<std::size_t>(b)];
    }
  }
}

std::int64_t PooledTilesNode::kept_in(std::int64_t a0, std::int64_t a1, std::int64_t b0,
                                      std::int64_t b1) const {
  const std::int64_t w = kv_tiles_ + 1;
  const auto at = [&](std::int64_t a, std::int64_t b) {
    return static_cast<std::int64_t>(prefix_[static_cast<std::size_t>(a * w + b)]);
  };
  return at(a1, b1) - at(a0, b1) - at(a1, b0) + at(a0, b0);
}

bool PooledTilesNode::keeps(std::int64_t q, std::int64_t k) const {
  const std::int64_t a = q / blocks_.block_q, b = k / blocks_.block_kv;
  return kept_in(a, a + 1, b, b + 1) != 0;
}

TileKind PooledTilesNode::classify(IndexRange rows, IndexRange cols) const {
  const std::int64_t a0 = rows.begin / blocks_.block_q, a1 = (rows.end - 1) / blocks_.block_q + 1;
  const std::int64_t b0 = cols.begin / blocks_.block_kv, b1 = (cols.end - 1) / blocks_.block_kv + 1;
  const std::int64_t kept = kept_in(a0, a1, b0, b1);
  if (kept == 0) return TileKind::kEmpty;
  return kept == (a1 - a0) * (b1 - b0) ? TileKind::kFull : TileKind::kPartial;
}

IndexRange PooledTilesNode::kv_hull(IndexRange rows, std::int64_t kv_len) const {
  std::int64_t first = kv_tiles_, last = -1;
  const std::int64_t a0 = rows.begin / blocks_.block_q, a1 = (rows.end - 1) / blocks_.block_q + 1;
  for (std::int64_t a = a0; a < a1; ++a) {
    if (first_kept_[static_cast<std::size_t>(a)] < 0) continue;
    first = std::min<std::int64_t>(first, first_kept_[static_cast<std::size_t>(a)]);
    last = std::max<std::int64_t>(last, last_kept_[static_cast<std::size_t>(a)]);
  }
  if (last < 0) return {0, 0};
  return {first * blocks_.block_kv, std::min(kv_len, (last + 1) * blocks_.block_kv)};
}

std::string PooledTilesNode::to_string() const {
  return "pooled(tokens=" + std::to_string(tokens_) + ",p=" + std::to_string(p_) +
         ",tiles=" + std::to_string(q_tiles_) + "x" + std::to_string(kv_tiles_) + ")";
}

std::size_t PooledTilesNode::hash() const { return std::hash<const void*>{}(this); }

void PooledTilesNode::check_lengths(std::int64_t q_len, std::int64_t kv_len) const {
  if (q_len != tokens_ || kv_len != tokens_) {
    throw std::invalid_argument("mask pooled: it covers " + std::to_string(tokens_) + " x " +
                                std::to_string(tokens_) + "; got q_len " + std::to_string(q_len) +
                                ", kv_len " + std::to_string(kv_len));
  }
}

}  // namespace tilesplash::detail
