// The Sparse VideoGen masks against their brute-force definitions on small
// geometries of every kind (text before / after / none, sink on / off, text
// full on / off, bands from 0 to beyond the sequence): keeps(), classify() on
// ragged and out-of-range tiles, kv_hull(), eval_row(), exact pair counts,
// plans, and the band-plus-sink-segment decomposition the front door runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "tilesplash/mask_node.h"
#include "tilesplash/mask_spec.h"
#include "tilesplash/plan.h"
#include "tilesplash/video.h"
#include "video_test_util.h"

namespace tilesplash {
namespace {

using test::RefVideo;

struct MaskCase {
  VideoGeometry geometry;
  VideoMaskKind kind;
  std::int64_t band;
  VideoMaskOptions options;
};

std::vector<MaskCase> all_cases() {
  std::vector<MaskCase> cases;
  for (const VideoGeometry& g : test::small_geometries()) {
    const std::int64_t p = g.tokens_per_frame(), l = g.video_tokens();
    const std::vector<std::int64_t> bands = {0,         1,     g.frames - 1,         p + 1,
                                             2 * p + 3, l + 5, std::int64_t{1} << 50};
    for (const VideoMaskKind kind : {VideoMaskKind::kSpatial, VideoMaskKind::kTemporal}) {
      for (const std::int64_t band : bands) {
        for (int flags = 0; flags < 4; ++flags) {
          cases.push_back(
              {g, kind, std::max<std::int64_t>(band, 0), {(flags & 1) != 0, (flags & 2) != 0}});
        }
      }
    }
  }
  return cases;
}

TileKind brute_kind(const MaskCase& c, IndexRange rows, IndexRange cols) {
  const RefVideo ref(c.geometry);
  bool kept = false, dropped = false;
  for (std::int64_t q = rows.begin; q < rows.end; ++q) {
    for (std::int64_t k = cols.begin; k < cols.end; ++k) {
      (ref.keeps(c.kind, c.band, c.options, q, k) ? kept : dropped) = true;
    }
  }
  if (!kept) return TileKind::kEmpty;
  return dropped ? TileKind::kPartial : TileKind::kFull;
}

TEST(VideoMask, KeepsMatchesDefinition) {
  for (const MaskCase& c : all_cases()) {
    const Mask mask = video_mask(c.kind, c.geometry, c.band, c.options);
    const RefVideo ref(c.geometry);
    for (std::int64_t q = -1; q < ref.tokens + 2; ++q) {
      for (std::int64_t k = -1; k < ref.tokens + 2; ++k) {
        ASSERT_EQ(mask.keeps(q, k), ref.keeps(c.kind, c.band, c.options, q, k))
            << test::describe(c.geometry, c.kind, c.band, c.options) << " q=" << q << " k=" << k;
      }
    }
  }
}

TEST(VideoMask, ClassifyMatchesBruteForceOnGridsAndRandomTiles) {
  std::mt19937_64 rng(3);
  for (const MaskCase& c : all_cases()) {
    const Mask mask = video_mask(c.kind, c.geometry, c.band, c.options);
    const std::int64_t n = c.geometry.tokens();
    ASSERT_TRUE(mask.is_analytic());
    // Every tile of ragged grids over (and slightly past) the sequence.
    for (const auto& [bq, bk] : {std::pair{1, 1}, {3, 5}, {4, 4}, {7, 2}}) {
      for (std::int64_t q0 = 0; q0 < n + 2; q0 += bq) {
        for (std::int64_t k0 = 0; k0 < n + 2; k0 += bk) {
          const IndexRange rows{q0, std::min(q0 + bq, n + 2)};
          const IndexRange cols{k0, std::min(k0 + bk, n + 2)};
          ASSERT_EQ(mask.classify(rows, cols), brute_kind(c, rows, cols))
              << test::describe(c.geometry, c.kind, c.band, c.options) << " rows [" << rows.begin
              << "," << rows.end << ") cols [" << cols.begin << "," << cols.end << ")";
        }
      }
    }
    for (int trial = 0; trial < 40; ++trial) {
      const auto start = [&] { return static_cast<std::int64_t>(rng() % (n + 1)); };
      const auto size = [&] { return static_cast<std::int64_t>(rng() % (n / 2 + 2) + 1); };
      const std::int64_t q0 = start(), k0 = start();
      const IndexRange rows{q0, q0 + size()}, cols{k0, k0 + size()};
      ASSERT_EQ(mask.classify(rows, cols), brute_kind(c, rows, cols))
          << test::describe(c.geometry, c.kind, c.band, c.options) << " rows [" << rows.begin << ","
          << rows.end << ") cols [" << cols.begin << "," << cols.end << ")";
    }
  }
}

TEST(VideoMask, KvHullContainsEveryKeptKeyAndEvalRowMatchesKeeps) {
  for (const MaskCase& c : all_cases()) {
    const Mask mask = video_mask(c.kind, c.geometry, c.band, c.options);
    const std::int64_t n = c.geometry.tokens();
    for (std::int64_t q0 = 0; q0 < n; q0 += 2) {
      for (const std::int64_t rows_len : {1, 3, 8}) {
        const IndexRange rows{q0, std::min(n, q0 + rows_len)};
        const std::int64_t kv_len = n - (q0 % 3);
        const IndexRange hull = mask.kv_hull(rows, kv_len);
        for (std::int64_t q = rows.begin; q < rows.end; ++q) {
          for (std::int64_t k = 0; k < kv_len; ++k) {
            if (mask.keeps(q, k)) {
              ASSERT_TRUE(k >= hull.begin && k < hull.end)
                  << test::describe(c.geometry, c.kind, c.band, c.options) << " q=" << q
                  << " k=" << k << " hull [" << hull.begin << "," << hull.end << ")";
            }
          }
        }
      }
    }
    std::vector<std::uint8_t> keep(static_cast<std::size_t>(n + 8));
    for (std::int64_t q = -1; q < n + 1; ++q) {
      for (const std::int64_t k0 : {std::int64_t{0}, std::int64_t{1}, n / 2}) {
        const std::int64_t len = n + 3 - k0;
        mask.eval_row(q, k0, len, keep.data());
        for (std::int64_t i = 0; i < len; ++i) {
          ASSERT_EQ(keep[static_cast<std::size_t>(i)] != 0, mask.keeps(q, k0 + i))
              << test::describe(c.geometry, c.kind, c.band, c.options) << " q=" << q
              << " k=" << k0 + i;
        }
      }
    }
  }
}

TEST(VideoMask, CountsAndPlansMatchBruteForce) {
  for (const MaskCase& c : all_cases()) {
    const RefVideo ref(c.geometry);
    std::int64_t kept = 0;
    for (std::int64_t q = 0; q < ref.tokens; ++q) {
      for (std::int64_t k = 0; k < ref.tokens; ++k)
        kept += ref.keeps(c.kind, c.band, c.options, q, k);
    }
    ASSERT_EQ(count_kept_pairs(c.kind, c.geometry, c.band, c.options), kept)
        << test::describe(c.geometry, c.kind, c.band, c.options);
    const Mask mask = video_mask(c.kind, c.geometry, c.band, c.options);
    const TilePlan plan = TilePlan::build(mask, ref.tokens, ref.tokens, {3, 5});
    ASSERT_EQ(plan.stats().kept_pairs, kept)
        << test::describe(c.geometry, c.kind, c.band, c.options);
  }
}

TEST(VideoMask, BandForDensityIsTheClosestBand) {
  for (const VideoGeometry& g : test::small_geometries()) {
    for (const VideoMaskOptions options : {VideoMaskOptions{}, VideoMaskOptions{true, true}}) {
      for (const double density : {0.01, 0.1, 0.25, 0.5, 0.9, 1.0}) {
        const double n2 = static_cast<double>(g.tokens()) * static_cast<double>(g.tokens());
        for (const int which : {0, 1, 2}) {
          const auto error = [&](std::int64_t band) {
            double pairs = 0.0;
            if (which != 1) pairs += count_kept_pairs(VideoMaskKind::kSpatial, g, band, options);
            if (which != 0) pairs += count_kept_pairs(VideoMaskKind::kTemporal, g, band, options);
            return std::abs(pairs / (which == 2 ? 2.0 : 1.0) / n2 - density);
          };
          std::int64_t best = 0;
          for (std::int64_t band = 1; band < g.video_tokens(); ++band) {
            if (error(band) < error(best) - 1e-15) best = band;
          }
          const std::optional<VideoMaskKind> kind =
              which == 2
                  ? std::nullopt
                  : std::optional(which == 0 ? VideoMaskKind::kSpatial : VideoMaskKind::kTemporal);
          EXPECT_EQ(band_for_density(g, density, options, kind), best)
              << g.to_string() << " density " << density << " which " << which;
        }
      }
    }
  }
}

TEST(VideoMask, BandForDensityMatchesTheClosedFormWithoutTextOrSink) {
  const VideoGeometry wan = video_preset("wan2.1-14b-720p").geometry;
  const std::int64_t band = band_for_density(wan, 0.25);
  const double closed = 75600.0 * (1.0 - std::sqrt(0.75));
  EXPECT_NEAR(static_cast<double>(band), closed, 2.0);
  EXPECT_NEAR(video_mask_density(VideoMaskKind::kSpatial, wan, band), 0.25, 1e-4);
  EXPECT_EQ(band_for_frames(wan, 2.0), 7200);
  EXPECT_EQ(band_for_frames(wan, 0.5), 1800);
  EXPECT_THROW(band_for_frames(wan, -1.0), std::invalid_argument);
  EXPECT_THROW(band_for_density(wan, 0.0), std::invalid_argument);
  EXPECT_THROW(band_for_density(wan, 1.5), std::invalid_argument);
}

// The front door runs a video mask as the band in run order plus, with the
// sink, frame-0 keys as a segment. Together they must keep exactly the mask's
// pairs (mapped to run order) and never the same pair twice.
TEST(VideoMask, RunMasksDecomposeTheMaskExactly) {
  for (const MaskCase& c : all_cases()) {
    const VideoRunMasks run = video_run_masks(c.kind, c.geometry, c.band, c.options);
    const Mask mask = video_mask(c.kind, c.geometry, c.band, c.options);
    const RefVideo ref(c.geometry);
    const bool token_major = c.kind == VideoMaskKind::kTemporal;
    EXPECT_EQ(run.order, token_major ? TokenOrder::kTokenMajor : TokenOrder::kFrameMajor);
    ASSERT_EQ(run.sink.has_value(), c.options.sink);
    const auto original = [&](std::int64_t n) {
      return token_major ? c.geometry.to_frame_major(n) : n;
    };
    const std::int64_t p = ref.patches;
    for (std::int64_t q = 0; q < ref.tokens; ++q) {
      for (std::int64_t k = 0; k < ref.tokens; ++k) {
        const bool in_band = run.band.keeps(q, k);
        bool in_sink = false;
        const std::int64_t ko = original(k);
        if (run.sink && ref.video(ko) && ref.frame(ko) == 0)
          in_sink = run.sink->keeps(q, ref.patch(ko));
        ASSERT_FALSE(in_band && in_sink) << test::describe(c.geometry, c.kind, c.band, c.options);
        ASSERT_EQ(in_band || in_sink, mask.keeps(original(q), ko))
            << test::describe(c.geometry, c.kind, c.band, c.options) << " run q=" << q
            << " k=" << k;
      }
    }
    if (!run.sink) continue;
    // The sink segment node classifies, bounds and evaluates exactly too.
    const Mask& sink = *run.sink;
    std::vector<std::uint8_t> keep(static_cast<std::size_t>(p + 4));
    for (std::int64_t q0 = 0; q0 < ref.tokens; ++q0) {
      for (const std::int64_t len : {1, 2, 5}) {
        const IndexRange rows{q0, std::min(ref.tokens, q0 + len)};
        const IndexRange hull = sink.kv_hull(rows, p);
        for (std::int64_t k0 = 0; k0 < p + 1; ++k0) {
          for (std::int64_t k1 = k0 + 1; k1 <= p + 1; ++k1) {
            bool kept = false, dropped = false;
            for (std::int64_t q = rows.begin; q < rows.end; ++q) {
              for (std::int64_t j = k0; j < k1; ++j) (sink.keeps(q, j) ? kept : dropped) = true;
            }
            const TileKind want =
                !kept ? TileKind::kEmpty : (dropped ? TileKind::kPartial : TileKind::kFull);
            ASSERT_EQ(sink.classify(rows, {k0, k1}), want)
                << test::describe(c.geometry, c.kind, c.band, c.options) << " rows [" << rows.begin
                << "," << rows.end << ") cols [" << k0 << "," << k1 << ")";
          }
        }
        for (std::int64_t q = rows.begin; q < rows.end; ++q) {
          for (std::int64_t j = 0; j < p; ++j) {
            if (sink.keeps(q, j)) {
              ASSERT_TRUE(j >= hull.begin && j < hull.end);
            }
          }
        }
      }
      sink.eval_row(q0, 0, p + 2, keep.data());
      for (std::int64_t j = 0; j < p + 2; ++j) {
        ASSERT_EQ(keep[static_cast<std::size_t>(j)] != 0, sink.keeps(q0, j));
      }
    }
  }
}

TEST(VideoMask, SpatialAndTemporalShareOneBandMask) {
  const VideoGeometry g = video_preset("hunyuan-720p").geometry;
  for (const bool text_full : {false, true}) {
    const VideoRunMasks s = video_run_masks(VideoMaskKind::kSpatial, g, 9000, {true, text_full});
    const VideoRunMasks t = video_run_masks(VideoMaskKind::kTemporal, g, 9000, {true, text_full});
    EXPECT_EQ(s.band, t.band);
    EXPECT_EQ(s.band.hash(), t.band.hash());
    EXPECT_NE(*s.sink, *t.sink);
  }
}

TEST(VideoMask, TemporalSinkPlanStaysSparse) {
  // In token-major order frame 0 is every F-th key; the segment keeps the band
  // plan free of it, and the segment itself has only boundary partial tiles.
  const VideoGeometry g = video_preset("wan2.1-1.3b-480p").geometry;
  const std::int64_t band = band_for_density(g, 0.25, {true, false});
  const VideoRunMasks run = video_run_masks(VideoMaskKind::kTemporal, g, band, {true, false});
  const std::int64_t n = g.tokens();
  const TilePlan band_plan = TilePlan::build(run.band, n, n, {128, 128});
  EXPECT_LT(band_plan.stats().density, 0.25);
  const TilePlan sink_plan = TilePlan::build(*run.sink, n, g.tokens_per_frame(), {128, 128});
  EXPECT_LE(sink_plan.stats().partial, 3 * band_plan.num_q_blocks());
  EXPECT_EQ(band_plan.stats().kept_pairs + sink_plan.stats().kept_pairs,
            count_kept_pairs(VideoMaskKind::kTemporal, g, band, {true, false}));
}

TEST(VideoMask, IdentityHashAndInfo) {
  const VideoGeometry g{4, 3, 2, 5, TextPlacement::kBefore};
  const Mask a = temporal_mask(g, 7, {true, false});
  EXPECT_EQ(a, temporal_mask(g, 7, {true, false}));
  EXPECT_EQ(a.hash(), temporal_mask(g, 7, {true, false}).hash());
  EXPECT_NE(a, temporal_mask(g, 8, {true, false}));
  EXPECT_NE(a, spatial_mask(g, 7, {true, false}));
  EXPECT_NE(a, temporal_mask(g, 7, {false, false}));
  EXPECT_EQ(a.to_string(), "temporal:frames=4,height=3,width=2,text=5,text_at=before,band=7,sink");
  const std::optional<VideoMaskInfo> info = video_mask_info(a);
  ASSERT_TRUE(info);
  EXPECT_EQ(info->kind, VideoMaskKind::kTemporal);
  EXPECT_EQ(info->geometry, g);
  EXPECT_EQ(info->band, 7);
  EXPECT_TRUE(info->options.sink);
  EXPECT_FALSE(video_mask_info(Mask::causal()));
  EXPECT_FALSE(video_mask_info(a | Mask::causal()));
  // OR with a core mask still classifies exactly.
  const Mask mixed = spatial_mask(g, 2) | Mask::local(1, 1);
  EXPECT_EQ(TilePlan::build(mixed, g.tokens(), g.tokens(), {4, 4}).stats().kept_pairs,
            TilePlan::build(
                Mask::function([&](std::int64_t q, std::int64_t k) { return mixed.keeps(q, k); }),
                g.tokens(), g.tokens(), {4, 4})
                .stats()
                .kept_pairs);
}

TEST(VideoMask, RejectsBadArguments) {
  const VideoGeometry g{4, 3, 2, 0, TextPlacement::kNone};
  EXPECT_THROW(spatial_mask(g, -1), std::invalid_argument);
  EXPECT_THROW(spatial_mask({0, 3, 2, 0, TextPlacement::kNone}, 1), std::invalid_argument);
  EXPECT_THROW(temporal_mask({4, 3, 2, 5, TextPlacement::kNone}, 1), std::invalid_argument);
  EXPECT_THROW(count_kept_pairs(VideoMaskKind::kSpatial, g, -2), std::invalid_argument);
  try {
    spatial_mask(g, -1);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("band must be >= 0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tilesplash

namespace tilesplash::test {
namespace {

// A video mask covers exactly its geometry's tokens; a plan over other lengths
// would leave rows empty, so TilePlan::build refuses it, also inside | and &.
TEST(VideoMaskLength, PlanOverOtherLengthsIsRefused) {
  const VideoGeometry geometry = parse_video_geometry("frames=3,height=4,width=5");
  const Mask temporal = parse_mask_spec("temporal:frames=3,height=4,width=5,band=8");
  EXPECT_NO_THROW(TilePlan::build(temporal, 60, 60, {64, 64}));
  for (const Mask& mask : {temporal, temporal | Mask::causal(), Mask::dense() & temporal}) {
    for (const auto& [q_len, kv_len] : {std::pair{300, 300}, {60, 61}, {59, 60}}) {
      try {
        TilePlan::build(mask, q_len, kv_len, {64, 64});
        ADD_FAILURE() << mask.to_string() << " accepted " << q_len << " x " << kv_len;
      } catch (const std::invalid_argument& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("frames=3,height=4,width=5"), std::string::npos) << message;
        EXPECT_NE(
            message.find("q_len and kv_len must both be 60; got q_len " + std::to_string(q_len)),
            std::string::npos)
            << message;
      }
    }
  }
  EXPECT_EQ(geometry.tokens(), 60);
}

}  // namespace
}  // namespace tilesplash::test
