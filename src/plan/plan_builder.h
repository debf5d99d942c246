// Builds a TilePlan: classifies the tiles inside each q-block's kv hull,
// bit-packs partial tiles and stores each distinct one once. Also the one
// transformation of a built plan, rounding it out to whole tiles.
#pragma once

#include <cstdint>

#include "tilesplash/plan.h"

namespace tilesplash {

class PlanBuilder {
 public:
  // Throws std::invalid_argument naming the offending argument.
  static TilePlan build(const Mask& mask, std::int64_t q_len, std::int64_t kv_len,
                        BlockSizes blocks);
  // round_out() (tile_granular.h): the plan with every partial tile full.
  static TilePlan round_out(const TilePlan& plan);
};

}  // namespace tilesplash
