// The pooled method's row orders (pooled.h, PooledOrder): tiles cut in
// token-major order are frame-major's selection on rows moved to token-major
// order; planted temporal heads are cheaper token-major (at one p a lower
// density, at one density a lower error), planted spatial heads frame-major,
// and kAuto and the front door choose accordingly; a head run token-major is
// masked attention under its selection mapped back to the original order,
// compensated as its definition says, and bit-identical for any thread count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "support/attention_check.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "tilesplash/attention.h"
#include "tilesplash/methods.h"
#include "tilesplash/pooled.h"
#include "tilesplash/routing.h"
#include "tilesplash/workload.h"

namespace tilesplash {
namespace {

using test::HostTensor;

// 2,048 tokens: 64-token tiles span a quarter of a frame frame-major, eight
// positions of every frame token-major.
const VideoGeometry kPlanted{8, 16, 16, 0, TextPlacement::kNone};
constexpr std::int64_t kDim = 32;

VideoWorkload planted() {
  WorkloadOptions o;
  o.heads = 2;
  o.head_dim = kDim;
  o.dtype = DType::kF32;
  o.planted = {PlantedHead::kSpatialBand, PlantedHead::kTemporalBand};
  return VideoWorkload(kPlanted, o);
}

PooledOptions in_order(PooledOrder order, double p, double gate = 0.6) {
  PooledOptions o;
  o.order = order;
  o.p = p;
  o.gate = gate;
  return o;
}

std::vector<std::int64_t> every_8th_row(std::int64_t n) {
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 3; r < n; r += 8) rows.push_back(r);
  return rows;
}

constexpr std::int64_t kSpatialHead = 0, kTemporalHead = 1;
const double kScale = 1.0 / std::sqrt(double(kDim));

TEST(PooledOrder, TemporalHeadsAreCheaperTokenMajorSpatialHeadsFrameMajor) {
  const VideoWorkload w = planted();
  // At one p (no gate: the pooled ranking alone), the sparser order. (Not
  // by much on the temporal head: frame-major's masses there are flat, so
  // it keeps few tiles at a large error; the next check compares errors.)
  for (const double p : {0.9, 0.98}) {
    const auto density = [&](std::int64_t h, PooledOrder order) {
      return pooled_select(kPlanted, w.q(), w.k(), h, kScale, in_order(order, p, -1.0)).density;
    };
    EXPECT_LT(density(kTemporalHead, PooledOrder::kToken),
              density(kTemporalHead, PooledOrder::kFrame))
        << p;
    EXPECT_LT(density(kSpatialHead, PooledOrder::kFrame),
              density(kSpatialHead, PooledOrder::kToken))
        << p;
    const PooledSelection temporal = pooled_select(kPlanted, w.q(), w.k(), kTemporalHead, kScale,
                                                   in_order(PooledOrder::kAuto, p));
    EXPECT_EQ(temporal.order.name(), "token-major") << p;
    const PooledSelection spatial = pooled_select(kPlanted, w.q(), w.k(), kSpatialHead, kScale,
                                                  in_order(PooledOrder::kAuto, p));
    EXPECT_TRUE(spatial.order.is_identity()) << p;
  }
  // At one density, the order of lower error on sampled rows: what the
  // front door compares (pooled_order_selections, frame-major first).
  const std::vector<std::int64_t> rows = every_8th_row(kPlanted.tokens());
  for (const double target : {0.1, 0.2}) {
    PooledOptions o;
    o.density = target;
    for (const std::int64_t h : {kSpatialHead, kTemporalHead}) {
      const std::vector<PooledSelection> both =
          pooled_order_selections(kPlanted, w.q(), w.k(), h, kScale, o);
      ASSERT_EQ(both.size(), 2u);
      EXPECT_TRUE(both[0].order.is_identity());
      EXPECT_EQ(both[1].order.name(), "token-major");
      const std::vector<double> errors =
          pooled_sampled_errors(w.q(), w.k(), w.v(), h, kScale, rows, both);
      if (h == kTemporalHead) {
        EXPECT_LT(errors[1], 0.5 * errors[0]) << target;
      } else {
        EXPECT_LT(errors[0], errors[1]) << target;
      }
    }
  }
}

TEST(PooledOrder, TheSinkOrOneFrameKeepsFrameMajor) {
  const VideoWorkload w = planted();
  PooledOptions o = in_order(PooledOrder::kAuto, 0.9);
  o.sink = true;
  EXPECT_TRUE(pooled_select(kPlanted, w.q(), w.k(), kTemporalHead, kScale, o).order.is_identity());
  EXPECT_EQ(pooled_order_selections(kPlanted, w.q(), w.k(), kTemporalHead, kScale, o).size(), 1u);
  EXPECT_EQ(pooled_ladder_selections(kPlanted, w.q(), w.k(), kTemporalHead, kScale, o).size(),
            pooled_p_ladder().size());
  // Asked for, token-major with the sink keeps every video key tile (each
  // holds a first-frame key).
  o.order = PooledOrder::kToken;
  const PooledSelection all = pooled_select(kPlanted, w.q(), w.k(), kTemporalHead, kScale, o);
  EXPECT_EQ(all.density, 1.0);
  const VideoGeometry one{1, 8, 8, 3, TextPlacement::kAfter};
  const test::HostTensor q(DType::kF32, 1, one.tokens(), 8), k(DType::kF32, 1, one.tokens(), 8);
  o = in_order(PooledOrder::kAuto, 0.9);
  EXPECT_EQ(pooled_order_selections(one, q.view(), k.view(), 0, 0.3, o).size(), 1u);
}

// Rows of `src` (one head) moved into `order`.
HostTensor moved(const HostTensor& src, const RowOrder& order) {
  HostTensor out(DType::kF32, 1, src.len(), src.dim());
  for (std::int64_t r = 0; r < src.len(); ++r) {
    for (std::int64_t c = 0; c < src.dim(); ++c) out.set(0, r, c, src.get(0, order.source(r), c));
  }
  return out;
}

TEST(PooledOrder, TokenMajorIsFrameMajorsSelectionOnMovedRows) {
  // Text stays in place token-major, so the text tiles are the same ones.
  for (const VideoGeometry& g : {VideoGeometry{3, 4, 5, 0, TextPlacement::kNone},
                                 VideoGeometry{4, 3, 7, 5, TextPlacement::kAfter},
                                 VideoGeometry{2, 5, 5, 6, TextPlacement::kBefore}}) {
    HostTensor q(DType::kF32, 1, g.tokens(), 8), k(DType::kF32, 1, g.tokens(), 8);
    q.fill_normal(5);
    k.fill_normal(6);
    const RowOrder order = RowOrder::token_major(g);
    const HostTensor mq = moved(q, order), mk = moved(k, order);
    for (const double p : {0.5, 0.9, 1.0}) {
      for (const double gate : {-1.0, 0.6}) {
        PooledOptions o = in_order(PooledOrder::kToken, p, gate);
        o.blocks = {8, 16};
        const PooledSelection token = pooled_select(g, q.view(), k.view(), 0, 0.35, o);
        o.order = PooledOrder::kFrame;
        const PooledSelection frame = pooled_select(g, mq.view(), mk.view(), 0, 0.35, o);
        EXPECT_EQ(token.order.name(), "token-major");
        EXPECT_EQ(token.kept, frame.kept) << g.to_string() << " p " << p << " gate " << gate;
        EXPECT_EQ(token.row_offsets, frame.row_offsets);
        EXPECT_EQ(token.kept_pairs, frame.kept_pairs);
        EXPECT_EQ(token.mass, frame.mass);
      }
    }
  }
}

// (q, k) of the original order kept iff their run positions' tiles are.
bool kept_at(const PooledSelection& s, std::int64_t q, std::int64_t k) {
  const std::int64_t a = s.order.position(q) / s.blocks.block_q;
  const auto b = static_cast<std::int32_t>(s.order.position(k) / s.blocks.block_kv);
  const auto first = s.kept.begin() + s.row_offsets[static_cast<std::size_t>(a)];
  const auto last = s.kept.begin() + s.row_offsets[static_cast<std::size_t>(a) + 1];
  return std::binary_search(first, last, b);
}

const VideoGeometry kSmall{4, 6, 8, 10, TextPlacement::kAfter};  // 202 tokens

VideoAttentionOptions token_major_pooled(double density, int threads) {
  VideoAttentionOptions o = method_attention_options("pooled", kSmall, {density});
  o.pooled->order = PooledOrder::kToken;
  o.threads = threads;
  return o;
}

TEST(PooledOrder, ATokenMajorHeadIsMaskedAttentionUnderItsSelection) {
  WorkloadOptions wo;
  wo.heads = 2;
  wo.head_dim = 16;
  wo.dtype = DType::kF32;
  wo.planted = {PlantedHead::kTemporal, PlantedHead::kCluster};
  const VideoWorkload w(kSmall, wo);
  const std::int64_t n = kSmall.tokens();
  VideoAttention attention(kSmall, token_major_pooled(0.3, 2));
  std::vector<float> out(static_cast<std::size_t>(2 * n * 16));
  const LayerReport report = attention.forward(
      {w.q(), w.k(), w.v(), MutableTensorView::contiguous(out.data(), DType::kF32, 2, n, 16)});
  for (std::int64_t h = 0; h < 2; ++h) {
    const HeadReport& head = report.heads[static_cast<std::size_t>(h)];
    EXPECT_EQ(head.order, "token-major");
    const PooledSelection s =
        pooled_select(kSmall, w.q(), w.k(), h, 0.25, *attention.options().pooled);
    EXPECT_EQ(head.density, s.density);
    const Mask original = pooled_original_mask(s);
    const Mask ran = attention.head_mask(h);
    for (std::int64_t q = 0; q < n; ++q) {
      for (std::int64_t k = 0; k < n; ++k) {
        ASSERT_EQ(original.keeps(q, k), kept_at(s, q, k)) << q << " " << k;
        ASSERT_EQ(ran.keeps(q, k), kept_at(s, q, k)) << q << " " << k;
      }
    }
    const test::ReferenceHead ref = test::reference_attention(original, w.q(), w.k(), w.v(), h);
    double worst = 0.0;
    for (std::int64_t i = 0; i < n * 16; ++i) {
      worst = std::max(worst, std::abs(out[static_cast<std::size_t>(h * n * 16 + i)] -
                                       ref.out[static_cast<std::size_t>(i)]));
    }
    EXPECT_LT(worst, 1e-4) << "head " << h;
  }
}

TEST(PooledOrder, PaddedTrailingTextStaysOutOfATokenMajorHead) {
  // Token-major keeps the trailing text in place, so padded text keys are
  // dropped in the run order as in the original one.
  WorkloadOptions wo;
  wo.heads = 1;
  wo.head_dim = 16;
  wo.dtype = DType::kF32;
  wo.planted = {PlantedHead::kTemporal};
  const VideoWorkload w(kSmall, wo);
  const std::int64_t n = kSmall.tokens(), limit = n - 4;
  VideoAttention attention(kSmall, token_major_pooled(0.3, 1));
  std::vector<float> out(static_cast<std::size_t>(n * 16));
  const LayerReport report = attention.forward(
      {w.q(), w.k(), w.v(), MutableTensorView::contiguous(out.data(), DType::kF32, 1, n, 16)}, 0, 0,
      limit);
  EXPECT_EQ(report.heads[0].order, "token-major");
  const PooledSelection s =
      pooled_select(kSmall, w.q(), w.k(), 0, 0.25, *attention.options().pooled);
  const test::ReferenceHead ref = test::reference_attention(
      pooled_original_mask(s) & Mask::key_range(0, limit), w.q(), w.k(), w.v(), 0);
  double worst = 0.0;
  for (std::int64_t i = 0; i < n * 16; ++i) {
    worst = std::max(
        worst, std::abs(out[static_cast<std::size_t>(i)] - ref.out[static_cast<std::size_t>(i)]));
  }
  EXPECT_LT(worst, 1e-4);
}

// One ranking cut at every p of the ladder gives, per order, exactly the
// selections that ranking anew at each p gives; kAuto and a bad p are errors.
TEST(PooledOrder, EveryPCutFromOneRankingIsThatPsSelection) {
  const VideoWorkload w = planted();
  for (const PooledOrder order : {PooledOrder::kFrame, PooledOrder::kToken}) {
    for (const std::int64_t head : {kSpatialHead, kTemporalHead}) {
      PooledOptions o = in_order(order, 0.9, /*gate=*/0.0);
      o.density = 0.3;  // ignored: every p is cut
      const std::vector<PooledSelection> ladder =
          pooled_select_ps(kPlanted, w.q(), w.k(), head, kScale, o, pooled_p_ladder(), 2);
      ASSERT_EQ(ladder.size(), pooled_p_ladder().size());
      for (std::size_t r = 0; r < ladder.size(); ++r) {
        const PooledOptions at = in_order(order, pooled_p_ladder()[r], /*gate=*/0.0);
        const PooledSelection one = pooled_select(kPlanted, w.q(), w.k(), head, kScale, at, 2);
        EXPECT_EQ(ladder[r].order.name(), one.order.name());
        EXPECT_EQ(ladder[r].kept, one.kept) << r;
        EXPECT_EQ(ladder[r].row_offsets, one.row_offsets) << r;
        EXPECT_EQ(ladder[r].p, one.p);
        EXPECT_EQ(ladder[r].kept_pairs, one.kept_pairs);
        EXPECT_EQ(ladder[r].mass, one.mass);
      }
      EXPECT_LT(ladder.front().kept_pairs, ladder.back().kept_pairs);
    }
  }
  const double bad[] = {0.5, 1.5};
  EXPECT_THROW(
      pooled_select_ps(kPlanted, w.q(), w.k(), 0, kScale, in_order(PooledOrder::kFrame, 0.9), bad),
      std::invalid_argument);
  const double good[] = {0.5};
  EXPECT_THROW(
      pooled_select_ps(kPlanted, w.q(), w.k(), 0, kScale, in_order(PooledOrder::kAuto, 0.9), good),
      std::invalid_argument);
}

TEST(PooledOrder, BitIdenticalAcrossThreadCounts) {
  const VideoWorkload w = planted();
  for (const PooledOrder order : {PooledOrder::kToken, PooledOrder::kAuto}) {
    PooledOptions o = in_order(order, 0.9);
    ThreadingContext one(1);
    const PooledSelection a =
        pooled_select(kPlanted, w.q(), w.k(), kTemporalHead, kScale, o, 1, &one);
    for (const int threads : {2, 3, 7}) {
      ThreadingContext many(threads);
      const PooledSelection b =
          pooled_select(kPlanted, w.q(), w.k(), kTemporalHead, kScale, o, threads, &many);
      EXPECT_EQ(a.order.name(), b.order.name());
      EXPECT_EQ(a.kept, b.kept);
      EXPECT_EQ(a.row_offsets, b.row_offsets);
      EXPECT_EQ(a.mass, b.mass);
    }
  }
  // The front door, error target over (order, p): same orders, rungs and output.
  const std::int64_t n = kPlanted.tokens();
  const auto run = [&](int threads) {
    VideoAttentionOptions o =
        method_attention_options("pooled", kPlanted, {0.25}, ErrorTarget{0.05, std::nullopt});
    o.threads = threads;
    VideoAttention attention(kPlanted, o);
    std::vector<float> out(static_cast<std::size_t>(2 * n * kDim));
    const LayerReport report = attention.forward(
        {w.q(), w.k(), w.v(), MutableTensorView::contiguous(out.data(), DType::kF32, 2, n, kDim)});
    return std::make_pair(report, out);
  };
  const auto [report1, out1] = run(1);
  const auto [report3, out3] = run(3);
  EXPECT_EQ(std::memcmp(out1.data(), out3.data(), out1.size() * sizeof(float)), 0);
  for (std::size_t h = 0; h < 2; ++h) {
    EXPECT_EQ(report1.heads[h].order, report3.heads[h].order);
    EXPECT_EQ(report1.heads[h].rung, report3.heads[h].rung);
    EXPECT_EQ(report1.heads[h].density, report3.heads[h].density);
  }
  EXPECT_EQ(report1.heads[kSpatialHead].order, "original");
  EXPECT_EQ(report1.heads[kTemporalHead].order, "token-major");
}

TEST(PooledOrder, AnErrorTargetReachesALowerDensityOnTemporalHeads) {
  const VideoWorkload w = planted();
  const auto densities = [&](PooledOrder order) {
    VideoAttentionOptions o =
        method_attention_options("pooled", kPlanted, {0.25}, ErrorTarget{0.05, std::nullopt});
    o.pooled->order = order;
    o.threads = 1;
    VideoAttention attention(kPlanted, o);
    std::vector<float> out(static_cast<std::size_t>(2 * kPlanted.tokens() * kDim));
    const LayerReport report = attention.forward(
        {w.q(), w.k(), w.v(),
         MutableTensorView::contiguous(out.data(), DType::kF32, 2, kPlanted.tokens(), kDim)});
    for (const HeadReport& head : report.heads) EXPECT_TRUE(head.target_met) << head.head;
    return std::make_pair(report.heads[kSpatialHead].density, report.heads[kTemporalHead].density);
  };
  const auto [auto_spatial, auto_temporal] = densities(PooledOrder::kAuto);
  const auto [frame_spatial, frame_temporal] = densities(PooledOrder::kFrame);
  EXPECT_LT(auto_temporal, 0.5 * frame_temporal);
  EXPECT_LE(auto_spatial, frame_spatial);
}

TEST(PooledOrder, CompensationOfATokenMajorHeadIsItsDefinition) {
  HostTensor q(DType::kF32, 1, kSmall.tokens(), 32), k(DType::kF32, 1, kSmall.tokens(), 32),
      v(DType::kF32, 1, kSmall.tokens(), 32);
  q.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  const std::int64_t n = kSmall.tokens();
  VideoAttentionOptions o = token_major_pooled(0.3, 2);
  o.compensate = true;
  VideoAttention attention(kSmall, o);
  HostTensor out(DType::kF32, 1, n, 32);
  const LayerReport report = attention.forward({q.view(), k.view(), v.view(), out.mutable_view()});
  EXPECT_TRUE(report.heads[0].compensated);
  // The plain compensated call on rows moved to token-major order by hand,
  // with the selection's plan (in that order).
  const PooledSelection s =
      pooled_select(kSmall, q.view(), k.view(), 0, 1.0 / std::sqrt(32.0), *o.pooled);
  ASSERT_EQ(s.order.name(), "token-major");
  const HostTensor mq = moved(q, s.order), mk = moved(k, s.order), mv = moved(v, s.order);
  HostTensor plain(DType::kF32, 1, n, 32);
  AttentionOptions options;
  options.compensate = true;
  attention_forward(pooled_plan(s), {mq.view(), mk.view(), mv.view(), plain.mutable_view()},
                    options);
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < 32; ++c) {
      ASSERT_EQ(out.get(0, s.order.source(r), c), plain.get(0, r, c)) << r << " " << c;
    }
  }
}

}  // namespace
}  // namespace tilesplash
