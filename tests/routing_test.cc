// Online routing: the router finds the planted head type, the routed sparse
// output stays close to dense, the warm-up policy and forced masks bypass it,
// row sampling is seeded and stays on video tokens, plans are cached.
#include "tilesplash/routing.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "routing/router.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

double cosine(const std::vector<float>& a, const std::vector<float>& b, std::size_t offset,
              std::size_t count) {
  double dot = 0.0, aa = 0.0, bb = 0.0;
  for (std::size_t i = offset; i < offset + count; ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return dot / std::sqrt(aa * bb);
}

struct RoutingCase {
  VideoGeometry geometry;
  bool sink;
};

TEST(Routing, FindsPlantedHeadsAndStaysCloseToDense) {
  const RoutingCase cases[] = {
      {{8, 8, 8, 0, TextPlacement::kNone}, false},
      {{9, 6, 10, 16, TextPlacement::kBefore}, false},
      {{16, 5, 6, 12, TextPlacement::kAfter}, true},  // F large enough that W >= P with the sink
  };
  std::int64_t planted = 0, found = 0;
  for (const RoutingCase& c : cases) {
    for (const std::uint64_t seed : {1, 2, 3}) {
      WorkloadOptions wo;
      wo.heads = 12;
      wo.head_dim = 64;
      wo.seed = seed;
      const VideoWorkload workload(c.geometry, wo);
      const std::int64_t n = c.geometry.tokens(), d = wo.head_dim;
      std::vector<float> sparse(static_cast<std::size_t>(wo.heads * n * d));
      std::vector<float> dense(sparse.size());
      VideoAttentionOptions options;
      options.sink = c.sink;
      options.router.seed = seed;
      options.blocks = {64, 64};
      VideoAttention routed(c.geometry, options);
      const LayerReport report = routed.forward(
          {workload.q(), workload.k(), workload.v(),
           MutableTensorView::contiguous(sparse.data(), DType::kF32, wo.heads, n, d)});
      options.force = HeadMask::kDense;
      VideoAttention(c.geometry, options)
          .forward({workload.q(), workload.k(), workload.v(),
                    MutableTensorView::contiguous(dense.data(), DType::kF32, wo.heads, n, d)});
      for (std::int64_t h = 0; h < wo.heads; ++h) {
        const PlantedHead kind = workload.planted()[static_cast<std::size_t>(h)];
        const HeadReport& head = report.heads[static_cast<std::size_t>(h)];
        if (kind == PlantedHead::kAmbiguous) continue;
        const HeadMask want =
            kind == PlantedHead::kSpatial ? HeadMask::kSpatial : HeadMask::kTemporal;
        ++planted;
        if (head.choice != want) continue;
        ++found;
        const double cos = cosine(sparse, dense, static_cast<std::size_t>(h * n * d),
                                  static_cast<std::size_t>(n * d));
        EXPECT_GE(cos, 0.99) << c.geometry.to_string() << " seed " << seed << " head " << h
                             << " planted " << to_string(kind);
      }
    }
  }
  EXPECT_GE(static_cast<double>(found), 0.98 * static_cast<double>(planted))
      << found << " of " << planted << " planted heads routed to their type";
}

TEST(Routing, ReportsMsesAndDensity) {
  const VideoGeometry g{8, 6, 6, 0, TextPlacement::kNone};
  WorkloadOptions wo;
  wo.heads = 4;
  wo.head_dim = 32;
  wo.planted = {PlantedHead::kSpatial, PlantedHead::kTemporal, PlantedHead::kSpatial,
                PlantedHead::kTemporal};
  const VideoWorkload workload(g, wo);
  std::vector<float> out(static_cast<std::size_t>(4 * g.tokens() * 32));
  VideoAttention attention(g);
  const AttentionArgs args{
      workload.q(), workload.k(), workload.v(),
      MutableTensorView::contiguous(out.data(), DType::kF32, 4, g.tokens(), 32)};
  const LayerReport report = attention.forward(args, 2, 7);
  const std::vector<RouteDecision> decisions =
      attention.route(workload.q(), workload.k(), workload.v(), 2, 7);
  for (std::size_t h = 0; h < 4; ++h) {
    const HeadReport& head = report.heads[h];
    EXPECT_TRUE(head.routed);
    EXPECT_EQ(head.choice, h % 2 == 0 ? HeadMask::kSpatial : HeadMask::kTemporal);
    EXPECT_EQ(head.mse_spatial, decisions[h].mse_spatial);
    EXPECT_EQ(head.mse_temporal, decisions[h].mse_temporal);
    EXPECT_EQ(head.choice, decisions[h].choice);
    EXPECT_NEAR(head.density, 0.25, 0.01);
    EXPECT_GE(head.seconds, head.permute_seconds);
    if (head.choice == HeadMask::kSpatial) {
      EXPECT_EQ(head.permute_seconds, 0.0);
    }
  }
  EXPECT_EQ(report.band, attention.band());
  EXPECT_FALSE(report.warmup);
  EXPECT_GT(report.routing_seconds, 0.0);
  EXPECT_GT(report.plan_seconds, 0.0);
  // Plans are built once and reused by later layers and steps.
  EXPECT_EQ(attention.forward(args, 3, 7).plan_seconds, 0.0);
}

TEST(Routing, WarmupAndForcedMasksSkipTheRouter) {
  const VideoGeometry g{4, 4, 4, 0, TextPlacement::kNone};
  WorkloadOptions wo;
  wo.heads = 2;
  wo.head_dim = 16;
  const VideoWorkload workload(g, wo);
  std::vector<float> out(static_cast<std::size_t>(2 * g.tokens() * 16));
  const AttentionArgs args{
      workload.q(), workload.k(), workload.v(),
      MutableTensorView::contiguous(out.data(), DType::kF32, 2, g.tokens(), 16)};
  VideoAttentionOptions options;
  options.warmup = {1, 3};
  VideoAttention attention(g, options);
  for (const auto& [layer, step, warm] :
       {std::tuple{0, 9, true}, {5, 2, true}, {1, 3, false}, {4, 8, false}}) {
    const LayerReport report = attention.forward(args, layer, step);
    EXPECT_EQ(report.warmup, warm) << layer << " " << step;
    for (const HeadReport& head : report.heads) {
      EXPECT_EQ(head.routed, !warm);
      if (warm) {
        EXPECT_EQ(head.choice, HeadMask::kDense);
        EXPECT_EQ(head.density, 1.0);
        EXPECT_TRUE(std::isnan(head.mse_spatial));
        EXPECT_EQ(report.routing_seconds, 0.0);
      } else {
        EXPECT_NE(head.choice, HeadMask::kDense);
      }
    }
  }
  options.warmup = {};
  options.force = HeadMask::kTemporal;
  const LayerReport forced = VideoAttention(g, options).forward(args);
  for (const HeadReport& head : forced.heads) {
    EXPECT_EQ(head.choice, HeadMask::kTemporal);
    EXPECT_FALSE(head.routed);
    EXPECT_TRUE(std::isnan(head.mse_temporal));
  }
}

TEST(Routing, SampledRowsAreSeededDistinctVideoTokens) {
  const VideoGeometry g{5, 4, 5, 30, TextPlacement::kBefore};
  const std::vector<std::int64_t> rows = detail::sample_video_rows(g, 64, 9, 2, 3);
  ASSERT_EQ(rows.size(), 64u);
  EXPECT_EQ(std::set<std::int64_t>(rows.begin(), rows.end()).size(), 64u);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  for (const std::int64_t r : rows) EXPECT_TRUE(g.is_video(r)) << r;
  EXPECT_EQ(rows, detail::sample_video_rows(g, 64, 9, 2, 3));
  EXPECT_NE(rows, detail::sample_video_rows(g, 64, 9, 2, 4));
  EXPECT_NE(rows, detail::sample_video_rows(g, 64, 10, 2, 3));
  const std::vector<std::int64_t> all = detail::sample_video_rows(g, 1000, 9, 0, 0);
  ASSERT_EQ(static_cast<std::int64_t>(all.size()), g.video_tokens());
  EXPECT_EQ(all.front(), 30);
}

}  // namespace
}  // namespace tilesplash
