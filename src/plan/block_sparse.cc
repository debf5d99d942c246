// Splits a plan's CSR tile list by kind; see tilesplash/block_sparse.h.
#include "tilesplash/block_sparse.h"

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>

namespace tilesplash {

BlockSparseArrays block_sparse_arrays(const TilePlan& plan) {
  // Block-sparse consumers index kv blocks with int32 (FlexAttention, FlashInfer).
  if (plan.num_kv_blocks() > std::numeric_limits<std::int32_t>::max()) {
    throw std::invalid_argument(
        "block_sparse_arrays: the plan has " + std::to_string(plan.num_kv_blocks()) +
        " kv blocks; int32 indices allow at most 2^31 - 1 (raise block_kv)");
  }
  BlockSparseArrays out;
  out.q_len = plan.q_len();
  out.kv_len = plan.kv_len();
  out.block_q = plan.blocks().block_q;
  out.block_kv = plan.blocks().block_kv;
  out.num_q_blocks = plan.num_q_blocks();
  out.num_kv_blocks = plan.num_kv_blocks();
  out.words_per_row = plan.words_per_row();
  out.bits = plan.partial_table();

  const PlanStats& stats = plan.stats();
  const auto rows = static_cast<std::size_t>(out.num_q_blocks);
  out.full_offsets.reserve(rows + 1);
  out.partial_offsets.reserve(rows + 1);
  out.full_indices.reserve(static_cast<std::size_t>(stats.full));
  out.partial_indices.reserve(static_cast<std::size_t>(stats.partial));
  out.partial_ids.reserve(static_cast<std::size_t>(stats.partial));
  out.full_offsets.push_back(0);
  out.partial_offsets.push_back(0);
  for (std::int64_t q_block = 0; q_block < out.num_q_blocks; ++q_block) {
    // Tiles are stored in ascending kv order, so each list comes out ascending.
    for (const PlanTile& tile : plan.tiles(q_block)) {
      const auto index = static_cast<std::int32_t>(tile.kv_block);
      if (tile.is_full()) {
        out.full_indices.push_back(index);
      } else {
        out.partial_indices.push_back(index);
        out.partial_ids.push_back(tile.partial_id);
      }
    }
    out.full_offsets.push_back(static_cast<std::int64_t>(out.full_indices.size()));
    out.partial_offsets.push_back(static_cast<std::int64_t>(out.partial_indices.size()));
  }
  return out;
}

}  // namespace tilesplash
