// The routing and warm-up decisions the library owns (routing.h:
// decide_route, WarmupPolicy), the error target and its density ladder, and
// proof that the C++ front door follows the library's rule (the test-only
// inversion switch changes what it does).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "tilesplash/routing.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

const VideoGeometry kGeometry{8, 12, 16, 0, TextPlacement::kNone};  // 1,536 tokens

std::vector<float> run(const VideoWorkload& w, VideoAttentionOptions options,
                       LayerReport* report = nullptr) {
  const std::int64_t n = kGeometry.tokens(), d = w.head_dim();
  std::vector<float> out(static_cast<std::size_t>(w.heads() * n * d));
  const LayerReport r =
      VideoAttention(kGeometry, std::move(options))
          .forward({w.q(), w.k(), w.v(),
                    MutableTensorView::contiguous(out.data(), DType::kF32, w.heads(), n, d)});
  if (report != nullptr) *report = r;
  return out;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& dense, std::int64_t head,
              std::int64_t size) {
  double diff = 0.0, norm = 0.0;
  for (std::int64_t i = head * size; i < (head + 1) * size; ++i) {
    const double e =
        static_cast<double>(got[static_cast<std::size_t>(i)]) - dense[static_cast<std::size_t>(i)];
    diff += e * e;
    norm += static_cast<double>(dense[static_cast<std::size_t>(i)]) *
            dense[static_cast<std::size_t>(i)];
  }
  return std::sqrt(diff / norm);
}

WorkloadOptions band_workload(std::int64_t heads) {
  WorkloadOptions wo = planted_band_options(heads, 3);
  wo.head_dim = 64;
  wo.dtype = DType::kF32;
  return wo;
}

TEST(RoutePolicy, ErrorIsTheRelativeL2OfTheSampledRows) {
  EXPECT_DOUBLE_EQ(sampled_error(0.04, 1.0), 0.2);
  EXPECT_DOUBLE_EQ(sampled_error(0.04, 4.0), 0.1);
  EXPECT_EQ(sampled_error(0.0, 0.0), 0.0);
  EXPECT_TRUE(std::isinf(sampled_error(1.0, 0.0)));
}

TEST(RoutePolicy, PlainRuleIsTheSmallestMseWithinTheBudget) {
  const std::vector<double> densities = {0.3, 0.2, 0.1};
  const std::vector<double> mse = {3.0, 1.0, 2.0};
  EXPECT_EQ(decide_route(densities, mse, 1.0, {}).index, 1u);
  EXPECT_EQ(decide_route(densities, mse, 1.0, {0.15, std::nullopt}).index, 2u);
  EXPECT_EQ(decide_route(densities, {{1.0, 1.0, 1.0}}, 1.0, {}).index, 0u);      // tie: first
  EXPECT_EQ(decide_route(densities, mse, 1.0, {0.05, std::nullopt}).index, 2u);  // least dense
  EXPECT_THROW(decide_route(densities, {{1.0}}, 1.0, {}), std::invalid_argument);
}

TEST(RoutePolicy, ErrorTargetTakesTheLeastDenseThatMeetsIt) {
  // errors sqrt(mse / 4): 0.05, 0.1, 0.2, 0.4 at densities 0.4, 0.25, 0.1, 0.05.
  const std::vector<double> densities = {0.4, 0.25, 0.1, 0.05};
  const std::vector<double> mse = {0.01, 0.04, 0.16, 0.64};
  RouteChoice c = decide_route(densities, mse, 4.0, {std::nullopt, 0.2});
  EXPECT_EQ(c.index, 2u);
  EXPECT_TRUE(c.target_met);
  EXPECT_EQ(decide_route(densities, mse, 4.0, {std::nullopt, 0.5}).index, 3u);
  // None meets it: the lowest error, said.
  c = decide_route(densities, mse, 4.0, {std::nullopt, 0.01});
  EXPECT_EQ(c.index, 0u);
  EXPECT_FALSE(c.target_met);
  // The budget and the target combine: within 0.25, meeting 0.06 is impossible.
  c = decide_route(densities, mse, 4.0, {0.25, 0.06});
  EXPECT_EQ(c.index, 1u);
  EXPECT_FALSE(c.target_met);
  EXPECT_EQ(decide_route(densities, mse, 4.0, {0.25, 0.3}).index, 2u);
}

