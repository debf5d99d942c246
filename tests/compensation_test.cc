// Compensation of skipped tiles (AttentionOptions::compensate,
// src/compensation/) on every SIMD target of the build: against a float64
// reference written from the definition (the exact masked part merged with
// n * exp(scale q . k_mean) * v_mean of every empty tile of the plan), over
// masks x lengths (ragged, 1, tile +- 1) x dtypes x threads; bit-identical to
// no compensation when the plan skips nothing; exact when a skipped tile
// holds one repeated key; bit-identical across thread counts.
#include "compensation/compensation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel/isa_dispatch.h"
#include "support/attention_check.h"
#include "support/kernel_case.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "support/targets.h"
#include "tilesplash/attention.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::test {
namespace {

using Case = KernelCase;
using enum DType;

// The definition, in double: per q-block, the pooled tiles the plan does not
// visit, merged with the exact masked attention through the LSE.
std::vector<ReferenceHead> compensated_reference(const Case& c, const TilePlan& plan,
                                                 const HostTensor& q, const HostTensor& k,
                                                 const HostTensor& v) {
  std::vector<ReferenceHead> heads = reference_all_heads(c.mask, q, k, v, c.scale);
  const double scale = c.scale ? *c.scale : 1.0 / std::sqrt(static_cast<double>(c.d));
  const std::int64_t dv = c.value_dim(), tiles = plan.num_kv_blocks();
  for (std::int64_t h = 0; h < c.heads; ++h) {
    // Mean key and value of every tile.
    std::vector<std::vector<double>> kbar(tiles, std::vector<double>(c.d, 0.0));
    std::vector<std::vector<double>> vbar(tiles, std::vector<double>(dv, 0.0));
    for (std::int64_t t = 0; t < tiles; ++t) {
      const IndexRange keys = plan.kv_range(t);
      for (std::int64_t j = keys.begin; j < keys.end; ++j) {
        for (std::int64_t x = 0; x < c.d; ++x) kbar[t][x] += load_element(k.view(), h, j, x);
        for (std::int64_t x = 0; x < dv; ++x) vbar[t][x] += load_element(v.view(), h, j, x);
      }
      for (double& x : kbar[t]) x /= static_cast<double>(keys.size());
      for (double& x : vbar[t]) x /= static_cast<double>(keys.size());
    }
    ReferenceHead& ref = heads[static_cast<std::size_t>(h)];
    for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
      std::vector<bool> visited(static_cast<std::size_t>(tiles), false);
      for (const PlanTile& tile : plan.tiles(qb)) visited[tile.kv_block] = true;
      const IndexRange rows = plan.q_range(qb);
      for (std::int64_t r = rows.begin; r < rows.end; ++r) {
        double top = ref.lse[r];
        std::vector<double> logw;
        std::vector<std::int64_t> skipped;
        for (std::int64_t t = 0; t < tiles; ++t) {
          if (visited[t]) continue;
          double dot = 0.0;
          for (std::int64_t x = 0; x < c.d; ++x)
            dot += load_element(q.view(), h, r, x) * kbar[t][x];
          logw.push_back(scale * dot + std::log(static_cast<double>(plan.kv_range(t).size())));
          skipped.push_back(t);
          top = std::max(top, logw.back());
        }
        if (skipped.empty() || top == -std::numeric_limits<double>::infinity()) continue;
        const double exact = std::exp(ref.lse[r] - top);
        double sum = exact;
        std::vector<double> o(dv);
        for (std::int64_t x = 0; x < dv; ++x) o[x] = exact * ref.out[r * dv + x];
        for (std::size_t i = 0; i < skipped.size(); ++i) {
          const double w = std::exp(logw[i] - top);
          sum += w;
          for (std::int64_t x = 0; x < dv; ++x) o[x] += w * vbar[skipped[i]][x];
        }
        for (std::int64_t x = 0; x < dv; ++x) ref.out[r * dv + x] = o[x] / sum;
        ref.lse[r] = top + std::log(sum);
      }
    }
  }
  return heads;
}

struct Inputs {
  HostTensor q, k, v;
};

