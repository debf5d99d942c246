// Whole tensors in a layout (batched_attention.h): every layout and stride
// case gives the same bits as one kernel call per head on contiguous copies,
// views the kernel cannot read are packed, outputs never overlap inputs,
// zero-size tensors follow the documented rule, data errors name the batch
// entry, and the video front door runs per batch entry.
#include "tilesplash/batched_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "tilesplash/plan_cache.h"
#include "tilesplash/routing_layout.h"

namespace tilesplash {
namespace {

// A canonical [B, H, N, d] f32 tensor.
struct Canonical {
  std::int64_t b, h, n, d;
  std::vector<float> data;
  float at(std::int64_t bi, std::int64_t hi, std::int64_t ni, std::int64_t di) const {
    return data[static_cast<std::size_t>(((bi * h + hi) * n + ni) * d + di)];
  }
};

Canonical random_canonical(std::int64_t b, std::int64_t h, std::int64_t n, std::int64_t d,
                           unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal;
  Canonical t{b, h, n, d, std::vector<float>(static_cast<std::size_t>(b * h * n * d))};
  for (float& x : t.data) x = normal(gen);
  return t;
}

// The same values stored contiguously in `layout` (hnd: batch must be 1).
std::vector<float> store(const Canonical& t, Layout layout) {
  std::vector<float> out;
  out.reserve(t.data.size());
  for (std::int64_t bi = 0; bi < t.b; ++bi) {
    if (layout == Layout::kBNHD) {
      for (std::int64_t ni = 0; ni < t.n; ++ni)
        for (std::int64_t hi = 0; hi < t.h; ++hi)
          for (std::int64_t di = 0; di < t.d; ++di) out.push_back(t.at(bi, hi, ni, di));
    } else {
      for (std::int64_t hi = 0; hi < t.h; ++hi)
        for (std::int64_t ni = 0; ni < t.n; ++ni)
          for (std::int64_t di = 0; di < t.d; ++di) out.push_back(t.at(bi, hi, ni, di));
    }
  }
  return out;
}

std::vector<std::int64_t> shape_of(const Canonical& t, Layout layout) {
  if (layout == Layout::kHND) return {t.h, t.n, t.d};
  if (layout == Layout::kBHND) return {t.b, t.h, t.n, t.d};
  return {t.b, t.n, t.h, t.d};
}

// Expected: one runner.forward per (batch, head) on contiguous [1, N, d] copies.
struct Expected {
  std::vector<float> out;  // canonical [B, H, Nq, dv]
  std::vector<float> lse;  // [B, H, Nq]
};

Expected per_head(const TilePlan& plan, const Canonical& q, const Canonical& k,
                  const Canonical& v) {
  Expected e{std::vector<float>(static_cast<std::size_t>(q.b * q.h * q.n * v.d)),
             std::vector<float>(static_cast<std::size_t>(q.b * q.h * q.n))};
  AttentionRunner runner;
  for (std::int64_t bi = 0; bi < q.b; ++bi) {
    for (std::int64_t hi = 0; hi < q.h; ++hi) {
      const auto head = [&](const Canonical& t) {
        return TensorView::contiguous(t.data.data() + (bi * t.h + hi) * t.n * t.d, DType::kF32, 1,
                                      t.n, t.d);
      };
      const std::int64_t row = (bi * q.h + hi) * q.n;
      runner.forward(
          plan, {head(q), head(k), head(v),
                 MutableTensorView::contiguous(e.out.data() + row * v.d, DType::kF32, 1, q.n, v.d),
                 e.lse.data() + row});
    }
  }
  return e;
}

StridedTensor strided(const std::vector<float>& data, std::vector<std::int64_t> shape,
                      std::vector<std::int64_t> strides = {}) {
  return {data.data(), DType::kF32, std::move(shape), std::move(strides)};
}

TEST(BatchedAttention, EveryLayoutGivesThePerHeadBits) {
  const Mask mask = Mask::local(7, 3) | Mask::causal(-20);
  for (const Layout layout : {Layout::kBHND, Layout::kBNHD, Layout::kHND}) {
    const std::int64_t batch = layout == Layout::kHND ? 1 : 3;
    const Canonical q = random_canonical(batch, 2, 45, 16, 1);
    const Canonical k = random_canonical(batch, 2, 70, 16, 2);
    const Canonical v = random_canonical(batch, 2, 70, 24, 3);
    const TilePlan plan = TilePlan::build(mask, 45, 70, {16, 64});
    const Expected expected = per_head(plan, q, k, v);
    const std::vector<float> qs = store(q, layout), ks = store(k, layout), vs = store(v, layout);
    Canonical o{batch, 2, 45, 24, {}};
    std::vector<float> out(static_cast<std::size_t>(batch * 2 * 45 * 24), NAN);
    std::vector<float> lse(static_cast<std::size_t>(batch * 2 * 45), NAN);
    AttentionRunner runner;
    layout_attention(runner, plan,
                     {layout,
                      strided(qs, shape_of(q, layout)),
                      strided(ks, shape_of(k, layout)),
                      strided(vs, shape_of(v, layout)),
                      {out.data(), DType::kF32, shape_of(o, layout), {}},
                      lse.data()});
    o.data = expected.out;
    EXPECT_EQ(out, store(o, layout)) << to_string(layout);
    EXPECT_EQ(lse, expected.lse) << to_string(layout);
  }
}

TEST(BatchedAttention, TransposedViewsReadInPlaceAndOddViewsArePacked) {
  const Canonical q = random_canonical(2, 3, 33, 16, 4);
  const Canonical k = random_canonical(2, 3, 40, 16, 5);
  const Canonical v = random_canonical(2, 3, 40, 16, 6);
  const TilePlan plan = TilePlan::build(Mask::causal(), 33, 40, {16, 64});
  const Expected expected = per_head(plan, q, k, v);
  // bnhd memory read as bhnd: strides (N*H*d, d, H*d, 1).
  const std::vector<float> qs = store(q, Layout::kBNHD), ks = store(k, Layout::kBNHD),
                           vs = store(v, Layout::kBNHD);
  const auto bhnd_view = [](const std::vector<float>& data, const Canonical& t) {
    return strided(data, {t.b, t.h, t.n, t.d}, {t.n * t.h * t.d, t.d, t.h * t.d, 1});
  };
  const StridedTensor qv = bhnd_view(qs, q), kv = bhnd_view(ks, k), vv = bhnd_view(vs, v);
  EXPECT_TRUE(reads_in_place(qv, Layout::kBHND));
  std::vector<float> out(expected.out.size());
  AttentionRunner runner;
  layout_attention(runner, plan,
                   {Layout::kBHND, qv, kv, vv, {out.data(), DType::kF32, {2, 3, 33, 16}, {}}});
  EXPECT_EQ(out, expected.out);

  // K broadcast over heads (stride 0) and V with reversed rows: packed.
  const std::vector<float> k_contig = store(k, Layout::kBHND);
  Canonical k_bcast = k;
  for (std::int64_t bi = 0; bi < 2; ++bi)
    for (std::int64_t hi = 0; hi < 3; ++hi)
      for (std::int64_t ni = 0; ni < 40; ++ni)
        for (std::int64_t di = 0; di < 16; ++di)
          k_bcast.data[static_cast<std::size_t>(((bi * 3 + hi) * 40 + ni) * 16 + di)] =
              k.at(bi, 0, ni, di);
  Canonical v_rev = v;
  for (std::int64_t bi = 0; bi < 2; ++bi)
    for (std::int64_t hi = 0; hi < 3; ++hi)
      for (std::int64_t ni = 0; ni < 40; ++ni)
        for (std::int64_t di = 0; di < 16; ++di)
          v_rev.data[static_cast<std::size_t>(((bi * 3 + hi) * 40 + ni) * 16 + di)] =
              v.at(bi, hi, 39 - ni, di);
  const Expected packed_expected = per_head(plan, q, k_bcast, v_rev);
  const std::vector<float> q_contig = store(q, Layout::kBHND);
  const std::vector<float> v_contig = store(v, Layout::kBHND);
  const StridedTensor k_view{k_contig.data(), DType::kF32, {2, 3, 40, 16}, {3 * 40 * 16, 0, 16, 1}};
  const StridedTensor v_view{
      v_contig.data() + 39 * 16, DType::kF32, {2, 3, 40, 16}, {3 * 40 * 16, 40 * 16, -16, 1}};
  EXPECT_FALSE(reads_in_place(k_view, Layout::kBHND));
  EXPECT_FALSE(reads_in_place(v_view, Layout::kBHND));
  std::vector<float> lse(packed_expected.lse.size());
  layout_attention(runner, plan,
                   {Layout::kBHND,
                    strided(q_contig, {2, 3, 33, 16}),
                    k_view,
                    v_view,
                    {out.data(), DType::kF32, {2, 3, 33, 16}, {}},
                    lse.data()});
  EXPECT_EQ(out, packed_expected.out);
  EXPECT_EQ(lse, packed_expected.lse);
}

std::string message_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "no exception";
}

TEST(BatchedAttention, ArgumentErrorsNameTheArgument) {
  std::vector<float> a(2 * 2 * 8 * 16, 0.5f), b(a.size(), 0.5f), c(a.size(), 0.5f), o(a.size());
  const auto args = [&](std::vector<std::int64_t> k_shape) {
    return LayoutArgs{Layout::kBHND,
                      strided(a, {2, 2, 8, 16}),
                      strided(b, std::move(k_shape)),
                      strided(c, {2, 2, 8, 16}),
                      {o.data(), DType::kF32, {2, 2, 8, 16}, {}}};
  };
  EXPECT_NE(message_of([&] {
              check_layout_args(args({2, 2, 8}));
            }).find("k: layout bhnd"),
            std::string::npos);
  EXPECT_NE(message_of([&] {
              check_layout_args(args({2, 1, 8, 16}));
            }).find("k: heads 1 does not match q (2)"),
            std::string::npos);
  LayoutArgs overlap = args({2, 2, 8, 16});
  overlap.out.data = b.data() + 3;
  EXPECT_NE(
      message_of([&] { check_layout_args(overlap); }).find("out: must not overlap the input k"),
      std::string::npos);
  LayoutArgs lse_overlap = args({2, 2, 8, 16});
  lse_overlap.lse = c.data() + 10;
  EXPECT_NE(message_of([&] { check_layout_args(lse_overlap); }).find("lse: must not overlap v"),
            std::string::npos);
  LayoutArgs bad_out = args({2, 2, 8, 16});
  bad_out.out.strides = {512, 256, 16, 2};
  EXPECT_NE(message_of([&] { check_layout_args(bad_out); }).find("out: needs contiguous rows"),
            std::string::npos);
  LayoutArgs bad_dim{Layout::kHND,
                     strided(a, {2, 8, 12}),
                     strided(b, {2, 8, 12}),
                     strided(c, {2, 8, 12}),
                     {o.data(), DType::kF32, {2, 8, 12}, {}}};
  EXPECT_NE(message_of([&] {
              check_layout_args(bad_dim);
            }).find("q: head dim must be a multiple of 8 in [8, 256], got 12"),
            std::string::npos);
  AttentionRunner runner;
  MaskedAttentionOptions options;
  options.block_kv = 100;
  EXPECT_NE(message_of([&] {
              masked_attention(runner, Mask::dense(), args({2, 2, 8, 16}), options);
            }).find("block_kv: must be a multiple of 64"),
            std::string::npos);
}

TEST(BatchedAttention, DataErrorsNameTheBatchEntryAndItsHead) {
  // bhnd folds both entries into one kernel call, bnhd runs one call per
  // entry; either way a NaN at (entry 1, head 2, row 5) is reported there.
  for (const Layout layout : {Layout::kBHND, Layout::kBNHD}) {
    const Canonical t = random_canonical(2, 3, 20, 16, 11);
    std::vector<float> q = store(t, layout), k = q, v = q, out(q.size());
    const std::int64_t at =
        layout == Layout::kBHND ? ((1 * 3 + 2) * 20 + 5) * 16 : ((1 * 20 + 5) * 3 + 2) * 16;
    k[static_cast<std::size_t>(at)] = std::numeric_limits<float>::quiet_NaN();
    const std::vector<std::int64_t> shape = shape_of(t, layout);
    AttentionRunner runner;
    const std::string message = message_of([&] {
      masked_attention(runner, Mask::causal(),
                       {layout,
                        strided(q, shape),
                        strided(k, shape),
                        strided(v, shape),
                        {out.data(), DType::kF32, shape, {}}});
    });
    EXPECT_NE(message.find("k contains NaN or Inf (head 2, row 5)"), std::string::npos) << message;
    EXPECT_NE(message.find("in batch entry 1"), std::string::npos) << message;
  }
}

TEST(BatchedAttention, VideoFrontDoorChecksLengthsForEveryEntry) {
  const VideoGeometry g{2, 2, 2};
  VideoAttention attention(g);
  std::vector<float> q(2 * 9 * 16, 1.0f), out(q.size());
  for (const std::int64_t batch : {0, 2}) {
    const std::vector<std::int64_t> shape{batch, 9, 1, 16};
    EXPECT_EQ(message_of([&] {
                layout_video_attention(attention, {Layout::kBNHD,
                                                   strided(q, shape),
                                                   strided(q, shape),
                                                   strided(q, shape),
                                                   {out.data(), DType::kF32, shape, {}}});
              }),
              "q: sequence length 9 does not match the geometry's tokens (8)");
  }
}

TEST(BatchedAttention, ZeroSizeRule) {
  AttentionRunner runner;
  std::vector<float> q(2 * 4 * 16, 1.0f), k(64, 1.0f), v(64, 1.0f), out(2 * 4 * 8, 9.0f),
      lse(8, 9.0f);
  // No keys: zeros and -inf.
  masked_attention(runner, Mask::causal(),
                   {Layout::kHND,
                    strided(q, {2, 4, 16}),
                    strided(k, {2, 0, 16}),
                    strided(v, {2, 0, 8}),
                    {out.data(), DType::kF32, {2, 4, 8}, {}},
                    lse.data()});
  for (float x : out) EXPECT_EQ(x, 0.0f);
  for (float x : lse) EXPECT_EQ(x, -std::numeric_limits<float>::infinity());
  // No queries: nothing written, no plan.
  std::fill(out.begin(), out.end(), 9.0f);
  const MaskedAttentionResult none =
      masked_attention(runner, Mask::dense(),
                       {Layout::kBHND,
                        strided(q, {1, 2, 0, 16}),
                        strided(k, {1, 2, 1, 16}),
                        strided(v, {1, 2, 1, 8}),
                        {out.data(), DType::kF32, {1, 2, 0, 8}, {}}});
  EXPECT_EQ(none.plan, nullptr);
  EXPECT_EQ(out[0], 9.0f);
  // A video mask still checks its length.
  const VideoGeometry g{2, 2, 2};
  EXPECT_THROW(masked_attention(runner, spatial_mask(g, 2),
                                {Layout::kHND,
                                 strided(q, {2, 0, 16}),
                                 strided(k, {2, 1, 16}),
                                 strided(v, {2, 1, 8}),
                                 {out.data(), DType::kF32, {2, 0, 8}, {}}}),
               std::invalid_argument);
}

TEST(BatchedAttention, MaskedAttentionCachesPlansAndChoosesTiles) {
  const Canonical q = random_canonical(1, 2, 50, 16, 7);
  const std::vector<float> qs = store(q, Layout::kBHND);
  std::vector<float> out(qs.size());
  PlanCache plans;
  MaskedAttentionOptions options;
  options.plans = &plans;
  AttentionRunner runner;
  const LayoutArgs args{Layout::kBHND,
                        strided(qs, {1, 2, 50, 16}),
                        strided(qs, {1, 2, 50, 16}),
                        strided(qs, {1, 2, 50, 16}),
                        {out.data(), DType::kF32, {1, 2, 50, 16}, {}}};
  const MaskedAttentionResult first = masked_attention(runner, Mask::causal(), args, options);
  const MaskedAttentionResult second = masked_attention(runner, Mask::causal(), args, options);
  EXPECT_EQ(first.plan, second.plan);
  EXPECT_EQ(plans.stats().misses, 1);
  const BlockChoice choice = cached_block_choice(Mask::causal(), 50, 50, 16, DType::kF32, 0);
  EXPECT_EQ(first.blocks, choice.blocks);
  options.block_q = 16;
  EXPECT_EQ(masked_attention(runner, Mask::causal(), args, options).blocks.block_q, 16);
}

TEST(BatchedAttention, VideoFrontDoorRunsPerBatchEntry) {
  const VideoGeometry g{3, 2, 4};
  const std::int64_t n = g.tokens();
  const Canonical q = random_canonical(2, 3, n, 16, 8), k = random_canonical(2, 3, n, 16, 9),
                  v = random_canonical(2, 3, n, 16, 10);
  const std::vector<float> qs = store(q, Layout::kBNHD), ks = store(k, Layout::kBNHD),
                           vs = store(v, Layout::kBNHD);
  std::vector<float> out(qs.size()), lse(static_cast<std::size_t>(2 * 3 * n));
  VideoAttentionOptions options;
  options.density = 0.4;
  VideoAttention attention(g, options);
  const std::vector<LayerReport> reports =
      layout_video_attention(attention,
                             {Layout::kBNHD,
                              strided(qs, {2, n, 3, 16}),
                              strided(ks, {2, n, 3, 16}),
                              strided(vs, {2, n, 3, 16}),
                              {out.data(), DType::kF32, {2, n, 3, 16}, {}},
                              lse.data()},
                             4, 7);
  ASSERT_EQ(reports.size(), 2u);
  for (std::int64_t bi = 0; bi < 2; ++bi) {
    const std::vector<float> qb(qs.begin() + bi * n * 48, qs.begin() + (bi + 1) * n * 48);
    const std::vector<float> kb(ks.begin() + bi * n * 48, ks.begin() + (bi + 1) * n * 48);
    const std::vector<float> vb(vs.begin() + bi * n * 48, vs.begin() + (bi + 1) * n * 48);
    std::vector<float> ob(static_cast<std::size_t>(n * 48)), lb(static_cast<std::size_t>(3 * n));
    const auto view = [&](const std::vector<float>& x) {
      return TensorView{x.data(), DType::kF32, 3, n, 16, 16, 48};
    };
    const LayerReport one =
        attention.forward({view(qb), view(kb), view(vb),
                           MutableTensorView{ob.data(), DType::kF32, 3, n, 16, 16, 48}, lb.data()},
                          4, 7);
    for (std::size_t h = 0; h < 3; ++h) {
      EXPECT_EQ(one.heads[h].choice, reports[static_cast<std::size_t>(bi)].heads[h].choice);
    }
    EXPECT_TRUE(std::equal(ob.begin(), ob.end(), out.begin() + bi * n * 48));
    EXPECT_TRUE(std::equal(lb.begin(), lb.end(), lse.begin() + bi * 3 * n));
  }
}

}  // namespace
}  // namespace tilesplash
