// What video masks run as (video_plan.h): the temporal and sta
// substitutions and their fields, radial's block vote, the preset band the tuner times, and the
// tiles a video layer asks choose_blocks() for.
#include "tilesplash/video_plan.h"

#include <gtest/gtest.h>

#include <optional>
#include <stdexcept>
#include <string>
#include <variant>

#include "tilesplash/radial.h"
#include "tilesplash/sta.h"

namespace tilesplash {
namespace {

std::vector<std::string> keys(const MaskPlan& plan) {
  std::vector<std::string> result;
  for (const auto& field : plan_fields(plan)) result.push_back(field.first);
  return result;
}

TEST(VideoPlan, OtherMasksPlanThemselves) {
  const MaskPlan plan = plan_mask(Mask::causal(), 64, 64, {16, 16});
  EXPECT_FALSE(plan.temporal);
  EXPECT_EQ(plan.plan->mask(), Mask::causal());
  const std::vector<std::string> expected = {
      "mask",      "q_len",      "kv_len",       "block_q", "block_kv",         "q_blocks",
      "kv_blocks", "full",       "partial",      "empty",   "distinct_partial", "kept_pairs",
      "density",   "plan_bytes", "build_seconds"};
  EXPECT_EQ(keys(plan), expected);
}

TEST(VideoPlan, TemporalPlansItsTokenMajorBandAndSink) {
  const VideoGeometry g{6, 5, 7, 13, TextPlacement::kAfter};
  const Mask mask = temporal_mask(g, 20, {true, true});
  PlanCache plans;
  const MaskPlan plan = plan_mask(mask, g.tokens(), g.tokens(), {16, 64}, &plans);
  ASSERT_TRUE(plan.temporal);
  EXPECT_EQ(plan.temporal->order, TokenOrder::kTokenMajor);
  EXPECT_EQ(plan.plan->mask(), video_band_mask(g, 20, {false, true}));
  ASSERT_TRUE(plan.temporal->sink);
  EXPECT_EQ(plan.plan->stats().kept_pairs + plan.temporal->sink->kept_pairs,
            plan.temporal->mask_kept_pairs);
  EXPECT_EQ(plans.stats().size, 2);  // band and sink
  const auto fields = plan_fields(plan);
  EXPECT_EQ(std::get<std::string>(fields[15].second), "token-major");
  EXPECT_EQ(fields.back().first, "mask_density");
  EXPECT_THROW(plan_mask(mask, g.tokens() - 1, g.tokens(), {16, 64}), std::invalid_argument);
}

std::optional<FieldValue> field(const MaskPlan& plan, const std::string& name) {
  for (const auto& [key, value] : plan_fields(plan)) {
    if (key == name) return value;
  }
  return std::nullopt;
}

TEST(VideoPlan, StaPlansItsTileMajorMask) {
  // 6 x 8 x 8 in tiles of 3 x 4 x 4 (tiles of 48 tokens), text after.
  const VideoGeometry g{6, 8, 8, 20, TextPlacement::kAfter};
  const StaOptions options{{3, 4, 4}, {1, 1, 1}};
  const Mask mask = sta_mask(g, options);
  const MaskPlan plan = plan_mask(mask, g.tokens(), g.tokens(), {48, 48});
  EXPECT_FALSE(plan.temporal);
  ASSERT_TRUE(plan.sta);
  EXPECT_EQ(plan.sta->order, "tile-major");
  EXPECT_EQ(plan.plan->mask(), sta_run_mask(g, options));
  EXPECT_EQ(plan.sta->run_mask, sta_run_mask(g, options));
  // The run order only moves rows: the plan keeps exactly the mask's pairs.
  EXPECT_EQ(plan.plan->stats().kept_pairs, sta_kept_pairs(g, options));
  EXPECT_EQ(plan.sta->mask_kept_pairs, sta_kept_pairs(g, options));
  EXPECT_DOUBLE_EQ(plan.sta->mask_density, sta_density(g, options));
  // Blocks of one tile: video tiles are full or empty, the text block (kept
  // whole) full.
  EXPECT_EQ(plan.plan->stats().partial, 0);
  EXPECT_EQ(std::get<std::string>(*field(plan, "plan_order")), "tile-major");
  EXPECT_EQ(std::get<std::string>(*field(plan, "plan_mask")), sta_run_mask(g, options).to_string());
  EXPECT_EQ(plan_fields(plan).back().first, "mask_density");
  EXPECT_FALSE(field(plan, "sink_kv_len"));
  EXPECT_THROW(plan_mask(mask, g.tokens() - 1, g.tokens() - 1, {48, 48}), std::invalid_argument);
}

TEST(VideoPlan, RadialAddsItsBlockVoteAndPlansItself) {
  const VideoGeometry g{9, 4, 6, 0, TextPlacement::kNone};
  const RadialOptions options{0.2, 8, true};
  const Mask mask = radial_mask(g, options);
  const MaskPlan plan = plan_mask(mask, g.tokens(), g.tokens(), {16, 64});
  EXPECT_FALSE(plan.temporal);
  EXPECT_FALSE(plan.sta);
  EXPECT_EQ(plan.plan->mask(), mask);
  EXPECT_EQ(plan.plan->stats().kept_pairs, radial_kept_pairs(g, options));
  ASSERT_TRUE(plan.block_vote_density);
  EXPECT_DOUBLE_EQ(*plan.block_vote_density, radial_block_density(g, options));
  EXPECT_DOUBLE_EQ(std::get<double>(*field(plan, "block_vote_density")),
                   radial_block_density(g, options));
  EXPECT_EQ(plan_fields(plan)[15].first, "block_vote_density");
}

TEST(VideoPlan, PresetBandIsTheSpatialBandWithText) {
  const VideoPreset& hunyuan = video_preset("hunyuan-720p");
  const PresetBand band = preset_band(hunyuan, 0.25);
  EXPECT_EQ(band.tokens, hunyuan.geometry.tokens());
  EXPECT_EQ(band.band,
            band_for_density(hunyuan.geometry, 0.25, {false, true}, VideoMaskKind::kSpatial));
  EXPECT_EQ(band.mask, video_band_mask(hunyuan.geometry, band.band, {false, true}));
}

TEST(VideoPlan, VideoBlocksAskAboutTheSameMaskTheTunerStores) {
  const VideoGeometry wan = video_preset("wan2.1-1.3b-480p").geometry;
  const PresetBand band = preset_band(video_preset("wan2.1-1.3b-480p"), 0.25);
  // text_full without text and the sink segment do not change the tuning key.
  const BlockChoice video = choose_video_blocks(wan, band.band, {true, true}, 128, DType::kBF16, 2);
  const BlockChoice tuned =
      choose_blocks(band.mask, band.tokens, band.tokens, 128, DType::kBF16, 2);
  EXPECT_EQ(video.key, tuned.key);
  EXPECT_EQ(video.blocks, tuned.blocks);
}

}  // namespace
}  // namespace tilesplash