Inputs inputs(const Case& c) {
  Inputs in{HostTensor(c.dtype, c.heads, c.q_len, c.d), HostTensor(c.dtype, c.heads, c.kv_len, c.d),
            HostTensor(c.dtype, c.heads, c.kv_len, c.value_dim())};
  in.q.fill_normal(5);
  in.k.fill_normal(6);
  in.v.fill_normal(7);
  return in;
}

AttentionOptions compensated(const Case& c) {
  AttentionOptions o = c.options();
  o.compensate = true;
  return o;
}

class CompensationSweep : public TargetCaseTest<Case> {};

TEST_P(CompensationSweep, MatchesTheFloat64Definition) {
  const Case& c = test_case();
  const Inputs in = inputs(c);
  const TilePlan plan = TilePlan::build(c.mask, c.q_len, c.kv_len, c.blocks);
  const std::vector<ReferenceHead> reference = compensated_reference(c, plan, in.q, in.k, in.v);
  const Outputs o = run_forward(plan, in.q, in.k, in.v, c.out_dtype(), compensated(c), c.with_lse);
  EXPECT_TRUE(matches_reference(reference, o.out, c.with_lse ? o.lse.data() : nullptr,
                                tolerance_for(c.dtype, c.out_dtype()), in.v.max_abs()));
}

// Every third row of the map keeps nothing (its q-block still visits every
// tile the band touches): such a row with no skipped tile stays 0 / -inf.
Mask band_with_empty_rows() {
  return Mask::function([](std::int64_t q, std::int64_t k) { return q % 3 != 1 && k <= q + 70; },
                        "band_with_empty_rows");
}

std::vector<Case> sweep_cases() {
  return {
      {.name = "causal_1000_bf16",
       .mask = Mask::causal(),
       .q_len = 1000,
       .kv_len = 1000,
       .blocks = {128, 128},
       .dtype = kBF16,
       .threads = 2},
      {.name = "local_129_f16_out",
       .mask = Mask::local(20, 20),
       .q_len = 129,
       .kv_len = 129,
       .dtype = kF16,
       .out_in_dtype = true},
      {.name = "local_127_no_lse",
       .mask = Mask::local(10, 30),
       .q_len = 127,
       .kv_len = 127,
       .threads = 3,
       .with_lse = false},
      {.name = "local_65x63_bf16_out",
       .mask = Mask::local(5, 5),
       .q_len = 65,
       .kv_len = 63,
       .blocks = {16, 64},
       .dtype = kBF16,
       .out_in_dtype = true},
      {.name = "one_row_x_300", .mask = Mask::local(0, 40), .q_len = 1, .kv_len = 300, .d = 32},
      {.name = "one_key", .mask = Mask::causal(), .q_len = 70, .kv_len = 1, .blocks = {32, 64}},
      {.name = "random_300_dv_48",
       .mask = Mask::random(0.02, 9),
       .q_len = 300,
       .kv_len = 300,
       .dv = 48,
       .threads = 2},
      {.name = "empty_rows_200",
       .mask = band_with_empty_rows(),
       .q_len = 200,
       .kv_len = 200,
       .blocks = {32, 64}},
      // Many skipped tiles (several key panels of the pass, and a ragged last
      // one) at the head dims of the video models.
      {.name = "local_600x3000_d96",
       .mask = Mask::local(40, 40),
       .q_len = 600,
       .kv_len = 3000,
       .blocks = {16, 64},
       .d = 96,
       .threads = 2},
      {.name = "local_600_d80_bf16",
       .mask = Mask::local(20, 50),
       .q_len = 600,
       .kv_len = 1590,
       .blocks = {32, 64},
       .d = 80,
       .dtype = kBF16},
      {.name = "causal_300_d256", .mask = Mask::causal(), .q_len = 300, .kv_len = 300, .d = 256},
      {.name = "chunked_causal_256_scale",
       .mask = Mask::chunked_causal(64),
       .q_len = 256,
       .kv_len = 256,
       .scale = 0.3f},
  };
}

TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(Masks, CompensationSweep,
                                         ::testing::ValuesIn(sweep_cases()));

class CompensationPerTarget : public TargetTest {};