TEST(RoutePolicy, LaddersAndTargetsAreCheckedByName) {
  EXPECT_NO_THROW(check_density_ladder(default_density_ladder(), "densities"));
  EXPECT_EQ(default_density_ladder().size(), 5u);
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([] {
              check_density_ladder({}, "densities");
            }).find("densities: expected at least one"),
            std::string::npos);
  EXPECT_NE(message([] {
              check_density_ladder(std::vector<double>{0.2, 0.1}, "densities");
            }).find("strictly increasing"),
            std::string::npos);
  EXPECT_NE(message([] {
              check_density_ladder(std::vector<double>{0.1, 1.5}, "densities");
            }).find("densities[1]"),
            std::string::npos);
  EXPECT_NE(message([] {
              check_density_ladder(std::vector<double>{0.0}, "densities");
            }).find("densities[0]"),
            std::string::npos);
  for (const double bad : {0.0, -0.1, std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity()}) {
    EXPECT_NE(message([&] { check_error_target(bad, "error"); }).find("error: expected"),
              std::string::npos)
        << bad;
  }
  VideoAttentionOptions o;
  o.error = -1.0;
  EXPECT_THROW(VideoAttention(kGeometry, o), std::invalid_argument);
  o.error = std::nullopt;
  o.densities = {0.1, 0.2};
  EXPECT_THROW(VideoAttention(kGeometry, o), std::invalid_argument);  // a ladder without a target
  o.error = 0.1;
  o.densities = {0.2, 0.1};
  EXPECT_THROW(VideoAttention(kGeometry, o), std::invalid_argument);
}

TEST(RoutePolicy, LadderCandidatesNameEveryRung) {
  const std::vector<double> ladder = {0.05, 0.25};
  const std::vector<MaskCandidate> svg = ladder_candidates("svg", kGeometry, {}, ladder);
  ASSERT_EQ(svg.size(), 4u);
  EXPECT_EQ(svg[0].name, "spatial@0.05");
  EXPECT_EQ(svg[3].name, "temporal@0.25");
  EXPECT_EQ(svg[3].family, "temporal");  // what the incremental scoring groups by
  EXPECT_EQ(svg[3].rung, 0.25);
  EXPECT_LT(svg[0].density, svg[2].density);
  EXPECT_NEAR(svg[2].density, 0.25, 0.05);
  const std::vector<MaskCandidate> radial = ladder_candidates("radial", kGeometry, {}, ladder);
  ASSERT_EQ(radial.size(), 2u);
  EXPECT_EQ(radial[1].name, "radial@0.25");
  EXPECT_THROW(ladder_candidates("svg2", kGeometry, {}, ladder), std::invalid_argument);
  VideoAttentionOptions o;
  o.error = 0.1;
  const VideoAttention front(kGeometry, o);
  EXPECT_EQ(front.candidates().size(), 10u);
  EXPECT_EQ(force_names(o).size(), 11u);
}

// The C++ front door asks the library: inverting the library's rule and
// warm-up inverts what forward() and route() do.
TEST(RoutePolicy, FrontDoorFollowsTheLibrarysDecision) {
  const VideoWorkload w(kGeometry, band_workload(4));
  VideoAttention front(kGeometry, {});
  const std::vector<RouteDecision> normal = front.route(w.q(), w.k(), w.v());
  set_policy_inverted_for_tests(true);
  const std::vector<RouteDecision> inverted = front.route(w.q(), w.k(), w.v());
  LayerReport report;
  VideoAttentionOptions warm;
  warm.warmup.dense_layers = 1;  // layer 0 would be dense; inverted: routed
  run(w, warm, &report);
  set_policy_inverted_for_tests(false);
  EXPECT_FALSE(report.warmup);
  for (std::size_t h = 0; h < normal.size(); ++h) {
    const std::vector<double>& mse = normal[h].mse;
    EXPECT_EQ(normal[h].index, mse[0] <= mse[1] ? 0u : 1u);
    EXPECT_EQ(inverted[h].index, mse[0] > mse[1] ? 0u : 1u);
  }
  EXPECT_TRUE((WarmupPolicy{1, 0}.is_dense(0, 5)));
}

