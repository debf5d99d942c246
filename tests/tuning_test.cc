// The tuner: its candidate list, the sampled plans it times (the same tiles
// as the full plan on the sampled q-blocks, nothing elsewhere, so a sampled
// run is an exact slice of the full run), and tune_blocks() on tiny shapes --
// it returns one of its candidates and the plan that choice implies computes
// correct attention. Nothing here asserts on time.
#include "tilesplash/tuning.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "support/attention_check.h"
#include "support/random_data.h"
#include "tilesplash/attention.h"
#include "tilesplash/kernel_limits.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tuning/sample_plan.h"

namespace tilesplash {
namespace {

bool kernel_accepts(const BlockSizes& b) {
  return kernel_limits::valid_block_q(b.block_q) && kernel_limits::valid_block_kv(b.block_kv);
}

TEST(TileCandidates, SpanSmallToLargeWithinKernelLimits) {
  const auto list = tile_candidates();
  ASSERT_GE(list.size(), 8u);
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (const BlockSizes& b : list) {
    EXPECT_TRUE(kernel_accepts(b)) << b.block_q << "x" << b.block_kv;
    EXPECT_TRUE(seen.insert({b.block_q, b.block_kv}).second) << "duplicate";
  }
  EXPECT_LE(list.front().block_q, 32);
  EXPECT_TRUE(
      std::any_of(list.begin(), list.end(), [](const BlockSizes& b) { return b.block_q == 3328; }));
}

TEST(TileCandidates, CollapseBeyondTheLengths) {
  EXPECT_EQ(tile_candidates_for(1 << 20, 1 << 20).size(), tile_candidates().size());
  const auto short_list = tile_candidates_for(100, 70);
  std::set<std::pair<std::int64_t, std::int64_t>> seen;
  for (const BlockSizes& b : short_list) {
    EXPECT_TRUE(kernel_accepts(b));
    EXPECT_LE(b.block_q, 128);   // the smallest candidate covering 100 rows
    EXPECT_LE(b.block_kv, 128);  // 70 keys round up to 128
    EXPECT_TRUE(seen.insert({b.block_q, b.block_kv}).second);
  }
  EXPECT_LT(short_list.size(), tile_candidates().size());
  EXPECT_FALSE(tile_candidates_for(1, 1).empty());
}

TEST(Sampling, StratifiedBlocksSpanTheCostSpectrum) {
  const std::vector<std::int64_t> work = {5, 1, 9, 3, 7, 2, 8, 4, 6, 10};
  const auto picked = tuning::stratified_blocks(work, 5);
  ASSERT_EQ(picked.size(), 5u);
  EXPECT_TRUE(std::is_sorted(picked.begin(), picked.end()));
  std::vector<std::int64_t> costs;
  for (const auto b : picked) costs.push_back(work[static_cast<std::size_t>(b)]);
  std::sort(costs.begin(), costs.end());
  EXPECT_EQ(costs, (std::vector<std::int64_t>{2, 4, 6, 8, 10}));
  EXPECT_EQ(tuning::stratified_blocks(work, 10).size(), 10u);
  EXPECT_EQ(tuning::stratified_blocks(work, 50).size(), 10u);
  EXPECT_TRUE(tuning::stratified_blocks(work, 0).empty());
}

// Every case: the sampled plan has the full plan's tiles (kind, kv block and
// bitmask) on the sampled q-blocks and none elsewhere, and the visited pairs
// split exactly.
TEST(Sampling, SampledPlanIsAnExactSliceOfTheFullPlan) {
  const Mask masks[] = {Mask::local(70, 40), Mask::causal(),
                        Mask::local(30, 30) | Mask::chunked_causal(96), Mask::random(0.3, 7)};
  for (const Mask& mask : masks) {
    for (const BlockSizes blocks : {BlockSizes{32, 64}, BlockSizes{48, 128}}) {
      const TilePlan full = TilePlan::build(mask, 400, 330, blocks);
      const auto work = tuning::visited_pairs_per_block(full);
      const auto picked = tuning::stratified_blocks(work, 4);
      const TilePlan sample = tuning::sampled_plan(full, picked);
      EXPECT_EQ(sample.num_q_blocks(), full.num_q_blocks());
      std::int64_t sampled_kept = 0;
      for (std::int64_t qb = 0; qb < full.num_q_blocks(); ++qb) {
        const bool on = std::binary_search(picked.begin(), picked.end(), qb);
        const auto a = full.tiles(qb);
        const auto b = sample.tiles(qb);
        if (!on) {
          EXPECT_TRUE(b.empty()) << mask.to_string() << " qb " << qb;
          continue;
        }
        ASSERT_EQ(a.size(), b.size()) << mask.to_string() << " qb " << qb;
        for (std::size_t i = 0; i < a.size(); ++i) {
          ASSERT_EQ(a[i].kv_block, b[i].kv_block);
          ASSERT_EQ(a[i].is_full(), b[i].is_full());
          if (a[i].is_full()) continue;
          const std::size_t bytes =
              static_cast<std::size_t>(blocks.block_q * full.words_per_row()) * 8;
          EXPECT_EQ(std::memcmp(full.partial_bits(a[i].partial_id),
                                sample.partial_bits(b[i].partial_id), bytes),
                    0);
        }
        for (std::int64_t q = full.q_range(qb).begin; q < full.q_range(qb).end; ++q) {
          for (std::int64_t k = 0; k < full.kv_len(); ++k) sampled_kept += mask.keeps(q, k);
        }
      }
      EXPECT_EQ(sample.stats().kept_pairs, sampled_kept) << mask.to_string();
      EXPECT_EQ(sample.mask().is_analytic(), mask.is_analytic());
      const auto sample_work = tuning::visited_pairs_per_block(sample);
      for (std::size_t qb = 0; qb < work.size(); ++qb) {
        const bool on =
            std::binary_search(picked.begin(), picked.end(), static_cast<std::int64_t>(qb));
        EXPECT_EQ(sample_work[qb], on ? work[qb] : 0);
      }
    }
  }
}

// The sampled run computes the sampled rows exactly as the full run does
// (bit for bit: same tiles, same arithmetic) and writes zeros elsewhere.
TEST(Sampling, SampledRunReproducesTheFullRunRows) {
  const Mask mask = Mask::local(100, 50);
  const BlockSizes blocks{40, 64};
  test::HostTensor q(DType::kBF16, 2, 500, 64), k(DType::kBF16, 2, 500, 64),
      v(DType::kBF16, 2, 500, 64);
  q.fill_normal(1);
  k.fill_normal(2);
  v.fill_normal(3);
  const TilePlan full = TilePlan::build(mask, 500, 500, blocks);
  const auto picked = tuning::stratified_blocks(tuning::visited_pairs_per_block(full), 3);
  const TilePlan sample = tuning::sampled_plan(full, picked);
  AttentionOptions options;
  options.threads = 2;
  const auto a = test::run_forward(full, q, k, v, DType::kF32, options);
  const auto b = test::run_forward(sample, q, k, v, DType::kF32, options);
  for (std::int64_t h = 0; h < 2; ++h) {
    for (std::int64_t r = 0; r < 500; ++r) {
      const bool on = std::binary_search(picked.begin(), picked.end(), r / blocks.block_q);
      for (std::int64_t c = 0; c < 64; ++c) {
        ASSERT_EQ(b.out.get(h, r, c), on ? a.out.get(h, r, c) : 0.0f) << h << " " << r;
      }
    }
  }
}

TEST(Tuner, ReturnsACandidateWhosePlanIsCorrect) {
  const Mask mask = Mask::local(90, 60) | Mask::causal(-250);
  TuneOptions options;
  options.heads = 1;
  options.threads = 2;
  options.budget_seconds = 0.05;
  options.repeats = 1;
  options.verify = true;
  const TuneResult result = tune_blocks(mask, 300, 300, 32, DType::kBF16, options);

  // The tile candidates with the default variant, then the other variants at
  // the fastest of those tiles.
  const auto list = tile_candidates_for(300, 300);
  const auto variants = kernel_variants();
  ASSERT_EQ(result.candidates.size(), list.size() + variants.size() - 1);
  std::size_t fastest_tiles = 0;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (result.candidates[i].seconds < result.candidates[fastest_tiles].seconds) fastest_tiles = i;
  }
  for (std::size_t i = 0; i < result.candidates.size(); ++i) {
    const CandidateResult& c = result.candidates[i];
    if (i < list.size()) {
      EXPECT_EQ(c.blocks, list[i]);
      EXPECT_EQ(c.variant, variants[0]);
    } else {
      EXPECT_EQ(c.blocks, list[fastest_tiles]);
      EXPECT_EQ(c.variant, variants[i - list.size() + 1]);
    }
    const TilePlan plan = TilePlan::build(mask, 300, 300, c.blocks);
    EXPECT_EQ(c.full, plan.stats().full);
    EXPECT_EQ(c.partial, plan.stats().partial);
    EXPECT_EQ(c.kept_pairs, plan.stats().kept_pairs);
    EXPECT_GE(c.boundary_pairs, 0);
    EXPECT_GT(c.seconds, 0.0);
    EXPECT_GT(c.sample_fraction, 0.0);
    EXPECT_LE(c.sample_fraction, 1.0);
  }
  ASSERT_LT(result.best, result.candidates.size());
  EXPECT_TRUE(std::find(list.begin(), list.end(), result.blocks()) != list.end());
  EXPECT_TRUE(result.candidates[result.best].full_seconds.has_value());
  EXPECT_TRUE(result.candidates[result.least_boundary].full_seconds.has_value());
  for (const CandidateResult& c : result.candidates) {
    EXPECT_LE(result.candidates[result.least_boundary].boundary_pairs, c.boundary_pairs);
  }
  EXPECT_EQ(result.key, make_tune_key(mask, 300, 300, 32, DType::kBF16, 2));