// A plan that visits every tile leaves the kernel's result alone, bit for
// bit, in every output dtype and with or without an LSE.
TEST_P(CompensationPerTarget, EveryTileKeptIsBitIdentical) {
  for (const DType out : {kF32, kBF16}) {
    for (const bool with_lse : {true, false}) {
      const Case c{.name = "all_kept",
                   .mask = Mask::local(140, 140),
                   .q_len = 200,
                   .kv_len = 200,
                   .dtype = kBF16,
                   .out_in_dtype = out == kBF16,
                   .threads = 2,
                   .with_lse = with_lse};
      const Inputs in = inputs(c);
      const TilePlan plan = TilePlan::build(c.mask, c.q_len, c.kv_len, c.blocks);
      for (std::int64_t qb = 0; qb < plan.num_q_blocks(); ++qb) {
        ASSERT_EQ(static_cast<std::int64_t>(plan.tiles(qb).size()), plan.num_kv_blocks());
      }
      const Outputs plain = run_forward(plan, in.q, in.k, in.v, out, c.options(), with_lse);
      const Outputs comp = run_forward(plan, in.q, in.k, in.v, out, compensated(c), with_lse);
      EXPECT_TRUE(bitwise_equal(plain.out, comp.out));
      for (std::size_t i = 0; i < plain.lse.size(); ++i) {
        ASSERT_EQ(std::memcmp(&plain.lse[i], &comp.lse[i], sizeof(float)), 0) << i;
      }
    }
  }
}

// A skipped tile of one repeated key and value is exactly n such keys, so
// the mask that skips it gives dense attention's output.
TEST_P(CompensationPerTarget, ARepeatedKeyTileIsExact) {
  for (const DType dtype : {kF32, kBF16}) {
    const Case c{.name = "repeated", .q_len = 150, .kv_len = 256, .dtype = dtype};
    Inputs in = inputs(c);
    for (std::int64_t h = 0; h < c.heads; ++h) {
      for (std::int64_t j = 128; j < 192; ++j) {
        for (std::int64_t x = 0; x < c.d; ++x) {
          in.k.set(h, j, x, in.k.get(h, 128, x));
          in.v.set(h, j, x, in.v.get(h, 128, x));
        }
      }
    }
    const Mask skip = Mask::function(
        [](std::int64_t, std::int64_t k) { return k < 128 || k >= 192; }, "skip_128_192");
    const TilePlan plan = TilePlan::build(skip, c.q_len, c.kv_len, c.blocks);
    const std::vector<ReferenceHead> dense =
        reference_all_heads(Mask::dense(), in.q, in.k, in.v, {});
    const Outputs plain = run_forward(plan, in.q, in.k, in.v, kF32, c.options());
    const Outputs comp = run_forward(plan, in.q, in.k, in.v, kF32, compensated(c));
    const Tolerance tol = tolerance_for(dtype, kF32);
    EXPECT_TRUE(matches_reference(dense, comp.out, comp.lse.data(), tol, in.v.max_abs()));
    EXPECT_FALSE(matches_reference(dense, plain.out, plain.lse.data(), tol, in.v.max_abs()));
  }
}

TEST_P(CompensationPerTarget, BitIdenticalAcrossThreadCounts) {
  Case c{.name = "threads",
         .mask = Mask::local(30, 90),
         .q_len = 700,
         .kv_len = 700,
         .heads = 3,
         .dtype = kBF16};
  const Inputs in = inputs(c);
  const TilePlan plan = TilePlan::build(c.mask, c.q_len, c.kv_len, c.blocks);
  const Outputs one = run_forward(plan, in.q, in.k, in.v, kF32, compensated(c));
  for (const int threads : {2, 3, 5}) {
    c.threads = threads;
    const Outputs many = run_forward(plan, in.q, in.k, in.v, kF32, compensated(c));
    EXPECT_TRUE(bitwise_equal(one.out, many.out)) << threads;
    EXPECT_EQ(std::memcmp(one.lse.data(), many.lse.data(), one.lse.size() * sizeof(float)), 0);
  }
}

