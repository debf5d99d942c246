// The mask families defined over a video's tokens (spatial, temporal, the
// sink segment, radial, sta and its tile-major run, svg2's clusters) and
// window masks, asked about indices anywhere in int64: outside the tokens
// nothing is kept, and classify(), kv_hull() and eval_row() agree with
// keeps() on tiles at INT64_MIN, straddling 0 and the last token, near 2^62
// and at INT64_MAX, with no overflow on the way (UBSan builds check that).
// The core families' ends are in mask_test.cc, against their definitions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "methods/band/video_nodes.h"
#include "tilesplash/clusters.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan_window.h"
#include "tilesplash/radial.h"
#include "tilesplash/sta.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t k62 = std::int64_t{1} << 62;
constexpr std::int64_t kTile = 5;

struct Family {
  std::string name;
  Mask mask;
  std::int64_t tokens;  // keeps nothing outside [0, tokens)
};

HeadClusters striped_clusters(std::int64_t video, std::int64_t qc, std::int64_t kc) {
  const auto make = [video](std::int64_t clusters) {
    KMeansResult r;
    r.clusters = clusters;
    r.dim = 1;
    r.centroids.assign(static_cast<std::size_t>(clusters), 0.0f);
    r.sizes.assign(static_cast<std::size_t>(clusters), 0);
    for (std::int64_t u = 0; u < video; ++u) {
      r.labels.push_back(static_cast<std::int32_t>(u % clusters));
      ++r.sizes[static_cast<std::size_t>(u % clusters)];
    }
    return r;
  };
  return {make(qc), make(kc)};
}

std::vector<Family> families() {
  const VideoGeometry g{4, 3, 5, 6, TextPlacement::kBefore};  // 66 tokens
  const VideoGeometry big{3, 8, 8, 0, TextPlacement::kNone};  // 192 tokens, sta tiles
  const std::int64_t t = g.tokens();
  std::vector<Family> out;
  for (const VideoMaskKind kind : {VideoMaskKind::kSpatial, VideoMaskKind::kTemporal}) {
    for (const std::int64_t band : {std::int64_t{4}, kMax}) {
      const std::string name = std::string(to_string(kind)) + "_" + std::to_string(band);
      out.push_back({name, video_mask(kind, g, band, {true, true}), t});
    }
  }
  out.push_back({"sink_segment",
                 Mask(std::make_shared<detail::SinkSegmentNode>(g.video_range(), 15, 7, 4)),
                 g.video_range().end});
  out.push_back({"radial", radial_mask(g, {0.5, 4, true}), t});
  out.push_back({"sta", sta_mask(big, {{2, 4, 4}, {1, 1, 3}}), big.tokens()});
  const HeadClusters clusters = striped_clusters(g.video_tokens(), 3, 4);
  const std::vector<std::uint8_t> kept = {1, 0, 0, 1, 0, 1, 1, 0, 1, 0, 0, 0};
  const ClusterMasks masks = cluster_masks(g, clusters, kept);
  out.push_back({"clusters", masks.mask, t});
  out.push_back({"clusters_run", masks.run.mask, t});
  return out;
}

TileKind scan_keeps(const Mask& mask, IndexRange rows, IndexRange cols) {
  bool kept = false, dropped = false;
  for (std::int64_t q = rows.begin; q < rows.end; ++q) {
    for (std::int64_t k = cols.begin; k < cols.end; ++k) (mask.keeps(q, k) ? kept : dropped) = true;
  }
  if (!kept) return TileKind::kEmpty;
  return dropped ? TileKind::kPartial : TileKind::kFull;
}

// Tile corners at the ends of int64, straddling 0 and the last token, and near 2^62.
std::vector<std::int64_t> corners(std::int64_t tokens) {
  return {kMin, kMin + 3, -k62, -2, 0, tokens - 3, tokens + 1, k62, kMax - kTile};
}

