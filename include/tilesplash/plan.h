// The tile plan: *which* tiles the kernel visits. Built once from a mask and
// the shapes (and reusable across heads, layers and denoising steps), it cuts
// the q_len x kv_len map into block_q x block_kv tiles and lists, per q-block,
// the tiles to visit in ascending kv order, each either full (the mask-free
// fast path) or partial (an id into a table of bit-packed masks in which
// identical tiles are stored once). Empty tiles are simply absent. This is JAX
// splash attention's MaskInfo, in CSR form.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "tilesplash/mask.h"

namespace tilesplash {

struct BlockSizes {
  std::int64_t block_q = 128;
  std::int64_t block_kv = 128;
  friend bool operator==(const BlockSizes&, const BlockSizes&) = default;
};

struct PlanStats {
  std::int64_t full = 0;              // tiles visited without a mask
  std::int64_t partial = 0;           // tiles visited with a bitmask
  std::int64_t empty = 0;             // tiles skipped
  std::int64_t distinct_partial = 0;  // entries in the deduplicated bitmask table
  std::int64_t kept_pairs = 0;        // exact count of kept in-range pairs
  double density = 0.0;               // kept_pairs / (q_len * kv_len)
  std::int64_t plan_bytes = 0;        // memory held by the plan
  double build_seconds = 0.0;
};

// One visited tile. partial_id < 0 marks a full tile.
struct PlanTile {
  std::uint32_t kv_block = 0;
  std::int32_t partial_id = -1;
  bool is_full() const { return partial_id < 0; }
};

class TilePlan {
 public:
  // Throws std::invalid_argument on lengths < 1 or block sizes < 1.
  static TilePlan build(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                        BlockSizes blocks);

  const Mask& mask() const { return mask_; }
  std::int64_t q_len() const { return q_len_; }
  std::int64_t kv_len() const { return kv_len_; }
  BlockSizes blocks() const { return blocks_; }
  std::int64_t num_q_blocks() const { return static_cast<std::int64_t>(row_offsets_.size()) - 1; }
  std::int64_t num_kv_blocks() const { return num_kv_blocks_; }

  // Rows / keys actually covered by a block (the last one may be ragged).
  IndexRange q_range(std::int64_t q_block) const;
  IndexRange kv_range(std::int64_t kv_block) const;

  // Visited tiles of one q-block, ascending kv_block.
  std::span<const PlanTile> tiles(std::int64_t q_block) const;
  TileKind kind(std::int64_t q_block, std::int64_t kv_block) const;

  // Bit-packed partial tile `id`: block_q rows of words_per_row() 64-bit words;
  // bit j of row r says whether (q0 + r, k0 + j) is kept. Bits outside the
  // in-range part of a ragged tile are 0.
  const std::uint64_t* partial_bits(std::int32_t id) const;
  std::int64_t words_per_row() const { return words_per_row_; }

  const PlanStats& stats() const { return stats_; }

  // The whole plan as flat arrays, views into the plan (no copy, valid while
  // it lives): what any backend reads (block_sparse.h splits them by kind).
  // Tiles of q-block i are all_tiles()[row_offsets()[i] .. row_offsets()[i + 1]).
  std::span<const std::int64_t> row_offsets() const { return row_offsets_; }  // num_q_blocks + 1
  std::span<const PlanTile> all_tiles() const { return tiles_; }
  // distinct_partial tiles of block_q x words_per_row() words, as partial_bits().
  std::span<const std::uint64_t> partial_table() const { return partial_bits_; }

 private:
  explicit TilePlan(Mask mask) : mask_(std::move(mask)) {}
  friend class PlanBuilder;

  Mask mask_;
  std::int64_t q_len_ = 0;
  std::int64_t kv_len_ = 0;
  BlockSizes blocks_{};
  std::int64_t num_kv_blocks_ = 0;
  std::int64_t words_per_row_ = 0;
  std::vector<std::int64_t> row_offsets_;  // num_q_blocks + 1
  std::vector<PlanTile> tiles_;
  std::vector<std::uint64_t> partial_bits_;  // distinct_partial * block_q * words_per_row
  PlanStats stats_{};
};

}  // namespace tilesplash
