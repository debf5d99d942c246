// The public plan cache: hits return the same plan, keys separate every
// field, the least recently used plan goes first, a held plan outlives its
// eviction, and concurrent callers agree.
#include "tilesplash/plan_cache.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace tilesplash {
namespace {

TEST(PlanCache, HitsMissesAndKeys) {
  PlanCache cache;
  double seconds = 0.0;
  const auto a = cache.get(Mask::causal(), 100, 100, {16, 64}, &seconds);
  EXPECT_EQ(cache.get(Mask::causal(), 100, 100, {16, 64}), a);
  EXPECT_NE(cache.get(Mask::causal(), 100, 101, {16, 64}), a);
  EXPECT_NE(cache.get(Mask::causal(), 100, 100, {32, 64}), a);
  EXPECT_NE(cache.get(Mask::causal(1), 100, 100, {16, 64}), a);
  const PlanCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 4);
  EXPECT_EQ(stats.size, 4);
  // The time added is the build time of the one plan built with the pointer;
  // the cache's total is every built plan's.
  EXPECT_EQ(seconds, a->stats().build_seconds);
  double built = 0.0;
  for (const auto& plan : {a, cache.get(Mask::causal(), 100, 101, {16, 64}),
                           cache.get(Mask::causal(), 100, 100, {32, 64}),
                           cache.get(Mask::causal(1), 100, 100, {16, 64})}) {
    EXPECT_GT(plan->stats().build_seconds, 0.0);
    built += plan->stats().build_seconds;
  }
  EXPECT_DOUBLE_EQ(cache.stats().build_seconds, built);
  cache.clear();
  EXPECT_EQ(cache.stats().size, 0);
}

TEST(PlanCache, EvictsLeastRecentlyUsedAndKeepsHeldPlansAlive) {
  PlanCache cache(2);
  const auto a = cache.get(Mask::dense(), 10, 10, {8, 64});
  const auto b = cache.get(Mask::causal(), 10, 10, {8, 64});
  cache.get(Mask::dense(), 10, 10, {8, 64});      // a is now the most recent
  cache.get(Mask::local(1, 1), 10, 10, {8, 64});  // evicts b
  EXPECT_EQ(cache.get(Mask::dense(), 10, 10, {8, 64}), a);
  EXPECT_NE(cache.get(Mask::causal(), 10, 10, {8, 64}), b);
  EXPECT_EQ(b->stats().kept_pairs, 55);  // still valid after its eviction
  cache.set_capacity(1);
  EXPECT_EQ(cache.stats().size, 1);
}

TEST(PlanCache, ConcurrentCallersShareOnePlan) {
  PlanCache cache;
  std::vector<std::shared_ptr<const TilePlan>> seen(4);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int r = 0; r < 20; ++r) seen[i] = cache.get(Mask::local(5, 5), 300, 300, {16, 64});
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& plan : seen) EXPECT_EQ(plan, seen[0]);
  EXPECT_EQ(cache.stats().size, 1);
}

}  // namespace
}  // namespace tilesplash
