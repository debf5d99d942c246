// head_fields(): the per-head report as the named values every front end
// renders (routing.h).
#include "tilesplash/routing.h"

namespace tilesplash {

Fields head_fields(const HeadReport& head, std::span<const MaskCandidate> candidates) {
  NamedNumbers mse;
  for (std::size_t c = 0; c < head.mse.size() && c < candidates.size(); ++c) {
    mse.emplace_back(candidates[c].name, head.mse[c]);
  }
  return {
      {"head", head.head},
      {"choice", head.choice.name()},
      {"family", head.family},
      {"rung", head.rung},
      {"order", head.order},
      {"routed", head.routed},
      {"mse", std::move(mse)},
      {"mse_spatial", head.mse_spatial},
      {"mse_temporal", head.mse_temporal},
      {"error", head.error},
      {"target_met", head.target_met},
      {"density", head.density},
      {"tiles_visited", head.tiles_visited},
      {"seconds", head.seconds},
      {"permute_seconds", head.permute_seconds},
      {"cluster_seconds", head.cluster_seconds},
      {"plan_seconds", head.plan_seconds},
      {"compensated", head.compensated},
      {"compensation_seconds", head.compensation_seconds},
  };
}

}  // namespace tilesplash