// bf16 inputs on both product paths: widened (the f32 pass) and, where the
// target has a bf16 dot product, the pass on it (pooled_merge_dot: vdpbf16ps,
// or AMX tiles natively and on amx_emulated), over the head dims of the video
// models (80 and 96 leave a tail of channel pairs after AMX's 32-channel
// steps), value dims with a padded column chunk, rows around the register
// tile (1, 6 + 1, ragged) and skipped tiles past one key panel of 64; against
// the float64 definition, and bit-identical on 1 and 3 threads.
TEST_P(CompensationPerTarget, Bf16OnBothProductPathsMatchesTheDefinition) {
  const bool has_dot = kernel::active_target().bf16_peak.run != nullptr;
  struct Shape {
    std::int64_t d, dv, q_len, kv_len;
  };
  const Shape shapes[] = {{64, 64, 7, 4200},
                          {80, 48, 65, 1590},
                          {96, 96, 1, 2500},
                          {128, 200, 203, 1000},
                          {256, 256, 40, 700}};
  for (const ProductPath path : {ProductPath::kWiden, ProductPath::kDot}) {
    if (path == ProductPath::kDot && !has_dot) continue;
    for (const Shape& shape : shapes) {
      Case c{.name = "paths",
             .mask = Mask::local(20, 50),
             .q_len = shape.q_len,
             .kv_len = shape.kv_len,
             .blocks = {32, 64},
             .d = shape.d,
             .dv = shape.dv,
             .dtype = kBF16,
             .path = path};
      Inputs in = inputs(c);
      // Keys and values that vary from tile to tile, so that the skipped
      // tiles' means carry weight and value (with independent noise they
      // are near 0 and the pass barely moves the output).
      for (std::int64_t h = 0; h < c.heads; ++h) {
        for (std::int64_t j = 0; j < c.kv_len; ++j) {
          const double t = static_cast<double>(j / 64 + h);
          for (std::int64_t x = 0; x < c.d; ++x) {
            in.k.set(h, j, x,
                     0.3f * in.k.get(h, j, x) + static_cast<float>(std::sin(0.7 * t + 1.3 * x)));
          }
          for (std::int64_t x = 0; x < c.value_dim(); ++x) {
            in.v.set(
                h, j, x,
                0.3f * in.v.get(h, j, x) + static_cast<float>(2.0 * std::cos(0.5 * t + 0.9 * x)));
          }
        }
      }
      const TilePlan plan = TilePlan::build(c.mask, c.q_len, c.kv_len, c.blocks);
      const std::vector<ReferenceHead> reference = compensated_reference(c, plan, in.q, in.k, in.v);
      const Outputs one = run_forward(plan, in.q, in.k, in.v, kF32, compensated(c));
      EXPECT_TRUE(matches_reference(reference, one.out, one.lse.data(),
                                    tolerance_for(c.dtype, kF32), in.v.max_abs()))
          << to_string(path) << " d=" << shape.d << " dv=" << shape.dv;
      c.threads = 3;
      const Outputs three = run_forward(plan, in.q, in.k, in.v, kF32, compensated(c));
      EXPECT_TRUE(bitwise_equal(one.out, three.out)) << to_string(path) << " d=" << shape.d;
      EXPECT_EQ(std::memcmp(one.lse.data(), three.lse.data(), one.lse.size() * sizeof(float)), 0);
    }
  }
}

