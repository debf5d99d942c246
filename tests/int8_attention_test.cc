// The int8 Q.K^T path (Precision::kInt8) on every SIMD target of the build:
// the quantizer against the scalar reference of its specification
// (support/int8_reference.h) bit for bit, each target's int32 products
// exactly, the attention output against the double-precision attention over
// the same quantized scores (f32 rounding only), its LSE (which must add the
// smoothing back), determinism across threads and loop variants, and the
// accuracy against the unquantized f32 reference (cosine >= 0.999) on data
// where the smoothing matters.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "kernel/int8_quantize.h"
#include "kernel/isa_dispatch.h"
#include "kernel/target_list.h"
#include "support/attention_check.h"
#include "support/int8_reference.h"
#include "support/kernel_case.h"
#include "support/random_data.h"
#include "support/targets.h"
#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/video.h"
#include "tilesplash/workload.h"

namespace tilesplash::test {
namespace {

using enum DType;
using enum MaskMode;

// ---- the quantizer, bit for bit ---------------------------------------------

TEST(Int8Quantizer, RoundsLikeTheReferenceIncludingTiesAndBounds) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 40.0f);
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) x.push_back(normal(rng));
  // Ties (n + 0.5 at inverse 1), the bounds, beyond them, zeros, tiny values.
  for (const float v : {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, -126.5f, 127.0f, -127.0f,
                        127.49f, 300.0f, -1e30f, 0.0f, -0.0f, 1e-30f}) {
    x.push_back(v);
  }
  for (const float inverse : {1.0f, 0.37f, 3.0f, 127.0f / 900.0f}) {
    std::vector<std::int8_t> out(x.size());
    kernel::int8::quantize(x.data(), nullptr, nullptr, static_cast<std::int64_t>(x.size()), inverse,
                           out.data());
    for (std::size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(out[i], quantize_value(x[i], inverse)) << x[i] << " * " << inverse;
    }
  }
  EXPECT_EQ(kernel::int8::scale_for(0.0f).inverse, 0.0f);
  EXPECT_EQ(kernel::int8::scale_for(INFINITY).inverse, 0.0f);
  EXPECT_EQ(kernel::int8::scale_for(127.0f).inverse, 1.0f);
}

TEST(Int8Quantizer, MeanAndScalesMatchTheReference) {
  for (const DType dtype : {kF32, kBF16, kF16}) {
    HostTensor q(dtype, 1, 37, 24);
    HostTensor k(dtype, 1, 200, 24);  // three full key blocks and a ragged one
    q.fill_normal(1);
    k.fill_normal(2);
    for (std::int64_t r = 0; r < k.len(); ++r) {
      for (std::int64_t c = 0; c < k.dim(); ++c) {
        k.set(0, r, c, k.get(0, r, c) * (1.0f + 0.25f * c * c) + 0.5f * c - 3.0f);
      }
    }
    const QuantizedHead want = quantize_head(q.view(), k.view(), 0);

    std::vector<double> sums(4 * 24, 0.0);
    std::vector<float> row(24);
    for (std::int64_t key = 0; key < k.len(); ++key) {
      for (std::int64_t c = 0; c < 24; ++c) row[c] = k.get(0, key, c);
      kernel::int8::add_row(row.data(), 24, sums.data() + key / 64 * 24);
    }
    std::vector<float> mean(24);
    kernel::int8::finish_mean(sums.data(), 4, 24, k.len(), mean.data());
    for (std::int64_t c = 0; c < 24; ++c) EXPECT_EQ(mean[c], want.mean[c]) << c;

    // Q's mean and the channels' ranges (K's spread up to 130x), from the
    // same single pass the path makes, and the migration factors.
    std::vector<double> q_sums(24, 0.0), k_sums(4 * 24, 0.0);
    std::vector<float> q_lo(24, INFINITY), q_hi(24, -INFINITY);
    std::vector<float> k_lo(4 * 24, INFINITY), k_hi(4 * 24, -INFINITY);
    for (std::int64_t i = 0; i < q.len(); ++i) {
      for (std::int64_t c = 0; c < 24; ++c) row[c] = q.get(0, i, c);
      kernel::int8::add_row_range(row.data(), 24, q_sums.data(), q_lo.data(), q_hi.data());
    }
    for (std::int64_t key = 0; key < k.len(); ++key) {
      for (std::int64_t c = 0; c < 24; ++c) row[c] = k.get(0, key, c);
      const std::int64_t at = key / 64 * 24;
      kernel::int8::add_row_range(row.data(), 24, k_sums.data() + at, k_lo.data() + at,
                                  k_hi.data() + at);
    }
    EXPECT_EQ(k_sums, sums);
    std::vector<float> mean_q(24);
    kernel::int8::finish_mean(q_sums.data(), 1, 24, q.len(), mean_q.data());
    std::vector<float> q_amax(24), k_amax(24);
    kernel::int8::finish_amax(q_lo.data(), q_hi.data(), 1, mean_q.data(), 24, q_amax.data());
    kernel::int8::finish_amax(k_lo.data(), k_hi.data(), 4, mean.data(), 24, k_amax.data());
    for (std::int64_t c = 0; c < 24; ++c) {  // exactly the largest |x - mean|
      float want_q = 0.0f, want_k = 0.0f;
      for (std::int64_t i = 0; i < q.len(); ++i) {
        want_q = std::max(want_q, std::fabs(q.get(0, i, c) - mean_q[c]));
      }
      for (std::int64_t key = 0; key < k.len(); ++key) {
        want_k = std::max(want_k, std::fabs(k.get(0, key, c) - mean[c]));
      }
      EXPECT_EQ(q_amax[c], want_q) << c;
      EXPECT_EQ(k_amax[c], want_k) << c;
    }
    int migrated = 0;
    for (std::int64_t c = 0; c < 24; ++c) {
      EXPECT_EQ(mean_q[c], want.mean_q[c]) << c;
      EXPECT_EQ(kernel::int8::migration(q_amax[c], k_amax[c]), want.mul[c]) << c;
      migrated += want.mul[c] != 1.0f;
    }
    EXPECT_GT(migrated, 10);
    // Each key's scale, of its smoothed and migrated values.
    for (std::int64_t key = 0; key < k.len(); ++key) {
      for (std::int64_t c = 0; c < 24; ++c) row[c] = k.get(0, key, c);
      const float amax = kernel::int8::centred_amax(row.data(), mean.data(), want.mul.data(), 24);
      EXPECT_EQ(kernel::int8::scale_for(amax).scale, want.k_scale[key]) << key;
    }
  }
}

