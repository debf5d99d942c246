// A plan's rows as key intervals (row_intervals.h) against keeps() pair by
// pair: every in-range pair is kept iff it lies in one of its row's
// intervals, intervals are ascending, disjoint and not touching, unused ones
// are [0, 0), and a row with more runs than allowed gives nullopt. Masks
// whose rows are few runs (dense, causal, local, chunked, key ranges, a band
// with a sink and text), square and ragged lengths, several block sizes.
#include "tilesplash/row_intervals.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tilesplash/video.h"

namespace tilesplash::test {
namespace {

void expect_rows_match(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks,
                       std::int64_t count, const std::string& what) {
  SCOPED_TRACE(what + " " + std::to_string(q_len) + "x" + std::to_string(kv_len) + " tiles " +
               std::to_string(blocks.block_q) + "x" + std::to_string(blocks.block_kv));
  const TilePlan plan = TilePlan::build(mask, q_len, kv_len, blocks);
  const std::optional<RowIntervals> rows = row_intervals(plan, count);
  ASSERT_TRUE(rows.has_value());
  ASSERT_EQ(rows->starts.size(), static_cast<std::size_t>(count * q_len));
  for (std::int64_t q = 0; q < q_len; ++q) {
    std::int64_t previous_end = -1;
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t start = rows->starts[i * q_len + q], end = rows->ends[i * q_len + q];
      if (start == end) {
        EXPECT_EQ(start, 0) << "q " << q << " unused interval " << i;
        continue;
      }
      EXPECT_LT(start, end);
      EXPECT_GT(start, previous_end) << "q " << q << ": intervals must not touch or overlap";
      previous_end = end;
    }
    for (std::int64_t k = 0; k < kv_len; ++k) {
      bool inside = false;
      for (std::int64_t i = 0; i < count; ++i) {
        inside |= rows->starts[i * q_len + q] <= k && k < rows->ends[i * q_len + q];
      }
      ASSERT_EQ(inside, mask.keeps(q, k)) << "q " << q << " k " << k;
    }
  }
}

TEST(RowIntervals, EveryPairOfFewRunMasks) {
  const VideoGeometry geometry{5, 6, 7, 11, TextPlacement::kAfter};
  const std::vector<std::pair<Mask, std::string>> masks = {
      {Mask::dense(), "dense"},
      {Mask::causal(), "causal"},
      {Mask::causal(-37), "causal:offset=-37"},
      {Mask::local(20, 5), "local 20,5"},
      {Mask::local(std::nullopt, 3, 10), "local right 3 offset 10"},
      {Mask::chunked_causal(23), "chunked 23"},
      {Mask::local(8, 8) & Mask::key_range(0, 90), "local & keys"},
      {Mask::local(4, 4) | Mask::causal(-100), "local | causal"},
  };
  const std::array<BlockSizes, 4> block_sizes = {BlockSizes{16, 16}, BlockSizes{32, 64},
                                                 BlockSizes{128, 128}, BlockSizes{7, 9}};
  for (const auto& [mask, what] : masks) {
    for (const BlockSizes blocks : block_sizes) {
      expect_rows_match(mask, 131, 131, blocks, 4, what);
      expect_rows_match(mask, 97, 150, blocks, 4, what);
    }
  }
  const std::int64_t tokens = geometry.tokens();
  const Mask spatial = spatial_mask(geometry, 30, {.sink = true, .text_full = true});
  for (const BlockSizes blocks : block_sizes) {
    expect_rows_match(spatial, tokens, tokens, blocks, 4, "spatial + sink + text");
  }
}

TEST(RowIntervals, TooManyRunsGiveNullopt) {
  const Mask stripes = Mask::local(0, 0, -40) | Mask::local(0, 0, -20) | Mask::local(0, 0, 0) |
                       Mask::local(0, 0, 20) | Mask::local(0, 0, 40);
  const TilePlan plan = TilePlan::build(stripes, 100, 100, {32, 32});
  EXPECT_FALSE(row_intervals(plan, 4).has_value());
  EXPECT_TRUE(row_intervals(plan, 5).has_value());
  EXPECT_FALSE(row_intervals(TilePlan::build(Mask::random(0.3, 7), 64, 64, {16, 16}), 4));
  EXPECT_THROW(row_intervals(plan, 0), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash::test
