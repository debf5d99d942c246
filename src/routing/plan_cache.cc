// A linear list is enough: a front door holds at most four plans.
#include "routing/plan_cache.h"

namespace tilesplash::detail {

const TilePlan& PlanCache::get(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                               BlockSizes blocks, double* build_seconds) {
  for (const Entry& entry : entries_) {
    if (entry.q_len == q_len && entry.kv_len == kv_len && entry.blocks == blocks &&
        entry.mask == mask) {
      return *entry.plan;
    }
  }
  auto plan = std::make_unique<TilePlan>(TilePlan::build(mask, q_len, kv_len, blocks));
  if (build_seconds != nullptr) *build_seconds += plan->stats().build_seconds;
  entries_.push_back({mask, q_len, kv_len, blocks, std::move(plan)});
  return *entries_.back().plan;
}

}  // namespace tilesplash::detail
