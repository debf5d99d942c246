// What `tilesplash plan` shows for a temporal video mask. A temporal SPEC means
// the temporal mask on the original frame-major order, but it never runs in
// that order: Q/K/V are permuted to token-major, where it is the band that
// spatial heads share, and the sink runs as a separate key segment. So `plan`
// builds that band and says so, with the sink segment's counts alongside. A
// sliding-tile (sta) mask likewise runs, and is shown, in tile-major order; a
// radial mask adds the density of the paper's block vote.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "tilesplash/mask.h"
#include "tilesplash/plan.h"

namespace tilesplash::cli {

// The mask to plan: the token-major band for a temporal video mask, the
// tile-major mask for an sta mask (both need q_len == kv_len == their token
// count), else `mask` itself. Adds the
// fields that explain the substitution to `record` (scalars only).
Mask plan_mask_for(const Mask& mask, std::int64_t q_len, std::int64_t kv_len, BlockSizes blocks,
                   nlohmann::ordered_json& record);

}  // namespace tilesplash::cli
