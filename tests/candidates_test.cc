// The open candidate path: row orders, the router's decision rule (smallest
// MSE, density budget, ties), any candidate with its own row permutation
// against the double-precision reference, forcing and validating by name,
// method lists, and the SPEC family table.
#include "tilesplash/candidates.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "routing/router.h"
#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

using test::HostTensor;

std::string error_of(const std::function<void()>& body) {
  try {
    body();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "no error";
}

TEST(RowOrder, TablesAreInverseAndValidated) {
  const RowOrder identity;
  EXPECT_TRUE(identity.is_identity());
  EXPECT_EQ(identity.source(7), 7);
  EXPECT_EQ(identity.position(7), 7);
  EXPECT_EQ(identity.name(), "original");
  const RowOrder order({2, 0, 3, 1}, "custom");
  EXPECT_FALSE(order.is_identity());
  EXPECT_EQ(order.size(), 4);
  for (std::int64_t r = 0; r < 4; ++r) EXPECT_EQ(order.position(order.source(r)), r);
  EXPECT_EQ(order.name(), "custom");
  EXPECT_NE(error_of([] {
              RowOrder({0, 0, 1}, "x");
            }).find("row 0 appears twice"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              RowOrder({0, 3, 1}, "x");
            }).find("source[1] must be in [0, 3)"),
            std::string::npos);
  const VideoGeometry g{3, 2, 2, 2, TextPlacement::kBefore};
  const RowOrder token = RowOrder::token_major(g);
  for (std::int64_t n = 0; n < g.tokens(); ++n) EXPECT_EQ(token.position(n), g.to_token_major(n));
}

MaskCandidate candidate(const std::string& name, double density) {
  return {name, Mask::dense(), MaskRun{RowOrder(), Mask::dense(), std::nullopt}, density, {}, 0.0};
}

TEST(Router, DecidesBySmallestMseWithinTheBudget) {
  const std::vector<MaskCandidate> list = {candidate("a", 0.3), candidate("spatial", 0.2),
                                           candidate("b", 0.1)};
  RouteDecision d = detail::decide(list, {3.0, 1.0, 2.0}, std::nullopt);
  EXPECT_EQ(d.choice, HeadMask("spatial"));
  EXPECT_EQ(d.index, 1u);
  EXPECT_EQ(d.mse_spatial, 1.0);
  EXPECT_TRUE(std::isnan(d.mse_temporal));
  EXPECT_EQ(d.mse, (std::vector<double>{3.0, 1.0, 2.0}));
  // The budget leaves b only.
  EXPECT_EQ(detail::decide(list, {3.0, 1.0, 2.0}, 0.15).choice, HeadMask("b"));
  // Ties go to the first candidate.
  EXPECT_EQ(detail::decide(list, {1.0, 1.0, 1.0}, std::nullopt).index, 0u);
  // Nothing within the budget: the least dense one.
  EXPECT_EQ(detail::decide(list, {0.0, 1.0, 2.0}, 0.05).choice, HeadMask("b"));
}

// A candidate with its own row permutation: the local band |q - k| <= w on
// a seeded shuffle of the original rows, written as a function mask on the
// original order and run as the band on the shuffled order.
MaskCandidate shuffled_band(std::int64_t tokens, std::int64_t w, std::uint64_t seed) {
  std::vector<std::int64_t> source(static_cast<std::size_t>(tokens));
  std::iota(source.begin(), source.end(), 0);
  std::shuffle(source.begin(), source.end(), std::mt19937_64(seed));
  const RowOrder order(source, "shuffled");
  const Mask original = Mask::function(
      [order, w](std::int64_t q, std::int64_t k) {
        return std::llabs(order.position(q) - order.position(k)) <= w;
      },
      "shuffled_band");
  const Mask run = Mask::local(w, w);
  MaskCandidate c = plain_candidate("shuffled", original, tokens);
  c.run = MaskRun{order, run, std::nullopt};
  return c;
}

