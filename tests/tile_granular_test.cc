// Tile-granular masks (tile_granular.h) against brute force: for many mask
// families, ragged lengths and tile sizes, the rounded mask keeps exactly the
// pairs of the tiles in which the exact mask keeps a pair (found by scanning
// keeps()); round_out() of a plan has the same tiles, all full, and equals
// the plan built from the rounded mask; every query of the node (keeps,
// classify of arbitrary ranges, eval_row, kv_hull) agrees with that scan;
// granularity names parse and bad ones are refused by name.
#include "tilesplash/tile_granular.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace {

struct Case {
  Mask mask;
  std::int64_t q_len;
  std::int64_t kv_len;
};

std::vector<Case> cases() {
  const VideoGeometry g{3, 4, 5, 0, TextPlacement::kNone};      // 60 tokens
  const VideoGeometry text{2, 3, 4, 7, TextPlacement::kAfter};  // 31 tokens
  return {
      {Mask::dense(), 37, 29},
      {Mask::causal(), 41, 41},
      {Mask::causal(-9), 41, 33},
      {Mask::local(3, 7), 45, 50},
      {Mask::local(std::nullopt, 4, 2), 23, 61},
      {Mask::chunked_causal(6), 40, 40},
      {Mask::random(0.02, 7), 39, 44},
      {Mask::key_range(5, 17), 30, 26},
      {Mask::function([](std::int64_t q, std::int64_t k) { return (q * 7 + k * 3) % 23 == 0; },
                      "sparse"),
       33, 35},
      {spatial_mask(g, 6, {true, false}), 60, 60},
      {temporal_mask(g, 4), 60, 60},
      {spatial_mask(text, 3, {false, true}), 31, 31},
  };
}

const std::vector<BlockSizes> kTiles = {{8, 8}, {16, 8}, {5, 7}, {64, 64}, {1, 3}};

// The rounded kept set by brute force: a tile is kept when keeps() holds for
// some in-range pair of it.
std::vector<std::uint8_t> reference(const Case& c, BlockSizes t) {
  const std::int64_t qt = (c.q_len - 1) / t.block_q + 1, kt = (c.kv_len - 1) / t.block_kv + 1;
  std::vector<std::uint8_t> tile(static_cast<std::size_t>(qt * kt), 0);
  for (std::int64_t q = 0; q < c.q_len; ++q) {
    for (std::int64_t k = 0; k < c.kv_len; ++k) {
      if (c.mask.keeps(q, k))
        tile[static_cast<std::size_t>(q / t.block_q * kt + k / t.block_kv)] = 1;
    }
  }
  std::vector<std::uint8_t> kept(static_cast<std::size_t>(c.q_len * c.kv_len));
  for (std::int64_t q = 0; q < c.q_len; ++q) {
    for (std::int64_t k = 0; k < c.kv_len; ++k) {
      kept[static_cast<std::size_t>(q * c.kv_len + k)] =
          tile[static_cast<std::size_t>(q / t.block_q * kt + k / t.block_kv)];
    }
  }
  return kept;
}

TileKind scan_kind(const std::vector<std::uint8_t>& kept, std::int64_t kv_len, std::int64_t q_len,
                   IndexRange rows, IndexRange cols) {
  bool any = false, all = true;
  for (std::int64_t q = rows.begin; q < rows.end; ++q) {
    for (std::int64_t k = cols.begin; k < cols.end; ++k) {
      const bool in = q >= 0 && q < q_len && k >= 0 && k < kv_len &&
                      kept[static_cast<std::size_t>(q * kv_len + k)] != 0;
      any = any || in;
      all = all && in;
    }
  }
  return !any ? TileKind::kEmpty : (all ? TileKind::kFull : TileKind::kPartial);
}

