// merge_attention() (merge.h): random parts against a long-double evaluation
// of the merge formula (with -inf rows, rows where every part is -inf, and
// garbage in rows that carry no weight); attention over split keys merged
// against the double-precision reference of the unsplit mask; the layout
// overload; determinism; every rejected input, with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/attention_check.h"
#include "support/random_data.h"
#include "tilesplash/attention.h"
#include "tilesplash/merge.h"
#include "tilesplash/plan_window.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace {

using test::HostTensor;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Parts {
  std::vector<HostTensor> outputs;
  std::vector<std::vector<float>> lses;
};

// m parts of [heads, len, dim]; about a fifth of the LSEs are -inf, whose
// output rows hold NaN (they must be ignored), and row 0 of head 0 is -inf in
// every part.
Parts random_parts(int m, DType dtype, std::int64_t heads, std::int64_t len, std::int64_t dim,
                   std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> lse_value(-40.0f, 40.0f);
  std::uniform_int_distribution<int> fifth(0, 4);
  Parts parts;
  for (int i = 0; i < m; ++i) {
    HostTensor out(dtype, heads, len, dim);
    out.fill_normal(seed * 31 + i);
    std::vector<float> lse(static_cast<std::size_t>(heads * len));
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t n = 0; n < len; ++n) {
        float& value = lse[h * len + n];
        value = (fifth(rng) == 0 || (h == 0 && n == 0)) ? kNegInf : lse_value(rng);
        if (value == kNegInf) {
          for (std::int64_t c = 0; c < dim; ++c) {
            out.set(h, n, c, std::numeric_limits<float>::quiet_NaN());
          }
        }
      }
    }
    parts.outputs.push_back(std::move(out));
    parts.lses.push_back(std::move(lse));
  }
  return parts;
}

void merge_parts(const Parts& parts, HostTensor& out, float* lse) {
  std::vector<TensorView> views;
  std::vector<const float*> lses;
  for (std::size_t i = 0; i < parts.outputs.size(); ++i) {
    views.push_back(parts.outputs[i].view());
    lses.push_back(parts.lses[i].data());
  }
  merge_attention(views, lses, out.mutable_view(), lse);
}

TEST(MergeAttention, MatchesTheFormulaInLongDouble) {
  const std::int64_t heads = 3, len = 29, dim = 24;
  for (const DType in : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (const DType out_dtype : {DType::kF32, DType::kBF16}) {
      for (int m = 1; m <= 4; ++m) {
        SCOPED_TRACE(std::string(to_string(in)) + " -> " + std::string(to_string(out_dtype)) +
                     ", " + std::to_string(m) + " parts");
        const Parts parts = random_parts(m, in, heads, len, dim, 100 + m);
        HostTensor out(out_dtype, heads, len, dim);
        out.fill_storage(-7.0f);
        std::vector<float> lse(heads * len, -7.0f);
        merge_parts(parts, out, lse.data());
        // Output rounding only: f32 merges to within a few f32 ulps of 1.
        const double tol = out_dtype == DType::kF32 ? 1e-6 : 1.0 / 128;
        for (std::int64_t h = 0; h < heads; ++h) {
          for (std::int64_t n = 0; n < len; ++n) {
            long double mx = -INFINITY;
            for (int i = 0; i < m; ++i) mx = std::max<long double>(mx, parts.lses[i][h * len + n]);
            if (mx == -INFINITY) {
              EXPECT_EQ(lse[h * len + n], kNegInf);
              for (std::int64_t c = 0; c < dim; ++c) EXPECT_EQ(out.get(h, n, c), 0.0f);
              continue;
            }
            long double total = 0;
            std::vector<long double> acc(dim, 0);
            for (int i = 0; i < m; ++i) {
              const float a = parts.lses[i][h * len + n];
              if (a == kNegInf) continue;
              const long double w = std::exp(static_cast<long double>(a) - mx);
              total += w;
              for (std::int64_t c = 0; c < dim; ++c) acc[c] += w * parts.outputs[i].get(h, n, c);
            }
            const long double ref_lse = mx + std::log(total);
            EXPECT_NEAR(lse[h * len + n], static_cast<double>(ref_lse),
                        1e-6 * std::max(1.0L, std::fabs(ref_lse)));
            for (std::int64_t c = 0; c < dim; ++c) {
              const double ref = static_cast<double>(acc[c] / total);
              ASSERT_NEAR(out.get(h, n, c), ref, tol * std::max(1.0, std::fabs(ref)))
                  << "head " << h << " row " << n << " col " << c;
            }
          }
        }
      }
    }
  }
}

HostTensor slice_rows(const HostTensor& t, std::int64_t begin, std::int64_t end) {
  HostTensor out(t.dtype(), t.heads(), end - begin, t.dim());
  for (std::int64_t h = 0; h < t.heads(); ++h) {
    for (std::int64_t r = begin; r < end; ++r) {
      for (std::int64_t c = 0; c < t.dim(); ++c) out.set(h, r - begin, c, t.get(h, r, c));
    }
  }
  return out;
}

