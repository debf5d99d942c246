// The pooled method as a registered method: heads of the front door run the
// selection their own Q and K make (pooled.h), its output is masked attention
// under it, and an error target steps each head over pooled_p_ladder().
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/attention_check.h"
#include "support/reference.h"
#include "tilesplash/methods.h"
#include "tilesplash/pooled.h"
#include "tilesplash/routing.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

const VideoGeometry kGeometry{4, 5, 6, 6, TextPlacement::kAfter};  // 126 tokens

VideoWorkload workload() {
  WorkloadOptions o;
  o.heads = 3;
  o.head_dim = 16;
  o.dtype = DType::kF32;
  o.planted = {PlantedHead::kCluster, PlantedHead::kSpatial, PlantedHead::kTemporal};
  return VideoWorkload(kGeometry, o);
}

struct LayerRun {
  LayerReport report;
  std::vector<float> out;
};

LayerRun forward(VideoAttention& attention, const VideoWorkload& w) {
  const std::int64_t n = kGeometry.tokens();
  LayerRun run;
  run.out.assign(static_cast<std::size_t>(3 * n * 16), 0.0f);
  run.report = attention.forward(
      {w.q(), w.k(), w.v(), MutableTensorView::contiguous(run.out.data(), DType::kF32, 3, n, 16)});
  return run;
}

// MethodOptions::order reaches the heads' PooledOptions, belongs to the
// pooled heads only, and its names parse both ways.
TEST(PooledFrontDoor, TheOrderOptionReachesTheHeadsAndIsNamedWhenWrong) {
  EXPECT_EQ(method_attention_options("pooled", kGeometry, {0.3}).pooled->order, PooledOrder::kAuto);
  for (const PooledOrder order : {PooledOrder::kAuto, PooledOrder::kFrame, PooledOrder::kToken}) {
    const VideoAttentionOptions o =
        method_attention_options("pooled", kGeometry, {.density = 0.3, .order = order});
    ASSERT_TRUE(o.pooled.has_value());
    EXPECT_EQ(o.pooled->order, order);
    EXPECT_EQ(parse_pooled_order(pooled_order_name(order)), order);
  }
  const VideoAttentionOptions mix = method_attention_options(
      "mix", kGeometry,
      {.density = 0.3, .order = PooledOrder::kToken, .families = {"spatial", "pooled"}});
  EXPECT_EQ(mix.pooled->order, PooledOrder::kToken);
  try {
    method_attention_options("svg", kGeometry, {.density = 0.3, .order = PooledOrder::kToken});
    ADD_FAILURE() << "svg took an order";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("order: applies to heads that rank"), std::string::npos)
        << e.what();
  }
  try {
    parse_pooled_order("rows");
    ADD_FAILURE() << "parsed 'rows'";
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()), "order: expected auto, frame or token, got 'rows'");
  }
}

TEST(PooledFrontDoor, IsARegisteredDataDrivenMethod) {
  const MethodInfo& info = method_info("pooled");
  EXPECT_TRUE(info.data_driven);
  EXPECT_FALSE(info.candidates);
  EXPECT_EQ(info.choice, "pooled");
  EXPECT_NE(method_list_text().find("pooled"), std::string::npos);
  EXPECT_EQ(cluster_choice(), "svg2");  // the clustered method's choice is unchanged
  const VideoAttentionOptions o = method_attention_options("pooled", kGeometry, {0.3, true});
  ASSERT_TRUE(o.pooled.has_value());
  EXPECT_EQ(o.pooled->density, 0.3);
  EXPECT_TRUE(o.pooled->sink);
  EXPECT_TRUE(o.candidates.empty());
  EXPECT_FALSE(o.clusters.has_value());
}

