// Timing a tile size on part of a long sequence. The kernel's unit of work is
// one (head, q-block) item, so a plan that keeps only some q-blocks of the
// real plan -- the same tiles, the same partial bitmasks, every other q-block
// empty -- costs exactly those items plus the per-call work outside the tiles
// (K/V packing, loading and writing every row), which does not depend on
// which q-blocks are sampled. The tuner picks the q-blocks stratified by
// their visited work, so the sample spans the cost spectrum (the clipped
// ends of a band as well as its body), and scales the tile time by the ratio
// of visited pairs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilesplash/mask.h"
#include "tilesplash/mask_node.h"
#include "tilesplash/plan.h"

namespace tilesplash::tuning {

// `inner` restricted to the rows of the selected q-blocks of size block_q:
// keeps (q, k) when q / block_q is selected and inner keeps (q, k). Tiles of a
// plan with the same block_q are classified by `inner` or are empty, so the
// node is analytic whenever `inner` is.
class SampledBlocksNode final : public detail::MaskNode {
 public:
  // Throws std::invalid_argument on block_q < 1 or a negative block index.
  SampledBlocksNode(Mask inner, std::int64_t block_q, const std::vector<std::int64_t>& blocks);

  bool keeps(std::int64_t q, std::int64_t k) const override;
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t q, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  bool is_analytic() const override { return inner_.is_analytic(); }
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

 private:
  bool selected_row(std::int64_t q) const;
  // 0: no row of `rows` selected, 1: some, 2: all.
  int coverage(IndexRange rows) const;

  Mask inner_;
  std::int64_t block_q_;
  std::vector<bool> selected_;  // per q-block
};

// In-range pairs of the visited tiles of each q-block of `plan`.
std::vector<std::int64_t> visited_pairs_per_block(const TilePlan& plan);

// `count` q-blocks (ascending indices) stratified by `work`: the blocks sorted
// by work (ties by index) are cut into `count` equal strata and the middle
// block of each is taken. All blocks when count >= work.size().
std::vector<std::int64_t> stratified_blocks(const std::vector<std::int64_t>& work,
                                            std::int64_t count);

// The plan of `full.mask()` over the same shape and blocks with only the
// given q-blocks kept (none: a plan with no tiles, whose run costs only the
// per-call work outside the tiles).
TilePlan sampled_plan(const TilePlan& full, const std::vector<std::int64_t>& blocks);

}  // namespace tilesplash::tuning
