// Sliding Tile Attention against its definition: both node types (the
// original order and the tile-major run order) and their plans against a
// brute-force scan of the predicate on ragged canvases with text before /
// after / none and windows below, at and beyond the tile counts; the
// tile-major order; full-or-empty plans when the tiles divide the canvas;
// exact counts; the density candidates; SPEC round trips; attention through
// the front door against the double-precision reference.
#include "tilesplash/sta.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "family_check.h"
#include "family_reference.h"
#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "support/targets.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/routing.h"

namespace tilesplash {
namespace {

struct StaCase {
  VideoGeometry geometry;
  StaOptions options;
};

std::vector<StaCase> sta_cases() {
  const std::vector<VideoGeometry> geometries = {
      {7, 5, 6, 0, TextPlacement::kNone},    // ragged in every dimension for 2x2x4 tiles
      {4, 3, 5, 6, TextPlacement::kBefore},  // text before
      {5, 4, 4, 3, TextPlacement::kAfter},   // text after
      {1, 2, 9, 0, TextPlacement::kNone},    // one frame
      {6, 4, 4, 0, TextPlacement::kNone},    // tiles divide the canvas
  };
  std::vector<StaCase> cases;
  for (const VideoGeometry& g : geometries) {
    for (const StaOptions& o :
         {StaOptions{{2, 2, 4}, {1, 1, 1}}, StaOptions{{2, 2, 4}, {3, 1, 2}},
          StaOptions{{3, 2, 2}, {2, 3, 5}}, StaOptions{{1, 1, 1}, {3, 3, 3}},
          StaOptions{{6, 8, 8}, {3, 3, 3}}, StaOptions{{2, 3, 2}, {9, 9, 1}}}) {
      cases.push_back({g, o});
    }
  }
  return cases;
}

TEST(Sta, OriginalOrderMaskMatchesTheDefinition) {
  for (const StaCase& c : sta_cases()) {
    const Mask mask = sta_mask(c.geometry, c.options);
    EXPECT_TRUE(mask.is_analytic());
    const test::RefSta ref(c.geometry, c.options.tile, c.options.window);
    test::audit_mask(
        mask, c.geometry.tokens(), [&](std::int64_t q, std::int64_t k) { return ref.keeps(q, k); },
        mask.to_string());
  }
}

TEST(Sta, TileMajorRunIsTheSameMaskPermuted) {
  for (const StaCase& c : sta_cases()) {
    const test::RefSta ref(c.geometry, c.options.tile, c.options.window);
    const RowOrder order = sta_tile_major_order(c.geometry, c.options);
    const std::vector<std::int64_t> expected = ref.tile_major();
    ASSERT_EQ(std::vector<std::int64_t>(order.sources().begin(), order.sources().end()), expected)
        << sta_mask(c.geometry, c.options).to_string();
    const MaskRun run = sta_run(c.geometry, c.options);
    EXPECT_EQ(run.order.name(), "tile-major");
    EXPECT_FALSE(run.extra.has_value());
    test::audit_mask(
        run.mask, c.geometry.tokens(),
        [&](std::int64_t r, std::int64_t s) {
          const std::int64_t n = c.geometry.tokens();
          if (r < 0 || s < 0 || r >= n || s >= n) return false;
          return ref.keeps(order.source(r), order.source(s));
        },
        run.mask.to_string());
    EXPECT_EQ(mask_run(sta_mask(c.geometry, c.options), c.geometry.tokens()).mask, run.mask);
  }
}

TEST(Sta, TilesThatDivideTheCanvasGiveOnlyFullOrEmptyTiles) {
  // 12 x 16 x 16 with 6 x 8 x 8 tiles (384 tokens); blocks of the tile and of
  // divisors of it; text after the video (and before it, which the run moves
  // behind the video).
  for (const TextPlacement at :
       {TextPlacement::kNone, TextPlacement::kAfter, TextPlacement::kBefore}) {
    const VideoGeometry g{12, 16, 16, at == TextPlacement::kNone ? 0 : 100, at};
    for (const StaOptions& o : {StaOptions{{6, 8, 8}, {1, 1, 1}}, StaOptions{{6, 8, 8}, {1, 2, 2}},
                                StaOptions{{6, 8, 8}, {3, 1, 3}}}) {
      const MaskRun run = sta_run(g, o);
      for (const BlockSizes blocks :
           {BlockSizes{384, 384}, BlockSizes{128, 128}, BlockSizes{192, 64}}) {
        const TilePlan plan = TilePlan::build(run.mask, g.tokens(), g.tokens(), blocks);
        EXPECT_EQ(plan.stats().partial, 0) << run.mask.to_string() << " " << blocks.block_q;
        EXPECT_EQ(plan.stats().kept_pairs, sta_kept_pairs(g, o));
        EXPECT_GT(plan.stats().empty, 0);
      }
      // On the original order a window narrower than the width cuts the
      // rows of a frame, so the same mask needs partial tiles.
      if (o.window[2] == 1) {
        EXPECT_GT(
            TilePlan::build(sta_mask(g, o), g.tokens(), g.tokens(), {128, 128}).stats().partial, 0);
      }
    }
  }
}

TEST(Sta, CountsAndDensityCandidates) {
  for (const StaCase& c : sta_cases()) {
    const test::RefSta ref(c.geometry, c.options.tile, c.options.window);
    std::int64_t kept = 0;
    const std::int64_t n = c.geometry.tokens();
    for (std::int64_t q = 0; q < n; ++q) {
      for (std::int64_t k = 0; k < n; ++k) kept += ref.keeps(q, k) ? 1 : 0;
    }
    EXPECT_EQ(sta_kept_pairs(c.geometry, c.options), kept);
  }
  const VideoGeometry wan = video_preset("wan2.1-1.3b-480p").geometry;
  EXPECT_EQ(sta_tile_counts(wan, {}), (std::array<std::int64_t, 3>{4, 4, 7}));
  for (const double target : {0.1, 0.25, 0.5}) {
    const std::vector<MaskCandidate> list = method_candidates("sta", wan, {target});
    ASSERT_EQ(list.size(), 3u);  // temporal windows 1, 3 and all 4 tiles
    EXPECT_EQ(list[0].name.substr(0, 6), "sta:1x");
    EXPECT_EQ(list[2].name.substr(0, 6), "sta:4x");
    for (const MaskCandidate& c : list) {
      EXPECT_NEAR(c.density, target, 0.5 * target) << c.name;
      EXPECT_EQ(c.run.order.name(), "tile-major");
      const StaMaskInfo info = *sta_mask_info(c.mask);
      EXPECT_DOUBLE_EQ(c.density, sta_density(wan, info.options));
    }
  }
  const std::vector<MaskCandidate> mix = method_candidates("mix", wan, {0.3});
  ASSERT_EQ(mix.size(), 6u);
  EXPECT_EQ(mix[0].name, "spatial");
  EXPECT_EQ(mix[1].name, "temporal");
  EXPECT_EQ(mix[2].name, "radial");
}

TEST(Sta, SpecRoundTripsAndErrors) {
  const std::vector<std::string> canonical = {
      "sta:frames=7,height=5,width=6,tile=6x8x8,window=3x3x3",
      "sta:frames=4,height=3,width=5,text=6,text_at=before,tile=2x2x4,window=1x2x9",
      "sta:frames=30,height=48,width=80,tile=6x8x8,window=5x6x10&dense",
  };
  for (const std::string& text : canonical) {
    const Mask mask = parse_mask_spec(text);
    EXPECT_EQ(mask.to_string(), text);
    EXPECT_EQ(parse_mask_spec(mask.to_string()), mask);
    EXPECT_EQ(parse_mask_spec(mask.to_string()).hash(), mask.hash());
  }
  EXPECT_EQ(parse_mask_spec("sta:preset=hunyuan-720p,window=3x3x3"),
            sta_mask(video_preset("hunyuan-720p").geometry, {{6, 8, 8}, {3, 3, 3}}));
  const std::vector<std::pair<std::string, std::string>> errors = {
      {"sta", "sta: expected ':' and parameters"},
      {"sta:frames=2,height=2,width=2", "missing 'window'"},
      {"sta:frames=2,height=2,width=2,window=3x3", "'window' must be three integers >= 1 as AxBxC"},
      {"sta:frames=2,height=2,width=2,window=3x0x3", "got '3x0x3'"},
      {"sta:frames=2,height=2,width=2,window=3x3x3x", "got '3x3x3x'"},
      {"sta:frames=2,height=2,width=2,tile=axbxc,window=1x1x1", "'tile' must be three integers"},
      {"sta:frames=2,height=2,width=2,window=1x1x1,sink", "unknown key 'sink'"},
  };
  for (const auto& [spec, message] : errors) {
    try {
      parse_mask_spec(spec);
      ADD_FAILURE() << "accepted " << spec;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos)
          << spec << " gave: " << e.what();
    }
  }
  EXPECT_THROW(sta_mask({2, 2, 2}, {{0, 1, 1}, {1, 1, 1}}), std::invalid_argument);
}

class StaPerTarget : public test::TargetTest {};

TEST_P(StaPerTarget, AttentionThroughTheFrontDoorEqualsTheReference) {
  for (const StaCase& c : {StaCase{{7, 5, 6, 9, TextPlacement::kBefore}, {{2, 2, 4}, {3, 1, 2}}},
                           StaCase{{6, 4, 8, 5, TextPlacement::kAfter}, {{3, 2, 4}, {1, 3, 1}}}}) {
    const VideoGeometry& g = c.geometry;
    const std::int64_t n = g.tokens(), heads = 2, d = 16;
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      test::HostTensor q(dtype, heads, n, d), k(dtype, heads, n, d), v(dtype, heads, n, d);
      q.fill_normal(21);
      k.fill_normal(22);
      v.fill_normal(23);
      const MaskCandidate candidate = sta_candidate(g, c.options);
      const std::vector<test::ReferenceHead> reference =
          test::reference_all_heads(candidate.mask, q, k, v, std::nullopt);
      VideoAttentionOptions options;
      options.candidates = {video_candidate(VideoMaskKind::kSpatial, g, 3), candidate};
      options.force = HeadMask(candidate.name);
      options.blocks = {16, 64};
      test::HostTensor out(DType::kF32, heads, n, d);
      out.fill_storage(7.0f);
      std::vector<float> lse(static_cast<std::size_t>(heads * n), 3.0f);
      const LayerReport report =
          VideoAttention(g, options)
              .forward({q.view(), k.view(), v.view(), out.mutable_view(), lse.data()});
      EXPECT_EQ(report.heads[1].choice, HeadMask(candidate.name));
      EXPECT_GT(report.heads[1].permute_seconds, 0.0);
      EXPECT_TRUE(test::matches_reference(reference, out, lse.data(),
                                          test::tolerance_for(dtype, DType::kF32), v.max_abs()))
          << candidate.mask.to_string();
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(StaPerTarget);

}  // namespace
}  // namespace tilesplash
