// Window plans (plan_window.h) against brute force: for every mask family,
// many windows of a global map (ragged, at the edges, empty, the whole map)
// and several tile sizes, each tile's kind and bits equal a scan of the
// global mask's keeps() over the tile's global pairs; classify_window()
// equals a scan of the whole window; the window mask compares, hashes and
// checks lengths as documented.
#include "tilesplash/plan_window.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace {

struct NamedMask {
  Mask mask;
  std::int64_t len;  // the global map is len x len
};

std::vector<NamedMask> global_masks() {
  constexpr std::int64_t n = 41;
  std::vector<NamedMask> masks = {
      {Mask::dense(), n},
      {Mask::causal(), n},
      {Mask::causal(-9), n},
      {Mask::local(3, 7), n},
      {Mask::local(std::nullopt, 4, 2), n},
      {Mask::chunked_causal(6), n},
      {Mask::random(0.3, 7), n},
      {Mask::function([](std::int64_t q, std::int64_t k) { return (q * 7 + k * 3) % 5 < 2; },
                      "stripes"),
       n},
      {Mask::local(2, 2) | Mask::chunked_causal(8), n},
      {Mask::causal() & Mask::local(5, std::nullopt), n},
  };
  const VideoGeometry plain{3, 2, 3};  // 18 tokens, 6 per frame
  const VideoGeometry text_after{3, 2, 3, 4, TextPlacement::kAfter};
  const VideoGeometry text_before{4, 2, 2, 3, TextPlacement::kBefore};
  for (const VideoGeometry& g : {plain, text_after, text_before}) {
    for (const VideoMaskKind kind : {VideoMaskKind::kSpatial, VideoMaskKind::kTemporal}) {
      for (const VideoMaskOptions options :
           {VideoMaskOptions{false, false}, VideoMaskOptions{true, false},
            VideoMaskOptions{true, true}}) {
        masks.push_back({video_mask(kind, g, 4, options), g.tokens()});
      }
    }
  }
  return masks;
}

std::vector<MaskWindow> windows(std::int64_t n) {
  std::vector<MaskWindow> out;
  const std::int64_t third = n / 3;
  for (const IndexRange q : {IndexRange{0, n}, IndexRange{0, third}, IndexRange{third, 2 * third},
                             IndexRange{2 * third, n}, IndexRange{5, 6}, IndexRange{n - 1, n}}) {
    for (const IndexRange kv :
         {IndexRange{0, n}, IndexRange{0, third}, IndexRange{third, 2 * third},
          IndexRange{2 * third, n}, IndexRange{1, n - 1}, IndexRange{n - 3, n}}) {
      out.push_back({q, kv, n, n});
    }
  }
  return out;
}

TileKind brute_kind(const Mask& global, IndexRange rows, IndexRange cols) {
  bool kept = false, dropped = false;
  for (std::int64_t q = rows.begin; q < rows.end; ++q) {
    for (std::int64_t k = cols.begin; k < cols.end; ++k)
      (global.keeps(q, k) ? kept : dropped) = true;
  }
  if (!kept) return TileKind::kEmpty;
  return dropped ? TileKind::kPartial : TileKind::kFull;
}

std::string describe(const Mask& mask, const MaskWindow& w, BlockSizes blocks) {
  return mask.to_string() + " window q [" + std::to_string(w.q.begin) + ", " +
         std::to_string(w.q.end) + ") kv [" + std::to_string(w.kv.begin) + ", " +
         std::to_string(w.kv.end) + ") tiles " + std::to_string(blocks.block_q) + "x" +
         std::to_string(blocks.block_kv);
}