TEST(MaskIndexEdges, VideoFamiliesAnswerConsistentlyAnywhereInInt64) {
  for (const Family& f : families()) {
    std::uint8_t keep[kTile];
    for (const std::int64_t q0 : corners(f.tokens)) {
      for (const std::int64_t k0 : corners(f.tokens)) {
        for (std::int64_t q = q0; q < q0 + kTile; ++q) {
          f.mask.eval_row(q, k0, kTile, keep);
          for (std::int64_t i = 0; i < kTile; ++i) {
            const std::int64_t k = k0 + i;
            const bool kept = f.mask.keeps(q, k);
            ASSERT_EQ(keep[i], kept ? 1 : 0) << f.name << " q=" << q << " k=" << k;
            if (q < 0 || q >= f.tokens || k < 0 || k >= f.tokens) {
              ASSERT_FALSE(kept) << f.name << " q=" << q << " k=" << k;
            }
          }
        }
        for (std::int64_t rows = 1; rows <= kTile; ++rows) {
          const IndexRange r{q0, q0 + rows}, c{k0 + kTile - rows, k0 + kTile};
          ASSERT_EQ(f.mask.classify(r, c), scan_keeps(f.mask, r, c))
              << f.name << " rows [" << r.begin << "," << r.end << ") cols [" << c.begin << ","
              << c.end << ")";
        }
        const IndexRange hull = f.mask.kv_hull({q0, q0 + kTile}, kMax);
        for (std::int64_t q = q0; q < q0 + kTile; ++q) {
          for (std::int64_t k = std::max<std::int64_t>(k0, 0); k < k0 + kTile; ++k) {
            if (f.mask.keeps(q, k)) {
              ASSERT_TRUE(k >= hull.begin && k < hull.end) << f.name;
            }
          }
        }
      }
    }
    // Ranges as wide as int64 allows are classified without scanning forever.
    EXPECT_EQ(f.mask.classify({kMin, kMin + 1}, {kMin, kMax}), TileKind::kEmpty) << f.name;
    EXPECT_EQ(f.mask.classify({k62, kMax}, {0, kMax}), TileKind::kEmpty) << f.name;
  }
}

// A window at the top of an int64-long map: local indices shift onto global
// ones up to INT64_MAX - 1, and local indices whose global index would pass
// INT64_MAX keep nothing instead of wrapping to the map's start.
TEST(MaskIndexEdges, WindowsAtTheTopOfInt64) {
  const Mask global = Mask::causal(k62) | Mask::local(1, 1, -k62);
  const MaskWindow window{{kMax - 10, kMax}, {k62 - 6, k62 + 4}, kMax, kMax};
  const Mask local = window_mask(global, window);
  std::uint8_t keep[10];
  for (std::int64_t i = 0; i < 10; ++i) {
    local.eval_row(i, 0, 10, keep);
    for (std::int64_t j = 0; j < 10; ++j) {
      const bool kept = global.keeps(window.q.begin + i, window.kv.begin + j);
      ASSERT_EQ(local.keeps(i, j), kept) << i << "," << j;
      ASSERT_EQ(keep[j], kept ? 1 : 0) << i << "," << j;
    }
  }
  const TilePlan plan = build_window_plan(global, window, {4, 64});
  EXPECT_EQ(plan.q_len(), 10);
  EXPECT_EQ(local.classify({0, 10}, {0, 10}), scan_keeps(local, {0, 10}, {0, 10}));
  // Local row 10 is global row INT64_MAX, which exists; row 11 would pass it.
  EXPECT_EQ(local.keeps(10, 0), global.keeps(kMax, window.kv.begin));
  EXPECT_FALSE(local.keeps(11, 0));
  EXPECT_FALSE(local.keeps(kMax, kMax));
  EXPECT_EQ(local.classify({10, kMax}, {0, 10}), TileKind::kEmpty);
  local.eval_row(kMax - 1, 0, 10, keep);
  EXPECT_TRUE(std::all_of(keep, keep + 10, [](std::uint8_t b) { return b == 0; }));
  const MaskWindow top{{0, 4}, {kMax - 4, kMax}, 4, kMax};
  const Mask top_local = window_mask(Mask::dense(), top);
  top_local.eval_row(0, 0, 8, keep);  // keys 4.. would pass INT64_MAX
  EXPECT_EQ(std::count(keep, keep + 8, 1), 4);
  EXPECT_EQ(classify_window(Mask::causal(k62), {k62, k62 + 16}, {0, 16}), TileKind::kFull);
}

}  // namespace
}  // namespace tilesplash