TEST(TileGranular, KeepsExactlyThePairsOfKeptTiles) {
  for (const Case& c : cases()) {
    for (const BlockSizes t : kTiles) {
      SCOPED_TRACE(c.mask.to_string() + " tiles " + std::to_string(t.block_q) + "x" +
                   std::to_string(t.block_kv));
      const Mask rounded = tile_granular_mask(c.mask, c.q_len, c.kv_len, t);
      const std::vector<std::uint8_t> kept = reference(c, t);
      std::vector<std::uint8_t> row(static_cast<std::size_t>(c.kv_len + 6));
      for (std::int64_t q = -1; q <= c.q_len; ++q) {
        rounded.eval_row(q, -3, c.kv_len + 6, row.data());
        for (std::int64_t k = -3; k < c.kv_len + 3; ++k) {
          const bool in = q >= 0 && q < c.q_len && k >= 0 && k < c.kv_len &&
                          kept[static_cast<std::size_t>(q * c.kv_len + k)] != 0;
          ASSERT_EQ(rounded.keeps(q, k), in) << q << "," << k;
          ASSERT_EQ(row[static_cast<std::size_t>(k + 3)] != 0, in) << q << "," << k;
        }
      }
      // classify of arbitrary ranges, and kv_hull containing every kept key.
      std::mt19937_64 rng(42);
      for (int i = 0; i < 200; ++i) {
        std::uniform_int_distribution<std::int64_t> qd(-2, c.q_len + 1), kd(-2, c.kv_len + 1);
        std::int64_t q0 = qd(rng), q1 = qd(rng), k0 = kd(rng), k1 = kd(rng);
        if (q0 > q1) std::swap(q0, q1);
        if (k0 > k1) std::swap(k0, k1);
        if (q0 == q1 || k0 == k1) continue;
        ASSERT_EQ(rounded.classify({q0, q1}, {k0, k1}),
                  scan_kind(kept, c.kv_len, c.q_len, {q0, q1}, {k0, k1}))
            << q0 << ":" << q1 << " x " << k0 << ":" << k1;
        const IndexRange hull = rounded.kv_hull({q0, q1}, c.kv_len);
        for (std::int64_t q = std::max<std::int64_t>(q0, 0); q < std::min(q1, c.q_len); ++q) {
          for (std::int64_t k = 0; k < c.kv_len; ++k) {
            if (kept[static_cast<std::size_t>(q * c.kv_len + k)] != 0) {
              ASSERT_TRUE(k >= hull.begin && k < hull.end) << q << "," << k;
            }
          }
        }
      }
    }
  }
}

TEST(TileGranular, RoundOutMakesEveryPartialTileFull) {
  for (const Case& c : cases()) {
    for (const BlockSizes t : kTiles) {
      SCOPED_TRACE(c.mask.to_string());
      const TilePlan exact = TilePlan::build(c.mask, c.q_len, c.kv_len, t);
      const TilePlan rounded = round_out(exact);
      const TilePlan built =
          TilePlan::build(tile_granular_mask(c.mask, c.q_len, c.kv_len, t), c.q_len, c.kv_len, t);
      EXPECT_EQ(rounded.mask(), tile_granular_mask(c.mask, c.q_len, c.kv_len, t));
      EXPECT_EQ(rounded.stats().partial, 0);
      EXPECT_EQ(rounded.stats().distinct_partial, 0);
      EXPECT_EQ(rounded.stats().full, exact.stats().full + exact.stats().partial);
      EXPECT_EQ(rounded.stats().empty, exact.stats().empty);
      EXPECT_GE(rounded.stats().kept_pairs, exact.stats().kept_pairs);
      EXPECT_TRUE(rounded.partial_table().empty());
      for (const TilePlan* p : {&rounded, &built}) {
        ASSERT_EQ(p->num_q_blocks(), exact.num_q_blocks());
        EXPECT_EQ(p->stats().kept_pairs, rounded.stats().kept_pairs);
        EXPECT_EQ(p->stats().partial, 0);
        for (std::int64_t qb = 0; qb < exact.num_q_blocks(); ++qb) {
          const auto a = exact.tiles(qb), b = p->tiles(qb);
          ASSERT_EQ(a.size(), b.size());
          for (std::size_t i = 0; i < a.size(); ++i) {
            EXPECT_EQ(a[i].kv_block, b[i].kv_block);
            EXPECT_TRUE(b[i].is_full());
          }
        }
      }
      const std::vector<std::uint8_t> kept = reference(c, t);
      std::int64_t count = 0;
      for (const std::uint8_t x : kept) count += x;
      EXPECT_EQ(rounded.stats().kept_pairs, count);
    }
  }
}