// The pooled means are each tile's keys in run order (rows through
// `sources`, the filter applied) summed eight at a time in float32, those
// sums added in float64, divided and rounded once: every target's vector
// sums give those bits exactly, in every dtype and layout, with head
// dimensions that fill no vector evenly.
TEST_P(CompensationPerTarget, PooledMeansAreGroupedSumsInRunOrder) {
  constexpr std::int64_t kHeads = 3, kLen = 301, kBlock = 64;
  const compensation::KeyFilter filter{.limit = 290, .first = 5, .count = 7, .stride = 11};
  std::vector<std::int64_t> sources(kLen);
  for (std::int64_t j = 0; j < kLen; ++j) sources[j] = (j * 7) % kLen;  // 7 is prime to 301
  ThreadingContext context(2);
  for (const DType dtype : {kF32, kBF16, kF16}) {
    for (const std::int64_t d : {8, 40, 128}) {
      HostTensor k(dtype, kHeads, kLen, d, d, kHeads * d), v(dtype, kHeads, kLen, d + 8);
      k.fill_normal(1 + d);
      v.fill_normal(2 + d);
      compensation::PooledTiles pooled;
      compensation::pool_tiles(context, 2, k.view(), v.view(), kBlock, filter, pooled, sources);
      for (std::int64_t h = 0; h < kHeads; ++h) {
        for (const std::int32_t t : pooled.keep) {
          std::vector<std::int64_t> keys;
          for (std::int64_t j = t * kBlock; j < std::min(kLen, (t + 1) * kBlock); ++j) {
            if (!filter.excluded(j)) keys.push_back(sources[j]);
          }
          const double n = static_cast<double>(keys.size());
          const auto grouped = [&](const HostTensor& x, std::int64_t c) {
            double sum = 0.0;
            for (std::size_t g = 0; g < keys.size(); g += 8) {
              float part = x.get(h, keys[g], c);
              for (std::size_t i = g + 1; i < std::min(keys.size(), g + 8); ++i) {
                part += x.get(h, keys[i], c);
              }
              sum += static_cast<double>(part);
            }
            return sum;
          };
          std::vector<double> key_sum(d), value_sum(d + 8);
          for (std::int64_t x = 0; x < d; ++x) key_sum[x] = grouped(k, x);
          for (std::int64_t x = 0; x < d + 8; ++x) value_sum[x] = grouped(v, x);
          const float* key = pooled.keys.data() + (h * pooled.tiles + t) * d;
          const float* value = pooled.values.data() + (h * pooled.tiles + t) * (d + 8);
          for (std::int64_t x = 0; x < d; ++x) {
            ASSERT_EQ(key[x], static_cast<float>(key_sum[x] * (1.0 / n))) << h << " " << t;
          }
          for (std::int64_t x = 0; x < d + 8; ++x) {
            ASSERT_EQ(value[x], static_cast<float>(value_sum[x] * (1.0 / n))) << h << " " << t;
          }
        }
      }
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(CompensationPerTarget);

// The keys a front door leaves out of the means: padding and a second segment.
TEST(CompensationKeyFilter, LeavesOutPaddingAndTheSegment) {
  const compensation::KeyFilter filter{.limit = 100, .first = 3, .count = 4, .stride = 10};
  std::vector<std::int64_t> out;
  for (std::int64_t key = 0; key < 110; ++key) {
    if (filter.excluded(key)) out.push_back(key);
  }
  std::vector<std::int64_t> expected = {3, 13, 23, 33};
  for (std::int64_t key = 100; key < 110; ++key) expected.push_back(key);
  EXPECT_EQ(out, expected);

  HostTensor k(kF32, 1, 130, 8), v(kF32, 1, 130, 8);
  for (std::int64_t j = 0; j < 130; ++j) {
    for (std::int64_t x = 0; x < 8; ++x) {
      k.set(0, j, x, static_cast<float>(j));
      v.set(0, j, x, static_cast<float>(2 * j));
    }
  }
  ThreadingContext context(2);
  compensation::PooledTiles pooled;
  compensation::pool_tiles(context, 2, k.view(), v.view(), 64, filter, pooled);
  // Tile 0: keys 0..63 but 3, 13, 23, 33; tile 1: 64..99; tile 2: none.
  EXPECT_EQ(pooled.keep, (std::vector<std::int32_t>{0, 1}));
  const double mean0 = (63.0 * 64.0 / 2.0 - (3 + 13 + 23 + 33)) / 60.0;
  EXPECT_NEAR(pooled.keys[0], mean0, 1e-5);
  EXPECT_NEAR(pooled.values[0], 2 * mean0, 1e-5);
  EXPECT_NEAR(pooled.keys[8], (64 + 99) / 2.0, 1e-5);
  EXPECT_NEAR(pooled.log_count[1], std::log(36.0), 1e-6);
}

}  // namespace
}  // namespace tilesplash::test
