// The plan's flat block-sparse arrays (block_sparse.h, the backend seam)
// against a brute-force classification of every tile of the mask: each tile
// is in the full list iff all its in-range pairs are kept, in the partial list
// iff some are, both lists ascending, and a partial tile's bitmask row equals
// keeps() pair by pair with zeros outside a ragged tile. Every mask family
// (core, Sparse VideoGen with text and sink, radial, sta, svg2 clusters in
// both orders, sequence windows), square and ragged lengths, several block
// sizes including FlexAttention's 128.
#include "tilesplash/block_sparse.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "family_reference.h"
#include "tilesplash/clusters.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/plan_window.h"
#include "tilesplash/radial.h"
#include "tilesplash/sta.h"
#include "tilesplash/video.h"

namespace tilesplash::test {
namespace {

// Keeps of the plan's own mask, pair by pair.
void expect_arrays_match_mask(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                              BlockSizes blocks, const std::string& what) {
  SCOPED_TRACE(what + " " + std::to_string(q_len) + "x" + std::to_string(kv_len) + " tiles " +
               std::to_string(blocks.block_q) + "x" + std::to_string(blocks.block_kv));
  const TilePlan plan = TilePlan::build(mask, q_len, kv_len, blocks);
  const BlockSparseArrays a = block_sparse_arrays(plan);
  ASSERT_EQ(a.num_q_blocks, (q_len + blocks.block_q - 1) / blocks.block_q);
  ASSERT_EQ(a.num_kv_blocks, (kv_len + blocks.block_kv - 1) / blocks.block_kv);
  ASSERT_EQ(a.words_per_row, (blocks.block_kv + 63) / 64);
  ASSERT_EQ(a.full_offsets.size(), static_cast<std::size_t>(a.num_q_blocks + 1));
  ASSERT_EQ(a.partial_offsets.size(), static_cast<std::size_t>(a.num_q_blocks + 1));
  ASSERT_EQ(a.partial_ids.size(), a.partial_indices.size());
  ASSERT_EQ(a.distinct_partial(), plan.stats().distinct_partial);
  // The table is the plan's memory, not a copy.
  EXPECT_EQ(a.bits.data(), plan.partial_table().data());
  std::int64_t full = 0, partial = 0, kept = 0;
  for (std::int64_t qb = 0; qb < a.num_q_blocks; ++qb) {
    const IndexRange rows{qb * blocks.block_q, std::min(q_len, (qb + 1) * blocks.block_q)};
    std::vector<TileKind> kinds(static_cast<std::size_t>(a.num_kv_blocks), TileKind::kEmpty);
    std::vector<std::int32_t> ids(static_cast<std::size_t>(a.num_kv_blocks), -1);
    for (std::int64_t j = a.full_offsets[qb]; j < a.full_offsets[qb + 1]; ++j) {
      if (j > a.full_offsets[qb]) {
        ASSERT_LT(a.full_indices[j - 1], a.full_indices[j]);
      }
      kinds[static_cast<std::size_t>(a.full_indices[j])] = TileKind::kFull;
    }
    for (std::int64_t j = a.partial_offsets[qb]; j < a.partial_offsets[qb + 1]; ++j) {
      if (j > a.partial_offsets[qb]) {
        ASSERT_LT(a.partial_indices[j - 1], a.partial_indices[j]);
      }
      const auto kb = static_cast<std::size_t>(a.partial_indices[j]);
      ASSERT_EQ(kinds[kb], TileKind::kEmpty) << "tile " << qb << "," << kb << " listed twice";
      kinds[kb] = TileKind::kPartial;
      ids[kb] = a.partial_ids[j];
      ASSERT_GE(ids[kb], 0);
      ASSERT_LT(ids[kb], a.distinct_partial());
    }
    for (std::int64_t kb = 0; kb < a.num_kv_blocks; ++kb) {
      const IndexRange cols{kb * blocks.block_kv, std::min(kv_len, (kb + 1) * blocks.block_kv)};
      const auto keeps = [&](std::int64_t q, std::int64_t k) { return mask.keeps(q, k); };
      const TileKind expected = brute_kind(keeps, rows, cols);
      ASSERT_EQ(kinds[static_cast<std::size_t>(kb)], expected) << "tile " << qb << "," << kb;
      if (expected == TileKind::kFull) {
        ++full;
        kept += rows.size() * cols.size();
      }
      if (expected != TileKind::kPartial) continue;
      ++partial;
      const std::uint64_t* tile = a.bits.data() + static_cast<std::size_t>(ids[kb]) *
                                                      static_cast<std::size_t>(blocks.block_q) *
                                                      static_cast<std::size_t>(a.words_per_row);
      for (std::int64_t r = 0; r < blocks.block_q; ++r) {
        for (std::int64_t c = 0; c < a.words_per_row * 64; ++c) {
          const bool bit = (tile[r * a.words_per_row + c / 64] >> (c % 64)) & 1U;
          const bool in_range = r < rows.size() && c < cols.size();
          const bool want = in_range && mask.keeps(rows.begin + r, cols.begin + c);
          ASSERT_EQ(bit, want) << "tile " << qb << "," << kb << " row " << r << " col " << c;
          kept += bit ? 1 : 0;
        }
      }
    }
  }
  EXPECT_EQ(full, plan.stats().full);
  EXPECT_EQ(partial, plan.stats().partial);
  EXPECT_EQ(kept, plan.stats().kept_pairs);
  EXPECT_EQ(static_cast<std::int64_t>(a.full_indices.size()), full);
  EXPECT_EQ(static_cast<std::int64_t>(a.partial_indices.size()), partial);
}

void expect_all_tilings(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                        const std::string& what) {
  for (const BlockSizes blocks : {BlockSizes{16, 16}, BlockSizes{32, 64}, BlockSizes{7, 70},
                                  BlockSizes{128, 128}, BlockSizes{64, 256}}) {
    expect_arrays_match_mask(mask, q_len, kv_len, blocks, what);
  }
}

TEST(BlockSparse, GoldenCausal) {
  // DESIGN's golden case: causal 64 x 64 in 16 x 16 tiles.
  const TilePlan plan = TilePlan::build(Mask::causal(), 64, 64, {16, 16});
  const BlockSparseArrays a = block_sparse_arrays(plan);
  EXPECT_EQ(a.full_offsets, (std::vector<std::int64_t>{0, 0, 1, 3, 6}));
  EXPECT_EQ(a.full_indices, (std::vector<std::int32_t>{0, 0, 1, 0, 1, 2}));
  EXPECT_EQ(a.partial_offsets, (std::vector<std::int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(a.partial_indices, (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(a.partial_ids, (std::vector<std::int32_t>{0, 0, 0, 0}));
  ASSERT_EQ(a.distinct_partial(), 1);
  for (int r = 0; r < 16; ++r) {
    // Row r of the lower triangle keeps keys 0..r.
    EXPECT_EQ(a.bits[static_cast<std::size_t>(r)], (std::uint64_t{2} << r) - 1) << r;
  }
}

TEST(BlockSparse, CoreMasksSquareAndRagged) {
  const std::vector<std::pair<Mask, std::string>> masks = {
      {Mask::dense(), "dense"},
      {Mask::causal(), "causal"},
      {Mask::causal(-37), "causal:offset=-37"},
      {Mask::causal(90), "causal:offset=90"},
      {Mask::local(20, 5), "local 20,5"},
      {Mask::local(std::nullopt, 3, 10), "local right 3 offset 10"},
      {Mask::chunked_causal(23), "chunked 23"},
      {Mask::random(0.3, 7), "random"},
      {Mask::local(8, 8) | Mask::causal(-100), "local | causal"},
      {Mask::local(40, 40) & Mask::causal(), "local & causal"},
      {Mask::function([](std::int64_t q, std::int64_t k) { return (q ^ k) % 5 == 0; }, "xor"),
       "function"},
  };
  for (const auto& [mask, name] : masks) {
    expect_all_tilings(mask, 200, 200, name);
    expect_all_tilings(mask, 131, 277, name + " ragged");
    expect_all_tilings(mask, 301, 97, name + " ragged tall");
  }
}

TEST(BlockSparse, VideoFamilies) {
  for (const TextPlacement text :
       {TextPlacement::kNone, TextPlacement::kBefore, TextPlacement::kAfter}) {
    const VideoGeometry g{5, 6, 7, text == TextPlacement::kNone ? 0 : 19, text};
    const std::int64_t n = g.tokens();
    for (const bool sink : {false, true}) {
      for (const VideoMaskKind kind : {VideoMaskKind::kSpatial, VideoMaskKind::kTemporal}) {
        const Mask mask = video_mask(kind, g, 30, {sink, true});
        expect_all_tilings(mask, n, n, mask.to_string());
      }
    }
    const Mask radial = radial_mask(g, {.decay = 0.3, .block = 16, .sink = true});
    expect_all_tilings(radial, n, n, radial.to_string());
  }
  const VideoGeometry g{6, 8, 8, 0, TextPlacement::kNone};
  const StaOptions sta{{3, 4, 4}, {3, 3, 3}};
  expect_all_tilings(sta_mask(g, sta), g.tokens(), g.tokens(), "sta");
  expect_all_tilings(sta_run_mask(g, sta), g.tokens(), g.tokens(), "sta run order");
}

TEST(BlockSparse, ClusterMasksInBothOrders) {
  const VideoGeometry g{4, 6, 6, 12, TextPlacement::kAfter};
  const std::int64_t video = g.video_tokens();
  std::mt19937_64 rng(5);
  HeadClusters clusters;
  for (auto* part : {&clusters.query, &clusters.key}) {
    part->clusters = 9;
    part->dim = 4;
    part->centroids.assign(36, 0.0f);
    part->sizes.assign(9, 0);
    for (std::int64_t u = 0; u < video; ++u) {
      const auto label = static_cast<std::int32_t>(u < 9 ? u : rng() % 9);
      part->labels.push_back(label);
      ++part->sizes[static_cast<std::size_t>(label)];
    }
    std::shuffle(part->labels.begin(), part->labels.end(), rng);
  }
  std::vector<std::uint8_t> kept(81);
  for (auto& pair : kept) pair = rng() % 3 == 0 ? 1 : 0;
  const ClusterMasks masks = cluster_masks(g, clusters, kept);
  expect_all_tilings(masks.mask, g.tokens(), g.tokens(), "svg2 original order");
  expect_all_tilings(masks.run.mask, g.tokens(), g.tokens(), "svg2 run order");
}

TEST(BlockSparse, SequenceWindows) {
  const Mask global = Mask::local(50, 50) | Mask::causal(-300);
  for (const MaskWindow window :
       {MaskWindow{{100, 230}, {0, 400}, 400, 400}, MaskWindow{{333, 400}, {120, 201}, 400, 400}}) {
    expect_all_tilings(window_mask(global, window), window.q.size(), window.kv.size(), "window");
  }
}

TEST(BlockSparse, RefusesMoreKvBlocksThanInt32Indexes) {
  // 2^31 single-key blocks: a plan can index them, int32 consumers cannot.
  const std::int64_t kv_len = std::int64_t{1} << 31;
  const TilePlan plan = TilePlan::build(Mask::local(0, 0), 1, kv_len, {1, 1});
  EXPECT_THROW(block_sparse_arrays(plan), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash::test