// The migration factor: the power of two nearest (in log) to sqrt(a / b).
TEST(Int8Quantizer, MigrationIsAPowerOfTwoNearTheGeometricMean) {
  EXPECT_EQ(kernel::int8::migration(400.0f, 1.0f), 16.0f);  // sqrt(400) = 20 ~ 2^4.3
  EXPECT_EQ(kernel::int8::migration(1.0f, 400.0f), 1.0f / 16.0f);
  EXPECT_EQ(kernel::int8::migration(3.0f, 3.0f), 1.0f);
  EXPECT_EQ(kernel::int8::migration(0.0f, 3.0f), 1.0f);
  EXPECT_EQ(kernel::int8::migration(3.0f, 0.0f), 1.0f);
  EXPECT_EQ(kernel::int8::migration(NAN, 3.0f), 1.0f);
  EXPECT_EQ(kernel::int8::migration(INFINITY, 3.0f), 1.0f);
  EXPECT_EQ(kernel::int8::migration(3e38f, 1e-38f), 16777216.0f);  // clamped to 2^24
  // A migrated value times its inverse migration is exact: no bit of q . k moves.
  const float m = kernel::int8::migration(123.0f, 0.5f);
  int exponent = 0;
  EXPECT_EQ(std::frexp(m, &exponent), 0.5f);
}

// ---- each target's int32 products, exactly ---------------------------------

class Int8DotPerTarget : public TargetTest {};

TEST_P(Int8DotPerTarget, ProductsAreExact) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> level(-127, 127);
  for (const std::int64_t d : {8, 40, 128, 256}) {
    for (const std::int64_t rows : {1, 5, 6, 7, 13}) {
      for (const std::int64_t keys : {1, 63, 64, 65, 200}) {
        std::vector<std::int8_t> q(static_cast<std::size_t>(rows * d));
        std::vector<std::int8_t> k(static_cast<std::size_t>(keys * d));
        for (auto& x : q) x = static_cast<std::int8_t>(level(rng));
        for (auto& x : k) x = static_cast<std::int8_t>(level(rng));
        if (rows == 13) {  // the extremes: the largest sums the path can see
          for (auto& x : q) x = 127;
          for (std::size_t i = 0; i < k.size(); ++i) k[i] = i % 2 ? 127 : -127;
        }
        std::vector<std::int32_t> got(static_cast<std::size_t>(rows * keys), -1);
        kernel::active_target().int8_dot(q.data(), rows, k.data(), keys, d, got.data());
        for (std::int64_t i = 0; i < rows; ++i) {
          for (std::int64_t j = 0; j < keys; ++j) {
            std::int32_t want = 0;
            for (std::int64_t c = 0; c < d; ++c) want += q[i * d + c] * k[j * d + c];
            ASSERT_EQ(got[i * keys + j], want)
                << "d=" << d << " rows=" << rows << " keys=" << keys << " at " << i << "," << j;
          }
        }
      }
    }
  }
}