// Keys split into windows, each run through its window plan, merged: equals
// the double reference of the global mask, and the unsplit kernel run.
void expect_split_keys_merge_to_the_whole(const Mask& mask, std::int64_t n,
                                          const std::vector<std::int64_t>& cuts) {
  SCOPED_TRACE(mask.to_string());
  const std::int64_t heads = 2, d = 32;
  HostTensor q(DType::kF32, heads, n, d), k(DType::kF32, heads, n, d), v(DType::kF32, heads, n, d);
  q.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  // Queries split too, as a ring rank holds only its shard.
  for (std::size_t qi = 0; qi + 1 < cuts.size(); ++qi) {
    const IndexRange qr{cuts[qi], cuts[qi + 1]};
    if (qr.empty()) continue;
    const HostTensor q_shard = slice_rows(q, qr.begin, qr.end);
    Parts parts;
    for (std::size_t ki = 0; ki + 1 < cuts.size(); ++ki) {
      const IndexRange kr{cuts[ki], cuts[ki + 1]};
      if (classify_window(mask, qr, kr) == TileKind::kEmpty) continue;  // a skipped ring step
      const TilePlan plan = build_window_plan(mask, {qr, kr, n, n}, {16, 64});
      test::Outputs o = test::run_forward(plan, q_shard, slice_rows(k, kr.begin, kr.end),
                                          slice_rows(v, kr.begin, kr.end), DType::kF32, {});
      parts.outputs.push_back(std::move(o.out));
      parts.lses.push_back(std::move(o.lse));
    }
    HostTensor merged(DType::kF32, heads, qr.size(), d);
    std::vector<float> lse(heads * qr.size());
    if (parts.outputs.empty()) continue;  // no key for any row of this shard
    merge_parts(parts, merged, lse.data());
    const Mask shard_mask = window_mask(mask, {qr, {0, n}, n, n});
    const auto reference = test::reference_all_heads(shard_mask, q_shard, k, v, std::nullopt);
    test::Tolerance tol = test::tolerance_for(DType::kF32, DType::kF32);
    tol.out *= 2;
    tol.lse *= 2;
    EXPECT_TRUE(test::matches_reference(reference, merged, lse.data(), tol, v.max_abs()))
        << "query shard [" << qr.begin << ", " << qr.end << ")";
  }
}

TEST(MergeAttention, SplitKeysMergeToTheWholeMask) {
  const std::int64_t n = 150;
  const std::vector<std::int64_t> cuts = {0, 50, 100, 150};
  const std::vector<std::int64_t> uneven = {0, 37, 37, 111, 150};  // an empty shard too
  for (const Mask& mask : {Mask::dense(), Mask::causal(), Mask::local(20, 20)}) {
    expect_split_keys_merge_to_the_whole(mask, n, cuts);
    expect_split_keys_merge_to_the_whole(mask, n, uneven);
  }
  const VideoGeometry g{5, 5, 6};  // 150 tokens
  for (const VideoMaskKind kind : {VideoMaskKind::kSpatial, VideoMaskKind::kTemporal}) {
    const Mask video = video_mask(kind, g, 40, {true, false});
    expect_split_keys_merge_to_the_whole(video, n, cuts);
    expect_split_keys_merge_to_the_whole(video, n, uneven);
  }
}

TEST(MergeAttention, LayoutOverloadEqualsPerHeadViewsAndIsDeterministic) {
  // bnhd [batch 2, len 9, heads 3, dim 16]: parts built per batch entry as
  // [heads, len, dim] views with bnhd strides.
  const std::int64_t batch = 2, len = 9, heads = 3, dim = 16;
  const Parts flat = random_parts(3, DType::kF32, batch * heads, len, dim, 9);
  // Re-lay the [batch * heads, len, dim] parts out as bnhd tensors.
  std::vector<std::vector<float>> bnhd(3, std::vector<float>(batch * len * heads * dim));
  for (int i = 0; i < 3; ++i) {
    for (std::int64_t b = 0; b < batch; ++b) {
      for (std::int64_t h = 0; h < heads; ++h) {
        for (std::int64_t n = 0; n < len; ++n) {
          for (std::int64_t c = 0; c < dim; ++c) {
            bnhd[i][((b * len + n) * heads + h) * dim + c] =
                flat.outputs[i].get(b * heads + h, n, c);
          }
        }
      }
    }
  }
  std::vector<StridedTensor> tensors;
  std::vector<const float*> lses;
  for (int i = 0; i < 3; ++i) {
    tensors.push_back({bnhd[i].data(), DType::kF32, {batch, len, heads, dim}, {}});
    lses.push_back(flat.lses[i].data());
  }
  std::vector<float> out(batch * len * heads * dim), lse(batch * heads * len);
  merge_attention(Layout::kBNHD, tensors, lses,
                  {out.data(), DType::kF32, {batch, len, heads, dim}, {}}, lse.data());
  HostTensor expected(DType::kF32, batch * heads, len, dim);
  std::vector<float> expected_lse(batch * heads * len);
  merge_parts(flat, expected, expected_lse.data());
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t n = 0; n < len; ++n) {
        ASSERT_EQ(std::memcmp(&lse[(b * heads + h) * len + n],
                              &expected_lse[(b * heads + h) * len + n], sizeof(float)),
                  0);
        for (std::int64_t c = 0; c < dim; ++c) {
          const float got = out[((b * len + n) * heads + h) * dim + c];
          const float want = expected.get(b * heads + h, n, c);
          ASSERT_EQ(std::memcmp(&got, &want, sizeof(float)), 0)
              << b << " " << h << " " << n << " " << c << ": " << got << " vs " << want;
        }
      }
    }
  }
  HostTensor again(DType::kF32, batch * heads, len, dim);
  std::vector<float> again_lse(batch * heads * len);
  merge_parts(flat, again, again_lse.data());
  EXPECT_TRUE(test::bitwise_equal(again, expected));
  EXPECT_EQ(std::memcmp(again_lse.data(), expected_lse.data(), again_lse.size() * sizeof(float)),
            0);
}

