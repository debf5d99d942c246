// The per-family candidate lists behind method_candidates(), each matched to
// a target density. Internal to src/video.
#pragma once

#include <vector>

#include "tilesplash/candidates.h"

namespace tilesplash::detail {

// One sliding-tile candidate per temporal window width (tiles of 6 x 8 x 8),
// each with the spatial window whose density is closest to options.density.
std::vector<MaskCandidate> sta_for_density(const VideoGeometry& geometry,
                                           const MethodOptions& options);

}  // namespace tilesplash::detail
