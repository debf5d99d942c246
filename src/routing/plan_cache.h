// Plans keyed by (mask, lengths, block sizes), built on first use and kept for
// the life of the front door: the band plan is shared by every spatial and
// temporal head of every layer and step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "tilesplash/plan.h"

namespace tilesplash::detail {

class PlanCache {
 public:
  // The cached plan, or a new one; the build time is added to *build_seconds.
  const TilePlan& get(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks,
                      double* build_seconds);

 private:
  struct Entry {
    Mask mask;
    std::int64_t q_len;
    std::int64_t kv_len;
    BlockSizes blocks;
    std::unique_ptr<TilePlan> plan;
  };
  std::vector<Entry> entries_;  // a handful: dense, band, sink segments
};

}  // namespace tilesplash::detail