  // The plan the choice implies gives the reference attention.
  test::HostTensor q(DType::kBF16, 2, 300, 32), k(DType::kBF16, 2, 300, 32),
      v(DType::kBF16, 2, 300, 32);
  q.fill_normal(4);
  k.fill_normal(5);
  v.fill_normal(6);
  const TilePlan plan = TilePlan::build(mask, 300, 300, result.blocks());
  AttentionOptions run_options;
  run_options.variant = result.variant();
  const auto got = test::run_forward(plan, q, k, v, DType::kF32, run_options);
  EXPECT_TRUE(test::matches_reference(test::reference_all_heads(mask, q, k, v, std::nullopt),
                                      got.out, got.lse.data(),
                                      test::tolerance_for(DType::kBF16, DType::kF32), v.max_abs()));
}

TEST(Tuner, ExhaustiveTimesEveryCandidateOnTheFullRun) {
  TuneOptions options;
  options.heads = 1;
  options.threads = 1;
  options.budget_seconds = 0.02;
  options.repeats = 1;
  options.exhaustive = true;
  options.clock = TuneClock::kCpu;
  options.candidates = {{32, 64}, {64, 128}, {256, 64}};
  options.variants = {KernelVariant{1, false}, KernelVariant{4, true}};
  const TuneResult result = tune_blocks(Mask::causal(), 200, 200, 16, DType::kF32, options);
  ASSERT_EQ(result.candidates.size(), 4u);  // three tiles, then the second variant
  EXPECT_EQ(result.candidates[3].variant, (KernelVariant{4, true}));
  for (const CandidateResult& c : result.candidates) EXPECT_TRUE(c.full_seconds.has_value());
  // 256 rows cover all 200: one q-block, always timed whole.
  EXPECT_EQ(result.candidates[2].sample_fraction, 1.0);
}

TEST(Tuner, RejectsBadArguments) {
  const Mask mask = Mask::causal();
  TuneOptions bad;
  bad.candidates = {{64, 100}};
  EXPECT_THROW(tune_blocks(mask, 100, 100, 64, DType::kF32, bad), std::invalid_argument);
  bad = {};
  bad.budget_seconds = 0.0;
  EXPECT_THROW(tune_blocks(mask, 100, 100, 64, DType::kF32, bad), std::invalid_argument);
  bad = {};
  bad.heads = 0;
  EXPECT_THROW(tune_blocks(mask, 100, 100, 64, DType::kF32, bad), std::invalid_argument);
  EXPECT_THROW(tune_blocks(mask, 100, 100, 60, DType::kF32, {}), std::invalid_argument);
  EXPECT_THROW(tune_blocks(mask, 0, 100, 64, DType::kF32, {}), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash
