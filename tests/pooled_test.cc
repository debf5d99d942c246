// The pooled-score method's selection (pooled.h) against a brute-force
// reference written from its definition: a dense matrix of pooled masses per
// (query tile, key tile), forced tiles first, the others by falling mass to p
// with the floor. Then its mask and plan, attention through the plan against
// the float64 reference, thread counts and argument errors.
#include "tilesplash/pooled.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/reference.h"

namespace tilesplash {
namespace {

using test::HostTensor;

// Frame-major: the reference below is written in the original order
// (pooled_order_test.cc checks token-major and the choice between them).
PooledOptions make(double p, std::int64_t floor, double gate, BlockSizes blocks, bool sink = false,
                   std::optional<double> density = std::nullopt) {
  PooledOptions o;
  o.order = PooledOrder::kFrame;
  o.p = p;
  o.floor = floor;
  o.gate = gate;
  o.blocks = blocks;
  o.sink = sink;
  o.density = density;
  return o;
}

struct Inputs {
  HostTensor q, k, v;
};

Inputs random_inputs(std::int64_t heads, std::int64_t n, std::int64_t d, std::uint64_t seed) {
  Inputs in{HostTensor(DType::kF32, heads, n, d), HostTensor(DType::kF32, heads, n, d),
            HostTensor(DType::kF32, heads, n, d)};
  in.q.fill_normal(seed);
  in.k.fill_normal(seed + 1);
  in.v.fill_normal(seed + 2);
  return in;
}

IndexRange span_of(std::int64_t t, std::int64_t block, std::int64_t n) {
  return {t * block, std::min(n, (t + 1) * block)};
}

bool overlaps(IndexRange a, IndexRange b) { return a.begin < b.end && b.begin < a.end; }

// Mean of rows [r.begin, r.end) of head h, in double, in row order.
std::vector<double> mean_of(const HostTensor& t, std::int64_t h, IndexRange r) {
  std::vector<double> m(static_cast<std::size_t>(t.dim()), 0.0);
  for (std::int64_t i = r.begin; i < r.end; ++i) {
    for (std::int64_t c = 0; c < t.dim(); ++c) m[static_cast<std::size_t>(c)] += t.get(h, i, c);
  }
  for (double& x : m) x /= static_cast<double>(r.size());
  return m;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t c = 0; c < a.size(); ++c) s += a[c] * b[c];
  return s;
}

// The selection from its definition: rows of kept key tiles, ascending.
std::vector<std::vector<std::int32_t>> reference_selection(const VideoGeometry& g, const Inputs& in,
                                                           std::int64_t h, double scale,
                                                           const PooledOptions& o) {
  const std::int64_t n = g.tokens(), bq = o.blocks.block_q, bk = o.blocks.block_kv;
  const std::int64_t qt = (n + bq - 1) / bq, kt = (n + bk - 1) / bk;
  std::vector<std::vector<double>> kmean(static_cast<std::size_t>(kt));
  std::vector<bool> forced_col(static_cast<std::size_t>(kt), false);
  const IndexRange first{g.video_range().begin, g.video_range().begin + g.tokens_per_frame()};
  for (std::int64_t j = 0; j < kt; ++j) {
    const IndexRange cols = span_of(j, bk, n);
    kmean[static_cast<std::size_t>(j)] = mean_of(in.k, h, cols);
    const std::vector<double>& m = kmean[static_cast<std::size_t>(j)];
    double sim = 0.0;
    for (std::int64_t i = cols.begin; i < cols.end; ++i) {
      const std::vector<double> key = mean_of(in.k, h, {i, i + 1});
      const double nk = std::sqrt(dot(key, key)), nm = std::sqrt(dot(m, m));
      sim += (nk == 0.0 || nm == 0.0) ? (nk == nm ? 1.0 : 0.0)
                                      : std::clamp(dot(key, m) / (nk * nm), -1.0, 1.0);
    }
    sim /= static_cast<double>(cols.size());
    forced_col[static_cast<std::size_t>(j)] = sim < o.gate || (o.sink && overlaps(cols, first)) ||
                                              (o.text_full && overlaps(cols, g.text_range()));
  }
  std::vector<std::vector<std::int32_t>> rows;
  for (std::int64_t i = 0; i < qt; ++i) {
    const IndexRange qr = span_of(i, bq, n);
    const std::vector<double> qm = mean_of(in.q, h, qr);
    std::vector<double> w(static_cast<std::size_t>(kt));
    double top = -INFINITY, total = 0.0;
    for (std::int64_t j = 0; j < kt; ++j) top = std::max(top, scale * dot(qm, kmean[j]));
    for (std::int64_t j = 0; j < kt; ++j) {
      w[j] =
          static_cast<double>(span_of(j, bk, n).size()) * std::exp(scale * dot(qm, kmean[j]) - top);
      total += w[j];
    }
    std::vector<std::int32_t> kept, others;
    double mass = 0.0;
    for (std::int64_t j = 0; j < kt; ++j) {
      w[j] /= total;
      const bool full_row = o.text_full && overlaps(qr, g.text_range());
      if (forced_col[j] || full_row || overlaps(qr, span_of(j, bk, n))) {
        kept.push_back(static_cast<std::int32_t>(j));
        mass += w[j];
      } else {
        others.push_back(static_cast<std::int32_t>(j));
      }
    }
    std::stable_sort(others.begin(), others.end(),
                     [&](std::int32_t a, std::int32_t b) { return w[a] > w[b]; });
    for (const std::int32_t j : others) {
      const bool floor = static_cast<std::int64_t>(kept.size()) < o.floor;
      if (!(floor || (w[j] > 0.0 && (o.p >= 1.0 || mass < o.p)))) break;
      kept.push_back(j);
      mass += w[j];
    }
    std::sort(kept.begin(), kept.end());
    rows.push_back(kept);
  }
  return rows;
}

std::vector<std::vector<std::int32_t>> rows_of(const PooledSelection& s) {
  std::vector<std::vector<std::int32_t>> rows;
  for (std::int64_t i = 0; i < s.q_tiles; ++i) {
    rows.emplace_back(s.kept.begin() + s.row_offsets[i], s.kept.begin() + s.row_offsets[i + 1]);
  }
  return rows;
}

VideoGeometry geometry(std::int64_t frames, std::int64_t h, std::int64_t w, std::int64_t text = 0,
                       TextPlacement at = TextPlacement::kNone) {
  return {frames, h, w, text, at};
}

struct Case {
  VideoGeometry g;
  BlockSizes blocks;
};

// Ragged lengths, one token, one tile, a tile minus and plus one, text on
// either side.
std::vector<Case> cases() {
  return {{geometry(1, 1, 1), {8, 8}},
          {geometry(1, 1, 7), {8, 8}},
          {geometry(1, 1, 8), {8, 8}},
          {geometry(1, 1, 9), {8, 8}},
          {geometry(3, 4, 5), {8, 8}},
          {geometry(3, 4, 5), {16, 8}},
          {geometry(2, 3, 7, 5, TextPlacement::kAfter), {8, 8}},
          {geometry(2, 3, 7, 6, TextPlacement::kBefore), {4, 8}}};
}

TEST(PooledSelect, MatchesTheBruteForceDefinition) {
  int checked = 0;
  for (const Case& c : cases()) {
    const Inputs in = random_inputs(2, c.g.tokens(), 8, 11);
    for (const double p : {0.3, 0.7, 0.98, 1.0}) {
      for (const std::int64_t floor : {0, 1, 3}) {
        for (const double gate : {-1.0, 0.0, 0.6}) {
          for (const bool sink : {false, true}) {
            const PooledOptions o = make(p, floor, gate, c.blocks, sink);
            for (std::int64_t h = 0; h < 2; ++h) {
              const double scale = 1.0 / std::sqrt(8.0);
              const PooledSelection s = pooled_select(c.g, in.q.view(), in.k.view(), h, scale, o);
              ASSERT_EQ(rows_of(s), reference_selection(c.g, in, h, scale, o))
                  << c.g.to_string() << " p " << p << " floor " << floor << " gate " << gate;
              ++checked;
            }
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 500);
}

TEST(PooledSelect, PEqualOneKeepsEveryTileWithMass) {
  const VideoGeometry g = geometry(3, 4, 5);
  const Inputs in = random_inputs(1, g.tokens(), 8, 3);
  const PooledSelection s =
      pooled_select(g, in.q.view(), in.k.view(), 0, 0.35, make(1.0, 0, -1.0, {8, 8}));
  EXPECT_EQ(static_cast<std::int64_t>(s.kept.size()), s.q_tiles * s.kv_tiles);
  EXPECT_EQ(s.kept_pairs, g.tokens() * g.tokens());
  EXPECT_DOUBLE_EQ(s.density, 1.0);
}

TEST(PooledSelect, TheFloorIsHonoured) {
  const VideoGeometry g = geometry(4, 4, 4);
  const Inputs in = random_inputs(1, g.tokens(), 8, 5);
  for (const std::int64_t floor : {0, 1, 2, 5, 100}) {
    const PooledSelection s =
        pooled_select(g, in.q.view(), in.k.view(), 0, 0.35, make(1e-9, floor, -1.0, {8, 8}));
    for (std::int64_t i = 0; i < s.q_tiles; ++i) {
      EXPECT_GE(s.row_offsets[i + 1] - s.row_offsets[i], std::min(floor, s.kv_tiles));
      EXPECT_GE(s.row_offsets[i + 1] - s.row_offsets[i], 1);  // the diagonal
    }
  }
}

bool kept(const PooledSelection& s, std::int64_t i, std::int32_t j) {
  return std::binary_search(s.kept.begin() + s.row_offsets[i],
                            s.kept.begin() + s.row_offsets[i + 1], j);
}

TEST(PooledSelect, DiagonalSinkTextAndDissimilarTilesAreKept) {
  // Text after the video; key tile 5 (rows 40..47) alternates +x and -x:
  // its mean is zero and its keys are not self-similar.
  const VideoGeometry g = geometry(3, 4, 4, 8, TextPlacement::kAfter);  // 56 tokens
  Inputs in = random_inputs(1, g.tokens(), 8, 9);
  for (std::int64_t r = 40; r < 48; ++r) {
    for (std::int64_t c = 0; c < 8; ++c) in.k.set(0, r, c, (r % 2 == 0 ? 1.0f : -1.0f) * float(c));
  }
  const PooledOptions o = make(1e-9, 0, 0.6, {8, 8}, true);
  const PooledSelection s = pooled_select(g, in.q.view(), in.k.view(), 0, 0.35, o);
  for (std::int64_t i = 0; i < s.q_tiles; ++i) {
    EXPECT_TRUE(kept(s, i, static_cast<std::int32_t>(i))) << "diagonal " << i;
    EXPECT_TRUE(kept(s, i, 0) && kept(s, i, 1)) << "sink (the first frame: tokens 0..15)";
    EXPECT_TRUE(kept(s, i, 6)) << "text columns (48..55)";
    EXPECT_TRUE(kept(s, i, 5)) << "the dissimilar key tile";
  }
  EXPECT_EQ(s.row_offsets[7] - s.row_offsets[6], s.kv_tiles) << "text rows keep every tile";
  PooledOptions no_gate = o;
  no_gate.gate = -1.0;
  no_gate.sink = false;
  const PooledSelection t = pooled_select(g, in.q.view(), in.k.view(), 0, 0.35, no_gate);
  EXPECT_FALSE(kept(t, 0, 5));
  EXPECT_FALSE(kept(t, 0, 2) && kept(t, 0, 3) && kept(t, 0, 4));
}

TEST(PooledSelect, MaskAndPlanAreTheSelection) {
  const VideoGeometry g = geometry(3, 5, 5, 3, TextPlacement::kAfter);  // 78 tokens, ragged
  const Inputs in = random_inputs(1, g.tokens(), 8, 21);
  const PooledSelection s =
      pooled_select(g, in.q.view(), in.k.view(), 0, 0.35, make(0.6, 1, 0.6, {8, 16}));
  const Mask mask = pooled_mask(s);
  const std::int64_t n = g.tokens();
  std::int64_t pairs = 0;
  for (std::int64_t q = 0; q < n; ++q) {
    for (std::int64_t k = 0; k < n; ++k) {
      ASSERT_EQ(mask.keeps(q, k), kept(s, q / 8, static_cast<std::int32_t>(k / 16)));
      pairs += mask.keeps(q, k) ? 1 : 0;
    }
  }
  EXPECT_EQ(pairs, s.kept_pairs);
  const TilePlan plan = pooled_plan(s);
  EXPECT_EQ(plan.stats().partial, 0);
  ASSERT_EQ(plan.num_q_blocks(), s.q_tiles);
  for (std::int64_t i = 0; i < s.q_tiles; ++i) {
    std::vector<std::int32_t> tiles;
    for (auto t = plan.row_offsets()[i]; t < plan.row_offsets()[i + 1]; ++t) {
      tiles.push_back(static_cast<std::int32_t>(plan.all_tiles()[t].kv_block));
    }
    EXPECT_EQ(tiles, rows_of(s)[i]);
  }
}

// The kernel's tiles: block_kv a multiple of 64.
std::vector<Case> kernel_cases() {
  return {{geometry(1, 1, 1), {16, 64}},
          {geometry(1, 7, 9), {32, 64}},
          {geometry(1, 8, 8), {64, 64}},
          {geometry(1, 5, 13), {16, 64}},
          {geometry(3, 5, 9, 5, TextPlacement::kAfter), {32, 64}},
          {geometry(2, 8, 8, 6, TextPlacement::kBefore), {64, 64}}};
}

TEST(PooledSelect, AttentionThroughThePlanMatchesTheFloat64Reference) {
  for (const Case& c : kernel_cases()) {
    const Inputs in = random_inputs(1, c.g.tokens(), 16, 31);
    const PooledSelection s =
        pooled_select(c.g, in.q.view(), in.k.view(), 0, 0.25, make(0.5, 1, 0.6, c.blocks));
    const TilePlan plan = pooled_plan(s);
    AttentionOptions options;
    options.scale = 0.25f;
    const test::Outputs o = test::run_forward(plan, in.q, in.k, in.v, DType::kF32, options);
    const auto ref = test::reference_all_heads(pooled_mask(s), in.q, in.k, in.v, 0.25);
    EXPECT_TRUE(test::matches_reference(
        ref, o.out, o.lse.data(), test::tolerance_for(DType::kF32, DType::kF32), in.v.max_abs()))
        << c.g.to_string();
  }
}

TEST(PooledSelect, BitIdenticalAcrossThreadCounts) {
  const VideoGeometry g = geometry(4, 6, 6);
  const Inputs in = random_inputs(2, g.tokens(), 16, 41);
  const PooledOptions o = make(0.98, 1, 0.6, {8, 8}, true, 0.3);
  ThreadingContext one(1);
  const PooledSelection a = pooled_select(g, in.q.view(), in.k.view(), 1, 0.25, o, 1, &one);
  for (const int threads : {2, 3, 7}) {
    ThreadingContext many(threads);
    const PooledSelection b =
        pooled_select(g, in.q.view(), in.k.view(), 1, 0.25, o, threads, &many);
    EXPECT_EQ(a.kept, b.kept);
    EXPECT_EQ(a.row_offsets, b.row_offsets);
    EXPECT_EQ(a.p, b.p);
  }
}

TEST(PooledSelect, ADensityIsMetByTheSmallestP) {
  const VideoGeometry g = geometry(4, 6, 6);
  const Inputs in = random_inputs(1, g.tokens(), 16, 51);
  for (const double density : {0.1, 0.25, 0.5, 0.9, 1.0}) {
    const PooledOptions o = make(0.98, 1, -1.0, {8, 8}, false, density);
    const PooledSelection s = pooled_select(g, in.q.view(), in.k.view(), 0, 0.25, o);
    EXPECT_GE(s.density, density) << density;
    EXPECT_GT(s.p, 0.0);
    EXPECT_LE(s.p, 1.0);
    // The same p given directly makes the same selection; a slightly
    // smaller one keeps less than the density (unless the forced tiles do).
    PooledOptions at = o;
    at.density.reset();
    at.p = s.p;
    EXPECT_EQ(pooled_select(g, in.q.view(), in.k.view(), 0, 0.25, at).kept, s.kept);
    at.p = std::nextafter(s.p, 0.0);
    if (at.p > 0.0 && s.p < 1.0) {
      const PooledSelection less = pooled_select(g, in.q.view(), in.k.view(), 0, 0.25, at);
      EXPECT_TRUE(less.density < density || less.kept == s.kept) << density;
    }
  }
}

TEST(PooledSelect, WithADensityTheGateKeepsWithinItsShare) {
  const VideoGeometry g = geometry(4, 6, 6);  // 144 tokens, 18 key tiles of 8
  const Inputs in = random_inputs(1, g.tokens(), 16, 61);
  // gate 1: every tile of distinct keys fails it.
  const PooledSelection all =
      pooled_select(g, in.q.view(), in.k.view(), 0, 0.25, make(0.5, 0, 1.0, {8, 8}));
  EXPECT_EQ(all.density, 1.0);
  for (const double share : {0.0, 0.5, 1.0}) {
    PooledOptions o = make(0.98, 0, 1.0, {8, 8}, false, 0.3);
    o.gate_share = share;
    const PooledSelection s = pooled_select(g, in.q.view(), in.k.view(), 0, 0.25, o);
    EXPECT_GE(s.density, 0.3) << share;
    // Gated columns within share x 0.3 of the map, each kept in every row.
    std::int64_t full_columns = 0;
    for (std::int32_t j = 0; j < static_cast<std::int32_t>(s.kv_tiles); ++j) {
      bool every_row = true;
      for (std::int64_t i = 0; i < s.q_tiles; ++i) every_row = every_row && kept(s, i, j);
      full_columns += every_row ? 1 : 0;
    }
    EXPECT_GE(full_columns, std::int64_t(std::floor(share * 0.3 * 18 + 1e-9))) << share;
    if (share < 1.0) {
      EXPECT_LT(s.density, 1.0) << share;
    }
  }
  PooledOptions bad = make(0.9, 1, 0.6, {8, 8});
  bad.gate_share = 1.5;
  EXPECT_THROW(pooled_select(g, in.q.view(), in.k.view(), 0, 0.25, bad), std::invalid_argument);
}

void expect_refused(const PooledOptions& o, const std::string& name) {
  const VideoGeometry g = geometry(1, 2, 4);
  const Inputs in = random_inputs(1, g.tokens(), 8, 1);
  try {
    pooled_select(g, in.q.view(), in.k.view(), 0, 0.35, o);
    ADD_FAILURE() << "accepted a bad " << name;
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind(name + ":", 0), 0u) << e.what();
  }
}

TEST(PooledSelect, RefusesBadArgumentsByName) {
  const BlockSizes b{8, 8};
  for (const double p : {0.0, -0.5, 1.5, double(NAN)}) expect_refused(make(p, 1, 0.6, b), "p");
  expect_refused(make(0.9, -1, 0.6, b), "floor");
  for (const double gate : {-1.5, 1.01, double(NAN)}) {
    expect_refused(make(0.9, 1, gate, b), "gate");
  }
  for (const double d : {0.0, 1.2}) expect_refused(make(0.9, 1, 0.6, b, false, d), "density");
  expect_refused(make(0.9, 1, 0.6, {0, 8}), "blocks");
  const VideoGeometry g = geometry(1, 2, 4);
  const Inputs in = random_inputs(1, g.tokens(), 8, 1);
  EXPECT_THROW(pooled_select(g, in.q.view(), in.k.view(), 1, 0.35, {}), std::invalid_argument);
  EXPECT_THROW(pooled_select(g, in.q.view(), in.k.view(), 0, 0.0, {}), std::invalid_argument);
  EXPECT_THROW(pooled_select(geometry(1, 2, 5), in.q.view(), in.k.view(), 0, 0.35, {}),
               std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
