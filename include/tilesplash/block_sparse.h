// The plan as flat block-sparse arrays: the seam between tilesplash's plans
// and any compute backend that takes block lists rather than a TilePlan
// (PyTorch FlexAttention's BlockMask, FlashInfer's block-sparse wrappers,
// JAX Splash's MaskInfo, a GPU kernel of our own). Per q-block, in CSR form:
// the kv-block indices of its full tiles and of its partial tiles, each
// ascending, each partial tile's id in the plan's deduplicated bitmask table,
// and that table itself (a view, not a copy). Empty tiles are absent. A
// backend that needs padded [q_blocks, kv_blocks] index arrays (FlexAttention)
// pads these; one that needs tile kinds reads them off the two lists.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tilesplash/plan.h"

namespace tilesplash {

struct BlockSparseArrays {
  std::int64_t q_len = 0;
  std::int64_t kv_len = 0;
  std::int64_t block_q = 0;
  std::int64_t block_kv = 0;
  std::int64_t num_q_blocks = 0;
  std::int64_t num_kv_blocks = 0;
  std::int64_t words_per_row = 0;  // 64-bit words per bitmask row: ceil(block_kv / 64)

  // Full tiles (no mask work) of q-block i: full_indices[full_offsets[i] ..
  // full_offsets[i + 1]), ascending kv-block indices.
  std::vector<std::int64_t> full_offsets;  // num_q_blocks + 1
  std::vector<std::int32_t> full_indices;
  // Partial tiles likewise; partial_ids[j] is partial_indices[j]'s tile in `bits`.
  std::vector<std::int64_t> partial_offsets;  // num_q_blocks + 1
  std::vector<std::int32_t> partial_indices;
  std::vector<std::int32_t> partial_ids;
  // The plan's bitmask table, [distinct_partial][block_q][words_per_row]: bit
  // j of word w of row r keeps (q0 + r, k0 + 64 w + j); zero outside a ragged
  // tile's in-range part. A view into the plan: valid while the plan lives.
  std::span<const std::uint64_t> bits;

  std::int64_t distinct_partial() const {
    const std::int64_t tile_words = block_q * words_per_row;
    return tile_words > 0 ? static_cast<std::int64_t>(bits.size()) / tile_words : 0;
  }
};

// The plan's tiles split by kind. O(visited tiles); the bitmask table is shared.
BlockSparseArrays block_sparse_arrays(const TilePlan& plan);

}  // namespace tilesplash
