// The router's mask: a short query block made of the sampled rows repeated
// once per candidate mask. Row i of the block is original query
// rows[i % rows.size()] under sections[i / rows.size()], so one kernel call
// (one packing of K and V) gives every candidate's output for the samples.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tilesplash/mask.h"
#include "tilesplash/mask_node.h"

namespace tilesplash::detail {

class SampledRowsNode final : public MaskNode {
 public:
  // Throws std::invalid_argument on empty sections or rows.
  SampledRowsNode(std::vector<Mask> sections, std::vector<std::int64_t> rows);

  bool keeps(std::int64_t i, std::int64_t k) const override;
  // Exact: every row of the tile classified by its section's mask on that one
  // row (analytic for the video masks), so the cost is O(rows), not O(area).
  TileKind classify(IndexRange rows, IndexRange cols) const override;
  IndexRange kv_hull(IndexRange rows, std::int64_t kv_len) const override;
  void eval_row(std::int64_t i, std::int64_t k0, std::int64_t n, std::uint8_t* keep) const override;
  bool is_analytic() const override;
  std::string to_string() const override;
  std::size_t hash() const override;
  bool equals(const MaskNode& other) const override;

  std::int64_t block_rows() const {
    return static_cast<std::int64_t>(sections_.size() * rows_.size());
  }

 private:
  const Mask& section(std::int64_t i) const;
  std::int64_t row(std::int64_t i) const;

  std::vector<Mask> sections_;
  std::vector<std::int64_t> rows_;
};

}  // namespace tilesplash::detail
