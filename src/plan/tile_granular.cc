// Granularity names, tile_granular_mask() and round_out(): the plan rounded
// out to whole tiles (tile_granular.h).
#include "tilesplash/tile_granular.h"

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "plan/plan_builder.h"
#include "plan/segment_minus_node.h"
#include "plan/tile_granular_node.h"

namespace tilesplash {

std::string_view to_string(Granularity granularity) {
  return granularity == Granularity::kTile ? "tile" : "token";
}

Granularity parse_granularity(std::string_view text) {
  if (text == "token") return Granularity::kToken;
  if (text == "tile") return Granularity::kTile;
  throw std::invalid_argument("granularity: expected 'token' or 'tile', got '" + std::string(text) +
                              "'");
}

Mask tile_granular_mask(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                        BlockSizes tiles) {
  const auto positive = [](std::int64_t value, const char* name) {
    if (value < 1) {
      throw std::invalid_argument(std::string("tile_granular_mask: ") + name +
                                  " must be >= 1, got " + std::to_string(value));
    }
  };
  positive(q_len, "q_len");
  positive(kv_len, "kv_len");
  positive(tiles.block_q, "block_q");
  positive(tiles.block_kv, "block_kv");
  mask.check_lengths(q_len, kv_len);
  return Mask(std::make_shared<detail::TileGranularNode>(mask, q_len, kv_len, tiles));
}

Mask mask_at_granularity(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                         BlockSizes tiles, Granularity granularity) {
  if (granularity == Granularity::kToken) return mask;
  return tile_granular_mask(mask, q_len, kv_len, tiles);
}

Mask segment_minus(const Mask& segment, const Mask& band, std::int64_t first, std::int64_t stride) {
  if (first < 0 || stride < 1) {
    throw std::invalid_argument("segment_minus: expected first >= 0 and stride >= 1, got first " +
                                std::to_string(first) + ", stride " + std::to_string(stride));
  }
  return Mask(std::make_shared<detail::SegmentMinusNode>(segment, band, first, stride));
}

TilePlan round_out(const TilePlan& plan) { return PlanBuilder::round_out(plan); }

TilePlan PlanBuilder::round_out(const TilePlan& plan) {
  const auto start = std::chrono::steady_clock::now();
  TilePlan out(tile_granular_mask(plan.mask(), plan.q_len(), plan.kv_len(), plan.blocks()));
  out.q_len_ = plan.q_len_;
  out.kv_len_ = plan.kv_len_;
  out.blocks_ = plan.blocks_;
  out.num_kv_blocks_ = plan.num_kv_blocks_;
  out.words_per_row_ = plan.words_per_row_;
  out.row_offsets_ = plan.row_offsets_;
  out.tiles_ = plan.tiles_;
  PlanStats& stats = out.stats_;
  stats.empty = plan.stats_.empty;
  for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
    const std::int64_t rows = plan.q_range(qb).size();
    const auto begin = static_cast<std::size_t>(plan.row_offsets_[static_cast<std::size_t>(qb)]);
    const auto end = static_cast<std::size_t>(plan.row_offsets_[static_cast<std::size_t>(qb) + 1]);
    for (std::size_t i = begin; i < end; ++i) {
      out.tiles_[i].partial_id = -1;
      stats.kept_pairs += rows * plan.kv_range(out.tiles_[i].kv_block).size();
    }
  }
  stats.full = plan.stats_.full + plan.stats_.partial;
  stats.density = static_cast<double>(stats.kept_pairs) /
                  (static_cast<double>(plan.q_len_) * static_cast<double>(plan.kv_len_));
  stats.plan_bytes = static_cast<std::int64_t>(sizeof(TilePlan)) +
                     static_cast<std::int64_t>(out.row_offsets_.capacity() * sizeof(std::int64_t) +
                                               out.tiles_.capacity() * sizeof(PlanTile));
  stats.build_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace tilesplash
