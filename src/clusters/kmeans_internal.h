// k-means on a caller's thread pool, so the video front door reuses its own
// workers. Internal; kmeans() in clusters.h is the public door.
#pragma once

#include <cstdint>
#include <span>

#include "runtime/thread_pool.h"
#include "tilesplash/clusters.h"

namespace tilesplash::detail {

KMeansResult run_kmeans(runtime::ThreadPool& pool, int threads, std::span<const float> points,
                        std::int64_t dim, const KMeansOptions& options,
                        std::span<const float> warm);

}  // namespace tilesplash::detail
