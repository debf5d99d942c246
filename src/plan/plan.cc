#include "tilesplash/plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "plan/plan_builder.h"

namespace tilesplash {
namespace {

void check_index(std::int64_t index, std::int64_t count, const char* what) {
  if (index < 0 || index >= count) {
    throw std::out_of_range(std::string("TilePlan: ") + what + " " + std::to_string(index) +
                            " out of range [0, " + std::to_string(count) + ")");
  }
}

}  // namespace

TilePlan TilePlan::build(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                         BlockSizes blocks) {
  return PlanBuilder::build(mask, q_len, kv_len, blocks);
}

IndexRange TilePlan::q_range(std::int64_t q_block) const {
  check_index(q_block, num_q_blocks(), "q_block");
  const std::int64_t begin = q_block * blocks_.block_q;
  return {begin, begin + std::min(blocks_.block_q, q_len_ - begin)};
}

IndexRange TilePlan::kv_range(std::int64_t kv_block) const {
  check_index(kv_block, num_kv_blocks_, "kv_block");
  const std::int64_t begin = kv_block * blocks_.block_kv;
  return {begin, begin + std::min(blocks_.block_kv, kv_len_ - begin)};
}

std::span<const PlanTile> TilePlan::tiles(std::int64_t q_block) const {
  check_index(q_block, num_q_blocks(), "q_block");
  const auto begin = static_cast<std::size_t>(row_offsets_[static_cast<std::size_t>(q_block)]);
  const auto end = static_cast<std::size_t>(row_offsets_[static_cast<std::size_t>(q_block) + 1]);
  return std::span<const PlanTile>(tiles_.data() + begin, end - begin);
}

TileKind TilePlan::kind(std::int64_t q_block, std::int64_t kv_block) const {
  check_index(kv_block, num_kv_blocks_, "kv_block");
  const std::span<const PlanTile> row = tiles(q_block);
  const auto it = std::lower_bound(
      row.begin(), row.end(), kv_block,
      [](const PlanTile& tile, std::int64_t block) { return tile.kv_block < block; });
  if (it == row.end() || it->kv_block != kv_block) return TileKind::kEmpty;
  return it->is_full() ? TileKind::kFull : TileKind::kPartial;
}

const std::uint64_t* TilePlan::partial_bits(std::int32_t id) const {
  check_index(id, stats_.distinct_partial, "partial id");
  return partial_bits_.data() +
         static_cast<std::size_t>(id) * static_cast<std::size_t>(blocks_.block_q * words_per_row_);
}

}  // namespace tilesplash