void expect_window_plan_matches(const Mask& global, const MaskWindow& w, BlockSizes blocks) {
  SCOPED_TRACE(describe(global, w, blocks));
  const TilePlan plan = build_window_plan(global, w, blocks);
  ASSERT_EQ(plan.q_len(), w.q.size());
  ASSERT_EQ(plan.kv_len(), w.kv.size());
  ASSERT_EQ(plan.mask(), window_mask(global, w));
  std::int64_t kept_pairs = 0;
  for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
    const IndexRange rows = plan.q_range(qb);
    const IndexRange global_rows{rows.begin + w.q.begin, rows.end + w.q.begin};
    for (std::int64_t kb = 0; kb < plan.num_kv_blocks(); ++kb) {
      const IndexRange cols = plan.kv_range(kb);
      const IndexRange global_cols{cols.begin + w.kv.begin, cols.end + w.kv.begin};
      const TileKind expected = brute_kind(global, global_rows, global_cols);
      ASSERT_EQ(to_char(plan.kind(qb, kb)), to_char(expected)) << " tile " << qb << "," << kb;
      if (expected == TileKind::kFull) kept_pairs += rows.size() * cols.size();
    }
    for (const PlanTile& tile : plan.tiles(qb)) {
      if (tile.is_full()) continue;
      const IndexRange cols = plan.kv_range(tile.kv_block);
      const std::uint64_t* bits = plan.partial_bits(tile.partial_id);
      for (std::int64_t r = 0; r < rows.size(); ++r) {
        for (std::int64_t j = 0; j < cols.size(); ++j) {
          const bool bit = (bits[r * plan.words_per_row() + j / 64] >> (j % 64)) & 1;
          const bool keep = global.keeps(w.q.begin + rows.begin + r, w.kv.begin + cols.begin + j);
          ASSERT_EQ(bit, keep) << " tile " << qb << "," << tile.kv_block << " pair " << r << ","
                               << j;
          kept_pairs += keep;
        }
      }
    }
  }
  EXPECT_EQ(plan.stats().kept_pairs, kept_pairs);
}

TEST(PlanWindow, EveryTileMatchesTheGlobalMaskRestrictedToTheWindow) {
  for (const NamedMask& m : global_masks()) {
    for (const MaskWindow& w : windows(m.len)) {
      for (const BlockSizes blocks : {BlockSizes{4, 4}, BlockSizes{3, 5}, BlockSizes{7, 64}}) {
        expect_window_plan_matches(m.mask, w, blocks);
      }
    }
  }
}

TEST(PlanWindow, ClassifyWindowMatchesAScanOfTheWindow) {
  for (const NamedMask& m : global_masks()) {
    const std::int64_t n = m.len;
    for (std::int64_t q0 = 0; q0 <= n; q0 += 4) {
      for (std::int64_t q1 = q0; q1 <= n; q1 += 7) {
        for (std::int64_t k0 = 0; k0 <= n; k0 += 5) {
          for (std::int64_t k1 = k0; k1 <= n; k1 += 6) {
            const IndexRange q{q0, q1}, kv{k0, k1};
            ASSERT_EQ(to_char(classify_window(m.mask, q, kv)), to_char(brute_kind(m.mask, q, kv)))
                << m.mask.to_string() << " q [" << q0 << ", " << q1 << ") kv [" << k0 << ", " << k1
                << ")";
          }
        }
      }
    }
  }
}

TEST(PlanWindow, RingOfCausalShardsSkipsExactlyTheStepsAboveTheDiagonal) {
  // Four ranks of 25 tokens: rank r's queries see shard s's keys iff s <= r.
  const Mask causal = Mask::causal();
  for (std::int64_t r = 0; r < 4; ++r) {
    for (std::int64_t s = 0; s < 4; ++s) {
      const TileKind kind = classify_window(causal, {25 * r, 25 * r + 25}, {25 * s, 25 * s + 25});
      EXPECT_EQ(kind == TileKind::kEmpty, s > r) << r << " " << s;
      EXPECT_EQ(kind == TileKind::kFull, s < r) << r << " " << s;
    }
  }
}