TEST(VideoAttention, AnyCandidateWithItsOwnOrderEqualsTheReference) {
  const VideoGeometry g{5, 3, 4, 7, TextPlacement::kAfter};
  const std::int64_t n = g.tokens(), heads = 3, d = 16;
  HostTensor q(DType::kF32, heads, n, d), k(DType::kF32, heads, n, d), v(DType::kF32, heads, n, d);
  q.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  VideoAttentionOptions options;
  options.candidates = {shuffled_band(n, 9, 5),
                        video_candidate(VideoMaskKind::kTemporal, g, 6, {true, true})};
  options.blocks = {16, 64};
  options.router.samples = 8;
  for (const std::optional<HeadMask>& force :
       {std::optional<HeadMask>(HeadMask("shuffled")), std::optional(HeadMask::kTemporal),
        std::optional<HeadMask>()}) {
    options.force = force;
    VideoAttention attention(g, options);
    HostTensor out(DType::kF32, heads, n, d);
    out.fill_storage(5.0f);
    std::vector<float> lse(static_cast<std::size_t>(heads * n), 9.0f);
    const LayerReport report =
        attention.forward({q.view(), k.view(), v.view(), out.mutable_view(), lse.data()});
    std::vector<test::ReferenceHead> reference;
    for (const HeadReport& head : report.heads) {
      if (force) {
        EXPECT_EQ(head.choice, *force);
      }
      EXPECT_EQ(head.routed, !force);
      EXPECT_EQ(head.mse.size(), force ? 0u : 2u);
      reference.push_back(test::reference_attention(attention.mask(head.choice), q.view(), k.view(),
                                                    v.view(), head.head));
    }
    EXPECT_TRUE(test::matches_reference(reference, out, lse.data(),
                                        test::tolerance_for(DType::kF32, DType::kF32), v.max_abs()))
        << (force ? force->name() : "routed");
  }
}

TEST(VideoAttention, OneCandidateRunsEveryHeadWithoutRouting) {
  const VideoGeometry g{4, 3, 3, 0, TextPlacement::kNone};
  WorkloadOptions wo;
  wo.heads = 2;
  wo.head_dim = 16;
  const VideoWorkload workload(g, wo);
  std::vector<float> out(static_cast<std::size_t>(2 * g.tokens() * 16));
  VideoAttentionOptions options;
  options.candidates = {video_candidate(VideoMaskKind::kSpatial, g, 5)};
  const LayerReport report =
      VideoAttention(g, options)
          .forward({workload.q(), workload.k(), workload.v(),
                    MutableTensorView::contiguous(out.data(), DType::kF32, 2, g.tokens(), 16)});
  EXPECT_EQ(report.routing_seconds, 0.0);
  for (const HeadReport& head : report.heads) {
    EXPECT_EQ(head.choice, HeadMask::kSpatial);
    EXPECT_FALSE(head.routed);
    EXPECT_TRUE(head.mse.empty());
  }
}

TEST(VideoAttention, DensityBudgetLimitsTheRoutersChoice) {
  const VideoGeometry g{8, 4, 4, 0, TextPlacement::kNone};
  WorkloadOptions wo;
  wo.heads = 4;
  wo.head_dim = 32;
  wo.planted = std::vector<PlantedHead>(4, PlantedHead::kTemporal);
  const VideoWorkload workload(g, wo);
  std::vector<float> out(static_cast<std::size_t>(4 * g.tokens() * 32));
  const AttentionArgs args{
      workload.q(), workload.k(), workload.v(),
      MutableTensorView::contiguous(out.data(), DType::kF32, 4, g.tokens(), 32)};
  VideoAttentionOptions options;
  // A wide temporal band the budget excludes, a narrow spatial one it allows.
  options.candidates = {video_candidate(VideoMaskKind::kTemporal, g, 40),
                        video_candidate(VideoMaskKind::kSpatial, g, 4)};
  const LayerReport free = VideoAttention(g, options).forward(args);
  for (const HeadReport& head : free.heads) EXPECT_EQ(head.choice, HeadMask::kTemporal);
  options.density_budget = 0.1;
  const LayerReport limited = VideoAttention(g, options).forward(args);
  for (const HeadReport& head : limited.heads) {
    EXPECT_EQ(head.choice, HeadMask::kSpatial);
    EXPECT_LE(head.density, 0.1);
    EXPECT_LT(head.mse[1], std::numeric_limits<double>::infinity());
  }
}

