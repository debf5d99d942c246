// Pooled scores routed in the mix (families naming pooled): each routed
// head is scored on its own pooled selection beside the shared candidates,
// the one rule decides, and a head that chose pooled runs the selection a
// pooled head alone would run; the others run their candidate as it alone
// would. Planted heads: clusters (neither spatial nor temporal) go to
// pooled, the bands (spatial-band, temporal-band) to their own family.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tilesplash/methods.h"
#include "tilesplash/pooled.h"
#include "tilesplash/routing.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

const VideoGeometry kGeometry{8, 16, 16, 0, TextPlacement::kNone};  // 2,048 tokens
constexpr std::int64_t kHeads = 3, kDim = 32;

VideoWorkload workload() {
  WorkloadOptions o;
  o.heads = kHeads;
  o.head_dim = kDim;
  o.dtype = DType::kF32;
  o.planted = {PlantedHead::kCluster, PlantedHead::kSpatialBand, PlantedHead::kTemporalBand};
  return VideoWorkload(kGeometry, o);
}

MethodOptions mix_options(double density) {
  MethodOptions o;
  o.density = density;
  o.families = {"spatial", "temporal", "pooled"};
  return o;
}

struct LayerRun {
  LayerReport report;
  std::vector<float> out;
};

LayerRun forward(VideoAttentionOptions options, const VideoWorkload& w) {
  options.threads = 1;
  VideoAttention attention(kGeometry, std::move(options));
  const std::int64_t n = kGeometry.tokens();
  LayerRun run;
  run.out.assign(static_cast<std::size_t>(kHeads * n * kDim), 0.0f);
  run.report = attention.forward(
      {w.q(), w.k(), w.v(),
       MutableTensorView::contiguous(run.out.data(), DType::kF32, kHeads, n, kDim)});
  return run;
}

double head_diff(const LayerRun& a, const LayerRun& b, std::int64_t h) {
  const std::int64_t size = kGeometry.tokens() * kDim;
  double worst = 0.0;
  for (std::int64_t i = h * size; i < (h + 1) * size; ++i) {
    worst = std::max<double>(
        worst, std::abs(a.out[static_cast<std::size_t>(i)] - b.out[static_cast<std::size_t>(i)]));
  }
  return worst;
}

TEST(PooledMix, FamiliesSetUpCandidatesAndPooledTogether) {
  const VideoAttentionOptions o = method_attention_options("mix", kGeometry, mix_options(0.25));
  ASSERT_TRUE(o.pooled.has_value());
  EXPECT_EQ(o.pooled->density, 0.25);
  ASSERT_EQ(o.candidates.size(), 2u);  // spatial and temporal; no radial, no sta
  const std::vector<std::string> names = force_names(o);
  EXPECT_NE(std::find(names.begin(), names.end(), "pooled"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "spatial"), names.end());
  // The plain mix is unchanged: every mask family, no pooled heads.
  EXPECT_FALSE(method_attention_options("mix", kGeometry, {0.25}).pooled.has_value());
}