// Heads of one layer at different densities run in one forward(), each
// exactly as when it runs its choice alone; the report carries the error
// and whether the target was met.
TEST(ErrorTarget, HeadsRunTheirOwnDensityInOnePass) {
  const VideoWorkload w(kGeometry, band_workload(6));
  VideoAttentionOptions o;
  o.error = 0.08;
  LayerReport report;
  const std::vector<float> out = run(w, o, &report);
  const VideoAttention front(kGeometry, o);
  const std::int64_t size = kGeometry.tokens() * w.head_dim();
  std::vector<double> densities;
  for (const HeadReport& head : report.heads) {
    EXPECT_TRUE(head.routed);
    EXPECT_TRUE(std::isfinite(head.error));
    if (head.target_met) {
      EXPECT_LE(head.error, 0.08);
    }
    densities.push_back(head.density);
    VideoAttentionOptions forced = o;
    forced.force = head.choice;
    const std::vector<float> alone = run(w, forced);
    for (std::int64_t i = head.head * size; i < (head.head + 1) * size; ++i) {
      ASSERT_EQ(out[static_cast<std::size_t>(i)], alone[static_cast<std::size_t>(i)])
          << head.choice.name();
    }
  }
  EXPECT_NE(*std::min_element(densities.begin(), densities.end()),
            *std::max_element(densities.begin(), densities.end()));
}

// On heads whose attention sits in bands of 3% to 40% of the keys, the
// choice from 64 sampled rows is within one ladder step of the narrowest
// density whose whole-head error meets the target, in >= 95% of heads.
TEST(ErrorTarget, PicksWithinOneLadderStepOfTheNarrowestThatMeetsIt) {
  constexpr double kTarget = 0.1;
  const VideoWorkload w(kGeometry, band_workload(12));
  const std::int64_t size = kGeometry.tokens() * w.head_dim();
  VideoAttentionOptions dense_options;
  dense_options.force = HeadMask::kDense;
  const std::vector<float> dense = run(w, dense_options);
  VideoAttentionOptions o;
  o.error = kTarget;
  VideoAttention front(kGeometry, o);
  const std::vector<MaskCandidate>& list = front.candidates();
  std::vector<std::vector<double>> exact(list.size());
  for (std::size_t c = 0; c < list.size(); ++c) {
    VideoAttentionOptions forced = o;
    forced.force = HeadMask(list[c].name);
    const std::vector<float> out = run(w, forced);
    for (std::int64_t h = 0; h < w.heads(); ++h) exact[c].push_back(rel_l2(out, dense, h, size));
  }
  const std::vector<RouteDecision> decisions = front.route(w.q(), w.k(), w.v());
  const std::size_t rungs = default_density_ladder().size();
  int within = 0;
  for (std::int64_t h = 0; h < w.heads(); ++h) {
    // Candidates come two per rung (spatial, temporal): rung = index / 2.
    std::size_t narrowest = rungs - 1;
    for (std::size_t c = 0; c < list.size(); ++c) {
      if (exact[c][static_cast<std::size_t>(h)] <= kTarget) narrowest = std::min(narrowest, c / 2);
    }
    const std::size_t chosen = decisions[static_cast<std::size_t>(h)].index / 2;
    const bool ok = chosen + 1 >= narrowest && chosen <= narrowest + 1;
    within += ok;
    EXPECT_TRUE(ok) << "head " << h << " (" << to_string(w.planted()[static_cast<std::size_t>(h)])
                    << ", band " << w.options().band_widths[static_cast<std::size_t>(h)]
                    << ") chose rung " << chosen << ", narrowest meeting " << narrowest;
  }
  EXPECT_GE(within, static_cast<int>(std::ceil(0.95 * static_cast<double>(w.heads()))));
}

TEST(Workload, BandHeadsByName) {
  EXPECT_EQ(parse_planted_head("spatial-band"), PlantedHead::kSpatialBand);
  EXPECT_EQ(parse_planted_head("temporal-band"), PlantedHead::kTemporalBand);
  const WorkloadOptions o = planted_band_options(4);
  ASSERT_EQ(o.band_widths.size(), 4u);
  EXPECT_DOUBLE_EQ(o.band_widths.front(), 0.03);
  EXPECT_NEAR(o.band_widths.back(), 0.40, 1e-12);
  WorkloadOptions bad = o;
  bad.band_widths = {0.1};
  EXPECT_THROW(VideoWorkload(kGeometry, bad), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