// The products run on AMX tiles where the target's features (its targets.def
// line, or that of the target a test target emulates) include AMX int8, on
// vpdpbusd where they include VNNI, so ProductsAreExact checks the tile or
// VNNI instructions there (natively, or emulated: SIMDe, the tile model of
// tests/emulation) and the plain byte arithmetic everywhere else.
TEST_P(Int8DotPerTarget, UsesVnniExactlyWhereTheTargetHasIt) {
  std::string listed_name = GetParam();
  for (const kernel::TestTarget& twin : kernel::test_targets()) {
    if (GetParam() == twin.name) listed_name = twin.twin_of;
  }
  std::string features;
  for (const kernel::ListedTarget& listed : kernel::kListedTargets) {
    if (listed_name == listed.name) features = std::string(" ") + listed.features + " ";
  }
  ASSERT_FALSE(features.empty()) << GetParam();
  std::string want = "plain";
  if (features.find(" amx-int8 ") != std::string::npos) {
    want = "tdpbusd (AMX)";
  } else if (features.find(" avx512vnni ") != std::string::npos) {
    want = "vpdpbusd (AVX-512 VNNI)";
  } else if (features.find(" avxvnni ") != std::string::npos) {
    want = "vpdpbusd (AVX-VNNI)";
  }
  EXPECT_EQ(std::string(kernel::active_target().int8_dot_name), want);
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(Int8DotPerTarget);

// ---- attention against the quantized reference ------------------------------

using Case = KernelCase;

bool target_has_dot() { return kernel::active_target().bf16_peak.run != nullptr; }

// Normal Q and V; K normal plus a per-channel offset (what the smoothing
// removes) and, in one head, a few all-zero Q rows (a scale of 0).
struct Inputs {
  HostTensor q, k, v;
};
Inputs make_inputs(const Case& c) {
  Inputs in{HostTensor(c.dtype, c.heads, c.q_len, c.d), HostTensor(c.dtype, c.heads, c.kv_len, c.d),
            HostTensor(c.dtype, c.heads, c.kv_len, c.value_dim())};
  in.q.fill_normal(41);
  in.k.fill_normal(42);
  in.v.fill_normal(43);
  for (std::int64_t h = 0; h < c.heads; ++h) {
    for (std::int64_t r = 0; r < c.kv_len; ++r) {
      for (std::int64_t col = 0; col < c.d; ++col) {
        in.k.set(h, r, col, in.k.get(h, r, col) + 2.0f + 0.05f * static_cast<float>(col % 7));
      }
    }
  }
  for (std::int64_t r = 3; r < std::min<std::int64_t>(c.q_len, 6); ++r) {
    for (std::int64_t col = 0; col < c.d; ++col) in.q.set(0, r, col, 0.0f);
  }
  return in;
}

class Int8Attention : public TargetCaseTest<Case> {};

TEST_P(Int8Attention, MatchesItsQuantizedReference) {
  const Case& c = test_case();
  if (c.path == ProductPath::kDot && !target_has_dot()) {
    GTEST_SKIP() << "target " << target() << " has no bf16 dot product";
  }
  const Inputs in = make_inputs(c);
  std::vector<ReferenceHead> reference;
  for (std::int64_t h = 0; h < c.heads; ++h) {
    reference.push_back(
        int8_reference_attention(c.mask, in.q.view(), in.k.view(), in.v.view(), h, c.scale));
  }
  const TilePlan plan = TilePlan::build(c.mask, c.q_len, c.kv_len, c.blocks);
  AttentionOptions options = c.options(Precision::kInt8);
  Int8Report report;
  options.int8_report = &report;
  const Outputs o = run_forward(plan, in.q, in.k, in.v, c.out_dtype(), options);
  EXPECT_EQ(report.f32_tiles, 0);  // the reference models int8 tiles only
  EXPECT_GT(report.tiles, 0);
  EXPECT_TRUE(matches_reference(reference, o.out, o.lse.data(),
                                tolerance_for(c.dtype, c.out_dtype()), in.v.max_abs()));
}

Mask band_with_sink() {
  return Mask::function([](std::int64_t, std::int64_t k) { return k < 16; }, "sink16") |
         Mask::local(40, 40);
}

std::vector<Case> cases() {
  return {
      {.name = "dense_129_f32", .q_len = 129, .kv_len = 129},
      {.name = "dense_200x1000_f32_d128_threads2",
       .q_len = 200,
       .kv_len = 1000,
       .blocks = {128, 256},
       .d = 128,
       .threads = 2},
      {.name = "causal_700_bf16_dot",
       .mask = Mask::causal(),
       .q_len = 700,
       .kv_len = 700,
       .blocks = {128, 128},
       .dtype = kBF16,
       .threads = 2,
       .path = ProductPath::kDot},
      {.name = "causal_700_bf16_widen_out_bf16",
       .mask = Mask::causal(),
       .q_len = 700,
       .kv_len = 700,
       .blocks = {128, 128},
       .dtype = kBF16,
       .out_in_dtype = true,
       .path = ProductPath::kWiden},
      {.name = "band_sink_500_f16_d80_bitmask",
       .mask = band_with_sink(),
       .q_len = 500,
       .kv_len = 500,
       .blocks = {32, 64},
       .d = 80,
       .dtype = kF16,
       .mode = kBitmask},
      {.name = "random_030_300x333_element_dv128",
       .mask = Mask::random(0.3, 5),
       .q_len = 300,
       .kv_len = 333,
       .d = 64,
       .dv = 128,
       .mode = kElement},
      {.name = "chunked_90_600_rows12_prefetch",
       .mask = Mask::chunked_causal(90),
       .q_len = 600,
       .kv_len = 600,
       .blocks = {100, 192},
       .variant = {2, true}},
      {.name = "local_1000_bf16_dot_rows24_scale",
       .mask = Mask::local(100, 60),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {256, 128},
       .heads = 3,
       .d = 128,
       .dtype = kBF16,
       .threads = 2,
       .path = ProductPath::kDot,
       .variant = {4, false},
       .scale = 0.3f},
      {.name = "decode_3x1000_d256",
       .mask = Mask::causal(997),
       .q_len = 3,
       .kv_len = 1000,
       .blocks = {3, 1024},
       .heads = 1,
       .d = 256},
  };
}

TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(Cases, Int8Attention, ::testing::ValuesIn(cases()));

// ---- exactness through the LSE, determinism --------------------------------

class Int8PerTarget : public TargetTest {};

// With one kept key per row the output is that key's V row and the LSE is
// scale * (its quantized score + q . mean): an int8 value or a scale off by
// one step anywhere moves it by far more than f32 rounding.
TEST_P(Int8PerTarget, ScoresAreTheQuantizedOnesThroughTheLse) {
  for (const DType dtype : {kF32, kBF16}) {
    HostTensor q(dtype, 2, 150, 64), k(dtype, 2, 150, 64), v(dtype, 2, 150, 64);
    q.fill_normal(7);
    k.fill_normal(8);
    v.fill_normal(9);
    for (std::int64_t r = 0; r < 150; ++r) k.set(1, r, 5, k.get(1, r, 5) + 4.0f);
    const Mask one_key =
        Mask::function([](std::int64_t i, std::int64_t j) { return j == (i * 37) % 150; }, "one");
    const TilePlan plan = TilePlan::build(one_key, 150, 150, {64, 64});
    AttentionOptions options;
    options.precision = Precision::kInt8;
    options.product_path = ProductPath::kWiden;
    const Outputs o = run_forward(plan, q, k, v, kF32, options);
    for (std::int64_t h = 0; h < 2; ++h) {
      const ReferenceHead want = int8_reference_attention(one_key, q.view(), k.view(), v.view(), h);
      for (std::int64_t i = 0; i < 150; ++i) {
        const double got = o.lse[h * 150 + i];
        ASSERT_NEAR(got, want.lse[i], 2e-6 * std::max(1.0, std::fabs(want.lse[i])))
            << to_string(dtype) << " head " << h << " row " << i;
      }
    }
  }
}

TEST_P(Int8PerTarget, BitIdenticalAcrossThreadsAndVariants) {
  HostTensor q(kBF16, 3, 777, 64), k(kBF16, 3, 777, 64), v(kBF16, 3, 777, 64);
  q.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  const TilePlan plan = TilePlan::build(Mask::local(150, 90), 777, 777, {128, 192});
  AttentionOptions options;
  options.precision = Precision::kInt8;
  options.threads = 1;
  const Outputs first = run_forward(plan, q, k, v, kF32, options);
  for (const int threads : {2, 3}) {
    for (const KernelVariant variant :
         {KernelVariant{1, false}, KernelVariant{2, true}, KernelVariant{4, false}}) {
      options.threads = threads;
      options.variant = variant;
      const Outputs again = run_forward(plan, q, k, v, kF32, options);
      EXPECT_TRUE(bitwise_equal(first.out, again.out)) << threads << " " << to_string(variant);
      EXPECT_EQ(first.lse, again.lse) << threads << " " << to_string(variant);
    }
  }
}

// Against the f32 attention of the unquantized inputs: K with a large common
// offset (the case smoothing exists for) and a sharp, peaked softmax.
TEST_P(Int8PerTarget, CloseToF32WithTheSmoothing) {
  const std::int64_t n = 512, d = 128;
  HostTensor q(kF32, 1, n, d), k(kF32, 1, n, d), v(kF32, 1, n, d);
  q.fill_normal(21);
  k.fill_normal(22);
  v.fill_normal(23);
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < d; ++c) {
      q.set(0, r, c, 2.0f * q.get(0, r, c));
      k.set(0, r, c, k.get(0, r, c) + (c % 3 == 0 ? 8.0f : -3.0f));
    }
  }
  const TilePlan plan = TilePlan::build(Mask::dense(), n, n, {128, 128});
  AttentionOptions options;
  options.precision = Precision::kInt8;
  const Outputs got = run_forward(plan, q, k, v, kF32, options);
  const ReferenceHead want = reference_attention(Mask::dense(), q.view(), k.view(), v.view(), 0);
  double dot = 0.0, got2 = 0.0, want2 = 0.0, diff2 = 0.0;
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < d; ++c) {
      const double a = got.out.get(0, r, c);
      const double b = want.out[r * d + c];
      dot += a * b;
      got2 += a * a;
      want2 += b * b;
      diff2 += (a - b) * (a - b);
    }
  }
  const double cosine = dot / std::sqrt(got2 * want2);
  EXPECT_GE(cosine, 0.999);
  EXPECT_LE(std::sqrt(diff2 / want2), 0.05);
}