TEST(PooledFrontDoor, HeadsRunTheirOwnSelection) {
  const VideoWorkload w = workload();
  VideoAttentionOptions options = method_attention_options("pooled", kGeometry, {0.3});
  options.threads = 1;
  VideoAttention attention(kGeometry, options);
  const LayerRun run = forward(attention, w);
  const std::int64_t n = kGeometry.tokens();
  const double scale = 1.0 / std::sqrt(16.0);
  for (std::int64_t h = 0; h < 3; ++h) {
    const HeadReport& head = run.report.heads[static_cast<std::size_t>(h)];
    EXPECT_EQ(head.choice.name(), "pooled");
    // In the row order the head chose on its sampled rows (pooled_order_test.cc).
    PooledOptions o = *options.pooled;
    o.order = head.order == "token-major" ? PooledOrder::kToken : PooledOrder::kFrame;
    const PooledSelection s = pooled_select(kGeometry, w.q(), w.k(), h, scale, o);
    EXPECT_GE(s.density, 0.3);
    EXPECT_EQ(head.density, s.density);
    const Mask mask = pooled_original_mask(s);
    const Mask ran = attention.head_mask(h);
    for (std::int64_t q = 0; q < n; ++q) {
      for (std::int64_t k = 0; k < n; ++k) ASSERT_EQ(ran.keeps(q, k), mask.keeps(q, k));
    }
    const test::ReferenceHead ref = test::reference_attention(mask, w.q(), w.k(), w.v(), h);
    double worst = 0.0;
    for (std::int64_t i = 0; i < n * 16; ++i) {
      const float got = run.out[static_cast<std::size_t>(h * n * 16 + i)];
      worst = std::max(worst, std::abs(got - ref.out[static_cast<std::size_t>(i)]));
    }
    EXPECT_LT(worst, 1e-4) << "head " << h;
  }
  try {
    attention.route(w.q(), w.k(), w.v(), 0, 0);
    ADD_FAILURE() << "routed pooled heads";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("options.pooled"), std::string::npos) << e.what();
  }
}

TEST(PooledFrontDoor, AnErrorTargetStepsEachHeadOverP) {
  const VideoWorkload w = workload();
  std::vector<double> loose_density, tight_density;
  for (const double error : {10.0, 0.05, 1e-12}) {
    VideoAttentionOptions options = method_attention_options("pooled", kGeometry, {0.3});
    options.error = error;
    VideoAttention attention(kGeometry, options);
    const LayerRun run = forward(attention, w);
    for (const HeadReport& head : run.report.heads) {
      EXPECT_EQ(head.choice.name(), "pooled");
      EXPECT_TRUE(std::isfinite(head.error));
      if (head.target_met) {
        EXPECT_LE(head.error, error);
      }
      if (error == 10.0) loose_density.push_back(head.density);
      if (error == 1e-12) tight_density.push_back(head.density);
    }
  }
  for (std::size_t h = 0; h < 3; ++h) EXPECT_LE(loose_density[h], tight_density[h]);
}

TEST(PooledFrontDoor, BitIdenticalAcrossThreadCounts) {
  const VideoWorkload w = workload();
  std::vector<float> first;
  for (const int threads : {1, 2, 5}) {
    VideoAttentionOptions options = method_attention_options("pooled", kGeometry, {0.2, true});
    options.error = 0.05;
    options.threads = threads;
    VideoAttention attention(kGeometry, options, std::make_shared<ThreadingContext>(threads));
    const LayerRun run = forward(attention, w);
    if (first.empty()) {
      first = run.out;
    } else {
      EXPECT_EQ(std::memcmp(first.data(), run.out.data(), first.size() * sizeof(float)), 0)
          << threads << " threads";
    }
  }
}

TEST(PooledFrontDoor, RefusesBadOptionsByName) {
  VideoAttentionOptions options = method_attention_options("pooled", kGeometry, {0.3});
  options.pooled->p = 1.5;
  options.pooled->density.reset();
  try {
    VideoAttention attention(kGeometry, options);
    ADD_FAILURE() << "accepted p 1.5";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("options.pooled.p"), std::string::npos) << e.what();
  }
  options = method_attention_options("pooled", kGeometry, {0.3});
  options.error = 0.05;
  options.densities = {0.1, 0.2};
  EXPECT_THROW(VideoAttention(kGeometry, options), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