TEST(VideoAttention, RejectsBadCandidatesNamingThem) {
  const VideoGeometry g{3, 2, 2, 0, TextPlacement::kNone};
  const auto build = [&](std::vector<MaskCandidate> list, std::optional<HeadMask> force = {}) {
    VideoAttentionOptions options;
    options.candidates = std::move(list);
    options.force = std::move(force);
    return error_of([&] { VideoAttention(g, options); });
  };
  const MaskCandidate spatial = video_candidate(VideoMaskKind::kSpatial, g, 2);
  EXPECT_NE(build({spatial, spatial}).find("options.candidates[1].name 'spatial' is not unique"),
            std::string::npos);
  MaskCandidate dense = spatial;
  dense.name = "dense";
  EXPECT_NE(build({dense}).find("other than 'dense'"), std::string::npos);
  MaskCandidate wrong = spatial;
  wrong.run.order = RowOrder({1, 0}, "two");
  EXPECT_NE(build({wrong}).find("run.order must cover the geometry's 12 tokens"),
            std::string::npos);
  const MaskCandidate other = video_candidate(VideoMaskKind::kSpatial, {4, 2, 2}, 2);
  EXPECT_NE(build({other}).find("its geometry has 16 tokens"), std::string::npos);
  EXPECT_NE(build({spatial}, HeadMask("radial"))
                .find("options.force must be one of dense, spatial, got 'radial'"),
            std::string::npos);
  VideoAttentionOptions budget;
  budget.density_budget = 0.0;
  EXPECT_NE(error_of([&] { VideoAttention(g, budget); }).find("density_budget must be in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { VideoAttention(g).mask(HeadMask("sta")); }).find("no candidate named"),
            std::string::npos);
}

TEST(MethodCandidates, SvgIsTheDefaultPairOnOneBand) {
  const VideoGeometry g{6, 4, 5, 0, TextPlacement::kNone};
  const std::vector<MaskCandidate> svg = method_candidates("svg", g, {0.3, true, true});
  ASSERT_EQ(svg.size(), 2u);
  VideoAttentionOptions options;
  options.density = 0.3;
  options.sink = true;
  const VideoAttention attention(g, options);
  ASSERT_EQ(attention.candidates().size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(svg[i].name, attention.candidates()[i].name);
    EXPECT_EQ(svg[i].mask, attention.candidates()[i].mask);
    EXPECT_EQ(svg[i].run.mask, attention.candidates()[i].run.mask);
  }
  // (radial and sta have floors and steps far above 0.3 on so small a canvas)
  for (const std::string_view name : {"svg", "spatial", "temporal"}) {
    for (const MaskCandidate& c : method_candidates(name, g, {0.3})) {
      EXPECT_NEAR(c.density, 0.3, 0.15) << name << " " << c.name;
    }
  }
  EXPECT_NE(error_of([&] { method_candidates("svg3", g); }).find("unknown method 'svg3'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { method_candidates("svg", g, {0.0}); }).find("density must be in"),
            std::string::npos);
}

TEST(MaskSpecFamilies, OneTableNamesEveryFamily) {
  // The core families of mask.h, then the SPEC term of every registered
  // method that has one, in registry order.
  std::vector<std::string_view> expected = {"dense",   "causal", "local",
                                            "chunked", "random", "keys"};
  for (const MethodInfo& method : methods()) {
    if (method.spec) expected.push_back(method.name);
  }
  const std::vector<std::string_view> names = mask_spec_names();
  EXPECT_EQ(names, expected);
  std::string listed;
  for (std::size_t i = 0; i < names.size(); ++i) {
    listed += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  }
  EXPECT_EQ(error_of([] { parse_mask_spec("nope"); }),
            "mask spec: unknown mask 'nope' (expected " + listed + ")");
  // Every listed name reaches its own parser (which may want parameters).
  for (const std::string_view name : names) {
    const std::string message = error_of([&] { parse_mask_spec(name); });
    EXPECT_EQ(message.find("unknown mask"), std::string::npos) << name << ": " << message;
  }
}

}  // namespace
}  // namespace tilesplash