TEST(PlanWindow, BuiltInMasksClassifyWindowTilesWithoutScanning) {
  // A window 10^12 rows below the diagonal of a causal map of 2^50 tokens:
  // a million by a million, every tile full. Any per-element work would take
  // hours; shifting the ranges takes a few thousand classifications.
  const std::int64_t n = std::int64_t{1} << 50;
  const MaskWindow w{{1'000'000'000'000, 1'000'001'000'000}, {0, 1'000'000}, n, n};
  const TilePlan plan = build_window_plan(Mask::causal(), w, {1024, 1024});
  EXPECT_EQ(plan.stats().partial, 0);
  EXPECT_EQ(plan.stats().empty, 0);
  EXPECT_EQ(plan.stats().full, plan.num_q_blocks() * plan.num_kv_blocks());
  EXPECT_EQ(plan.stats().kept_pairs, w.q.size() * w.kv.size());
  EXPECT_EQ(classify_window(Mask::causal(), w.q, w.kv), TileKind::kFull);
  EXPECT_EQ(classify_window(Mask::causal(), w.kv, w.q), TileKind::kEmpty);
}

TEST(PlanWindow, WindowMaskEqualityHashAndText) {
  const Mask causal = Mask::causal();
  const MaskWindow a{{0, 10}, {10, 20}, 30, 30};
  const MaskWindow b{{0, 10}, {20, 30}, 30, 30};
  EXPECT_EQ(window_mask(causal, a), window_mask(Mask::causal(), a));
  EXPECT_EQ(window_mask(causal, a).hash(), window_mask(Mask::causal(), a).hash());
  EXPECT_FALSE(window_mask(causal, a) == window_mask(causal, b));
  EXPECT_FALSE(window_mask(causal, a) == window_mask(Mask::causal(1), a));
  EXPECT_FALSE(window_mask(causal, a) == causal);
  EXPECT_EQ(window_mask(causal, a).to_string(), "window(q=0:10,kv=10:20,of=30x30):causal");
  EXPECT_TRUE(window_mask(causal, a).is_analytic());
  EXPECT_FALSE(window_mask(Mask::random(0.5, 1), a).is_analytic());
  // Local keys: keeps(i, j) is the global pair shifted by the window's corner.
  const Mask local = window_mask(Mask::local(1, 1), {{10, 20}, {12, 22}, 30, 30});
  EXPECT_TRUE(local.keeps(3, 1));                            // global (13, 13)
  EXPECT_FALSE(local.keeps(3, 4));                           // global (13, 16)
  EXPECT_EQ(local.kv_hull({2, 3}, 10), (IndexRange{0, 2}));  // global keys 11..13
  EXPECT_TRUE(local.kv_hull({0, 1}, 10).empty());            // global keys 9..11
}

TEST(PlanWindow, BadWindowsAndLengthsNameTheArgument) {
  const Mask causal = Mask::causal();
  const auto expect_error = [](auto&& call, const std::string& text) {
    try {
      call();
      ADD_FAILURE() << "no exception; expected one mentioning " << text;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  expect_error([&] { window_mask(causal, {{0, 10}, {0, 10}, 0, 10}); }, "q_len must be >= 1");
  expect_error([&] { window_mask(causal, {{0, 11}, {0, 10}, 10, 10}); }, "window: q must");
  expect_error([&] { window_mask(causal, {{0, 10}, {-1, 10}, 10, 10}); }, "window: kv must");
  expect_error([&] { window_mask(causal, {{5, 4}, {0, 10}, 10, 10}); }, "window: q must");
  expect_error(
      [&] {
        build_window_plan(causal, {{3, 3}, {0, 10}, 10, 10}, {4, 4});
      },
      "q_len must be >= 1");
  // The window mask plans exactly the window's sizes.
  const Mask w = window_mask(causal, {{0, 10}, {10, 25}, 30, 30});
  expect_error([&] { TilePlan::build(w, 10, 16, {4, 4}); }, "10 query rows and 15 keys");
  // A video mask covers its geometry's tokens: the global lengths must match.
  const VideoGeometry g{3, 2, 3};
  const Mask video = video_mask(VideoMaskKind::kSpatial, g, 4, {});
  EXPECT_NO_THROW(window_mask(video, {{0, 6}, {6, 12}, 18, 18}));
  expect_error(
      [&] {
        window_mask(video, {{0, 6}, {6, 12}, 12, 12});
      },
      "window of a 12 x 12 map: mask spatial");
}

}  // namespace
}  // namespace tilesplash