TEST(PooledMix, ClusterHeadsChoosePooledBandHeadsTheirFamily) {
  const VideoWorkload w = workload();
  const VideoAttentionOptions options =
      method_attention_options("mix", kGeometry, mix_options(0.25));
  const LayerRun mix = forward(options, w);
  for (std::int64_t h = 0; h < kHeads; ++h) {
    const HeadReport& head = mix.report.heads[static_cast<std::size_t>(h)];
    EXPECT_TRUE(head.routed);
    EXPECT_EQ(head.choice.name(), head.family) << "head " << h;
    EXPECT_EQ(head.rung, 0.0);
    // The candidates' MSEs, then the head's own selection's in each row
    // order (frame-major, token-major).
    ASSERT_EQ(head.mse.size(), 4u);
    // Without an error target the rule keeps the smallest MSE.
    const double least = *std::min_element(head.mse.begin(), head.mse.end());
    if (head.family == "pooled") {
      EXPECT_EQ(std::min(head.mse[2], head.mse[3]), least) << "head " << h;
    } else {
      EXPECT_EQ(head.mse[head.family == "spatial" ? 0 : 1], least) << "head " << h;
    }
    EXPECT_TRUE(std::isfinite(head.error));
  }
  // Cluster head: pooled beats both bands on the sampled rows. Spatial
  // band: its family. Temporal band: in token-major order, as the temporal
  // mask or as pooled tiles cut in that order (which at 0.25 keep its keys
  // with a lower error than the band of the same density).
  const HeadReport& cluster = mix.report.heads[0];
  EXPECT_EQ(cluster.family, "pooled");
  EXPECT_LT(std::min(cluster.mse[2], cluster.mse[3]), std::min(cluster.mse[0], cluster.mse[1]));
  EXPECT_EQ(mix.report.heads[1].family, "spatial");
  EXPECT_EQ(mix.report.heads[1].order, "original");
  EXPECT_EQ(mix.report.heads[2].order, "token-major");

  // Each head ran what its choice runs alone.
  const LayerRun pooled = forward(method_attention_options("pooled", kGeometry, {0.25}), w);
  for (std::int64_t h = 0; h < kHeads; ++h) {
    const HeadReport& head = mix.report.heads[static_cast<std::size_t>(h)];
    if (head.family == "pooled") {
      EXPECT_LE(head_diff(mix, pooled, h), 1e-6) << "head " << h;
      EXPECT_EQ(head.density, pooled.report.heads[static_cast<std::size_t>(h)].density);
      EXPECT_EQ(head.order, pooled.report.heads[static_cast<std::size_t>(h)].order);
    } else {
      VideoAttentionOptions forced = options;
      forced.force = head.choice;
      EXPECT_LE(head_diff(mix, forward(forced, w), h), 1e-6) << "head " << h;
    }
  }
}

TEST(PooledMix, AnErrorTargetStepsPooledOverPAmongTheLadder) {
  const VideoWorkload w = workload();
  VideoAttentionOptions options =
      method_attention_options("mix", kGeometry, mix_options(0.25), ErrorTarget{0.3, std::nullopt});
  ASSERT_TRUE(options.pooled.has_value());
  EXPECT_EQ(options.candidates.size(), 2 * default_density_ladder().size());
  const LayerRun run = forward(options, w);
  const HeadReport& cluster = run.report.heads[0];
  EXPECT_EQ(cluster.family, "pooled");
  const std::span<const double> ladder = pooled_p_ladder();
  EXPECT_NE(std::find(ladder.begin(), ladder.end(), cluster.rung), ladder.end());
  // Its rungs: the ladder in frame-major order, then in token-major order.
  EXPECT_EQ(cluster.mse.size(), options.candidates.size() + 2 * ladder.size());
  if (cluster.target_met) {
    EXPECT_LE(cluster.error, 0.3);
  }
  for (const HeadReport& head : run.report.heads) {
    EXPECT_TRUE(std::isfinite(head.error));
    if (head.family != "pooled") {
      EXPECT_GT(head.rung, 0.0);
    }
  }
  // The spatial band meets the target at a rung of its own family; the
  // temporal band runs token-major, at a temporal rung or a pooled one cut
  // in token-major order (its keys then sit around the diagonal).
  EXPECT_EQ(run.report.heads[1].family, "spatial");
  EXPECT_EQ(run.report.heads[1].order, "original");
  EXPECT_EQ(run.report.heads[2].order, "token-major");
  for (const HeadReport& head : run.report.heads) {
    EXPECT_TRUE(head.target_met) << "head " << head.head;
  }
}

TEST(PooledMix, RefusesPooledOptionsWithoutPooledAndBadFamilies) {
  MethodOptions o;
  o.p = 0.9;
  EXPECT_THROW(method_attention_options("mix", kGeometry, o), std::invalid_argument);
  EXPECT_THROW(method_attention_options("radial", kGeometry, o), std::invalid_argument);
  o = mix_options(0.25);
  o.families.push_back("spatial");
  try {
    method_attention_options("mix", kGeometry, o);
    ADD_FAILURE() << "accepted a family twice";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("families"), std::string::npos) << e.what();
  }
  o.families = {"svg2"};
  EXPECT_THROW(method_attention_options("mix", kGeometry, o), std::invalid_argument);
  o.families = {"spatial"};
  EXPECT_THROW(method_attention_options("radial", kGeometry, o), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