// The planted video workload (workload.h), every head type, bf16 as a model
// runs it: the int8 output against the float64 attention of the unquantized
// inputs, per head type, within the accuracy docs/kernel.md states.
TEST_P(Int8PerTarget, PlantedHeadsKeepTheirAccuracy) {
  const VideoGeometry g{6, 8, 8, 0, TextPlacement::kNone};  // 384 tokens
  WorkloadOptions wo;
  wo.planted.assign(planted_heads().begin(), planted_heads().end());
  wo.heads = static_cast<std::int64_t>(wo.planted.size());
  wo.head_dim = 64;
  wo.dtype = kBF16;
  const VideoWorkload workload(g, wo);
  const std::int64_t n = g.tokens(), d = wo.head_dim;
  std::vector<float> out(static_cast<std::size_t>(wo.heads * n * d));
  std::vector<float> lse(static_cast<std::size_t>(wo.heads * n));
  const TilePlan plan = TilePlan::build(Mask::dense(), n, n, {128, 128});
  AttentionOptions options;
  options.precision = Precision::kInt8;
  attention_forward(plan,
                    {workload.q(), workload.k(), workload.v(),
                     MutableTensorView::contiguous(out.data(), kF32, wo.heads, n, d), lse.data()},
                    options);
  for (std::int64_t h = 0; h < wo.heads; ++h) {
    const ReferenceHead want =
        reference_attention(Mask::dense(), workload.q(), workload.k(), workload.v(), h);
    double dot = 0.0, got2 = 0.0, want2 = 0.0, diff2 = 0.0;
    for (std::int64_t i = 0; i < n * d; ++i) {
      const double a = out[static_cast<std::size_t>(h * n * d + i)];
      const double b = want.out[static_cast<std::size_t>(i)];
      dot += a * b;
      got2 += a * a;
      want2 += b * b;
      diff2 += (a - b) * (a - b);
    }
    const double cosine = dot / std::sqrt(got2 * want2);
    const double rel_l2 = std::sqrt(diff2 / want2);
    const std::string type(to_string(workload.planted()[static_cast<std::size_t>(h)]));
    RecordProperty("cosine_" + type, std::to_string(cosine));
    RecordProperty("rel_l2_" + type, std::to_string(rel_l2));
    EXPECT_GE(cosine, 0.999) << type << " rel_l2 " << rel_l2;
    EXPECT_LE(rel_l2, 0.05) << type << " cosine " << cosine;
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(Int8PerTarget);

}  // namespace
}  // namespace tilesplash::test