void expect_rejected(const std::vector<TensorView>& outputs, const std::vector<const float*>& lses,
                     HostTensor& out, float* lse, const std::string& text) {
  out.fill_storage(-7.0f);
  const std::vector<unsigned char> before = out.storage();
  try {
    merge_attention(outputs, lses, out.mutable_view(), lse);
    ADD_FAILURE() << "no exception; expected one mentioning " << text;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
  EXPECT_EQ(out.storage(), before) << "a rejected merge wrote its output";
}

TEST(MergeAttention, RejectsBadInputsNamingThemAndWritesNothing) {
  const std::int64_t heads = 2, len = 5, dim = 8;
  Parts parts = random_parts(2, DType::kF32, heads, len, dim, 4);
  parts.lses[0].assign(heads * len, 1.0f);
  parts.lses[1].assign(heads * len, 2.0f);
  parts.outputs[0].fill_normal(1);
  parts.outputs[1].fill_normal(2);
  HostTensor out(DType::kF32, heads, len, dim);
  std::vector<float> lse(heads * len);
  const std::vector<TensorView> views = {parts.outputs[0].view(), parts.outputs[1].view()};
  const std::vector<const float*> lses = {parts.lses[0].data(), parts.lses[1].data()};

  expect_rejected({}, {}, out, lse.data(), "outputs: need at least one part");
  expect_rejected(views, {lses[0]}, out, lse.data(), "lses: expected one LSE per output (2)");
  expect_rejected(views, {lses[0], nullptr}, out, lse.data(), "lses[1]: is null");
  HostTensor shorter(DType::kF32, heads, len - 1, dim);
  expect_rejected({views[0], shorter.view()}, lses, out, lse.data(), "outputs[1]: expected");
  HostTensor wider(DType::kF32, heads, len, dim + 8);
  EXPECT_THROW(merge_attention(views, lses, wider.mutable_view(), lse.data()),
               std::invalid_argument);

  std::vector<float> bad = parts.lses[1];
  bad[7] = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(views, {lses[0], bad.data()}, out, lse.data(),
                  "lses[1]: NaN at batch 0, head 1, row 2");
  bad[7] = std::numeric_limits<float>::infinity();
  expect_rejected(views, {lses[0], bad.data()}, out, lse.data(), "lses[1]: +inf at");

  HostTensor nan_out = parts.outputs[0];
  nan_out.set(1, 3, 5, std::numeric_limits<float>::quiet_NaN());
  expect_rejected({nan_out.view(), views[1]}, lses, out, lse.data(),
                  "outputs[0]: NaN or Inf at batch 0, head 1, row 3");
  // Without the check the caller vouches for its data.
  EXPECT_NO_THROW(merge_attention(std::vector<TensorView>{nan_out.view(), views[1]}, lses,
                                  out.mutable_view(), lse.data(), {.check_finite = false}));

  // Outputs never overwrite inputs.
  HostTensor alias = parts.outputs[1];
  const std::vector<TensorView> alias_views = {views[0], alias.view()};
  try {
    merge_attention(alias_views, lses, alias.mutable_view(), lse.data());
    ADD_FAILURE() << "merging into an input was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("out: overlaps outputs[1]"), std::string::npos)
        << e.what();
  }
  std::vector<float> lse_alias = parts.lses[0];
  const std::vector<const float*> alias_lses = {lse_alias.data(), lses[1]};
  EXPECT_THROW(merge_attention(views, alias_lses, out.mutable_view(), lse_alias.data()),
               std::invalid_argument);
}

TEST(MergeAttention, ZeroRowsAreANoOp) {
  HostTensor a(DType::kF32, 2, 0, 8), out(DType::kF32, 2, 0, 8);
  EXPECT_NO_THROW(merge_attention(std::vector<TensorView>{a.view()},
                                  std::vector<const float*>{nullptr}, out.mutable_view(), nullptr));
}

}  // namespace
}  // namespace tilesplash
