// The router over the new families on the planted workload: it picks the
// planted family where one is planted (spatial, temporal) or a candidate at
// least as good, and on every planted type a candidate whose whole-head
// error against dense is close to the best candidate's, although it saw
// only 64 sampled rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "tilesplash/radial.h"
#include "tilesplash/routing.h"
#include "tilesplash/sta.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

// 24 frames of 8 x 12: long enough for radial's far frames (block 4) and
// several sta tiles per dimension, small enough to run every head dense.
const VideoGeometry kGeometry{24, 8, 12, 0, TextPlacement::kNone};

std::vector<MaskCandidate> candidates(double density) {
  const VideoMaskOptions o{false, true};
  std::vector<MaskCandidate> list;
  for (const VideoMaskKind kind : {VideoMaskKind::kSpatial, VideoMaskKind::kTemporal}) {
    list.push_back(
        video_candidate(kind, kGeometry, band_for_density(kGeometry, density, o, kind), o));
  }
  RadialOptions radial;
  radial.block = 4;
  radial.decay = radial_decay_for_density(kGeometry, density, radial);
  list.push_back(radial_candidate(kGeometry, radial));
  list.push_back(sta_candidate(kGeometry, {{2, 4, 4}, {5, 1, 3}}));
  list.push_back(sta_candidate(kGeometry, {{2, 4, 4}, {1, 2, 3}}));
  return list;
}

std::vector<float> run(const VideoWorkload& w, VideoAttentionOptions options) {
  const std::int64_t n = kGeometry.tokens(), d = w.head_dim();
  std::vector<float> out(static_cast<std::size_t>(w.heads() * n * d));
  VideoAttention(kGeometry, std::move(options))
      .forward({w.q(), w.k(), w.v(),
                MutableTensorView::contiguous(out.data(), DType::kF32, w.heads(), n, d)});
  return out;
}

double rel_l2(const std::vector<float>& got, const std::vector<float>& dense, std::int64_t head,
              std::int64_t size) {
  double diff = 0.0, norm = 0.0;
  for (std::int64_t i = head * size; i < (head + 1) * size; ++i) {
    diff += (got[i] - dense[i]) * static_cast<double>(got[i] - dense[i]);
    norm += static_cast<double>(dense[i]) * dense[i];
  }
  return std::sqrt(diff / norm);
}

TEST(RouterFamilies, PicksThePlantedFamilyAndNearlyTheBestOnEveryType) {
  WorkloadOptions wo;
  wo.head_dim = 64;
  wo.dtype = DType::kF32;
  wo.planted.assign(planted_heads().begin(), planted_heads().end());
  wo.heads = static_cast<std::int64_t>(wo.planted.size());
  const VideoWorkload w(kGeometry, wo);
  const std::int64_t size = kGeometry.tokens() * wo.head_dim;

  VideoAttentionOptions dense_options;
  dense_options.force = HeadMask::kDense;
  const std::vector<float> dense = run(w, dense_options);

  const std::vector<MaskCandidate> list = candidates(0.25);
  VideoAttentionOptions routed;
  routed.candidates = list;
  VideoAttention attention(kGeometry, routed);
  const std::vector<RouteDecision> decisions = attention.route(w.q(), w.k(), w.v());
  // Every head under every candidate, against dense.
  std::vector<std::vector<double>> error(list.size());
  for (std::size_t c = 0; c < list.size(); ++c) {
    VideoAttentionOptions forced;
    forced.candidates = list;
    forced.force = HeadMask(list[c].name);
    const std::vector<float> out = run(w, forced);
    for (std::int64_t h = 0; h < w.heads(); ++h) error[c].push_back(rel_l2(out, dense, h, size));
  }
  for (std::int64_t h = 0; h < w.heads(); ++h) {
    const std::string type(to_string(w.planted()[static_cast<std::size_t>(h)]));
    const RouteDecision& decision = decisions[static_cast<std::size_t>(h)];
    double best = INFINITY;
    for (const auto& e : error) best = std::min(best, e[static_cast<std::size_t>(h)]);
    const double chosen = error[decision.index][static_cast<std::size_t>(h)];
    EXPECT_LE(chosen, 1.25 * best + 1e-3) << type << " chose " << decision.choice.name() << " ("
                                          << chosen << ", best " << best << ")";
    // Where a family is planted, the router takes it, or a candidate that is
    // as good on the whole head, within 5% (radial keeps every frame's own
    // position, so it serves temporal heads as well as the temporal band).
    if (type == "spatial" || type == "temporal") {
      const double planted = error[type == "spatial" ? 0 : 1][static_cast<std::size_t>(h)];
      EXPECT_TRUE(decision.choice.name() == type || chosen <= 1.05 * planted)
          << type << " chose " << decision.choice.name() << " (" << chosen << " > " << planted
          << ")";
    }
  }
}

}  // namespace
}  // namespace tilesplash