TEST(TileGranular, MaskComparesHashesAndChecksLengths) {
  const Mask a = tile_granular_mask(Mask::causal(), 40, 40, {8, 8});
  EXPECT_EQ(a, tile_granular_mask(Mask::causal(), 40, 40, {8, 8}));
  EXPECT_EQ(a.hash(), tile_granular_mask(Mask::causal(), 40, 40, {8, 8}).hash());
  EXPECT_NE(a, tile_granular_mask(Mask::causal(), 40, 40, {8, 16}));
  EXPECT_NE(a, tile_granular_mask(Mask::causal(), 40, 41, {8, 8}));
  EXPECT_NE(a, Mask::causal());
  EXPECT_NE(a.to_string().find("tiles(block_q=8,block_kv=8,of=40x40):"), std::string::npos);
  EXPECT_THROW(TilePlan::build(a, 40, 41, {8, 8}), std::invalid_argument);
  EXPECT_THROW(tile_granular_mask(Mask::causal(), 0, 4, {8, 8}), std::invalid_argument);
  EXPECT_THROW(tile_granular_mask(Mask::causal(), 4, 4, {8, 0}), std::invalid_argument);
  // The wrapped mask's own length check runs.
  const VideoGeometry g{2, 2, 2, 0, TextPlacement::kNone};
  EXPECT_THROW(tile_granular_mask(spatial_mask(g, 1), 9, 9, {4, 4}), std::invalid_argument);
  EXPECT_EQ(mask_at_granularity(Mask::causal(), 40, 40, {8, 8}, Granularity::kToken),
            Mask::causal());
  EXPECT_EQ(mask_at_granularity(Mask::causal(), 40, 40, {8, 8}, Granularity::kTile), a);
}

TEST(TileGranular, SegmentMinusDropsWhatTheBandKeeps) {
  // A sink-like segment of every 3rd key from 1 against a rounded band.
  const std::int64_t n = 50, first = 1, stride = 3, count = 16;
  const Mask band = tile_granular_mask(Mask::local(4, 4), n, n, {8, 8});
  const Mask segment =
      Mask::function([](std::int64_t q, std::int64_t j) { return (q + j) % 4 != 0; }, "segment");
  const Mask minus = segment_minus(segment, band, first, stride);
  for (const BlockSizes t : kTiles) {
    const TilePlan plan = TilePlan::build(minus, n, count, t);
    for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
      for (std::int64_t kb = 0; kb < plan.num_kv_blocks(); ++kb) {
        const IndexRange rows = plan.q_range(qb), cols = plan.kv_range(kb);
        bool any = false, all = true;
        for (std::int64_t q = rows.begin; q < rows.end; ++q) {
          for (std::int64_t j = cols.begin; j < cols.end; ++j) {
            const bool kept = segment.keeps(q, j) && !band.keeps(q, first + j * stride);
            ASSERT_EQ(minus.keeps(q, j), kept);
            any = any || kept;
            all = all && kept;
          }
        }
        ASSERT_EQ(plan.kind(qb, kb),
                  !any ? TileKind::kEmpty : (all ? TileKind::kFull : TileKind::kPartial));
      }
    }
  }
  EXPECT_THROW(segment_minus(segment, band, -1, 1), std::invalid_argument);
  EXPECT_THROW(segment_minus(segment, band, 0, 0), std::invalid_argument);
}

TEST(TileGranular, GranularityNames) {
  EXPECT_EQ(parse_granularity("token"), Granularity::kToken);
  EXPECT_EQ(parse_granularity("tile"), Granularity::kTile);
  EXPECT_EQ(to_string(Granularity::kToken), "token");
  EXPECT_EQ(to_string(Granularity::kTile), "tile");
  try {
    parse_granularity("tiles");
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "granularity: expected 'token' or 'tile', got 'tiles'");
  }
}

}  // namespace
}  // namespace tilesplash
