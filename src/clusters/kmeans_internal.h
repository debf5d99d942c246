// k-means on a caller's threading context, so the video front door runs it on
// its own. Internal; kmeans() in clusters.h is the public door.
#pragma once

#include <cstdint>
#include <span>

#include "tilesplash/clusters.h"
#include "tilesplash/threading.h"

namespace tilesplash::detail {

KMeansResult run_kmeans(ThreadingContext& context, int threads, std::span<const float> points,
                        std::int64_t dim, const KMeansOptions& options,
                        std::span<const float> warm);

}  // namespace tilesplash::detail
