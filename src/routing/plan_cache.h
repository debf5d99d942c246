// The front door's plans: a view of the public PlanCache (plan_cache.h) that
// keeps every plan for the life of the front door, so the references it hands
// out stay valid. The band plan is shared by every spatial and temporal head
// of every layer and step.
#pragma once

#include <cstdint>

#include "tilesplash/plan.h"
#include "tilesplash/plan_cache.h"

namespace tilesplash::detail {

class PlanCache {
 public:
  // The cached plan, or a new one; the build time is added to *build_seconds.
  const TilePlan& get(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks,
                      double* build_seconds) {
    return *plans_.get(mask, q_len, kv_len, blocks, build_seconds);
  }

 private:
  tilesplash::PlanCache plans_{0};  // unbounded: never evicts, so references stay valid
};

}  // namespace tilesplash::detail
