// The clustering of one head on a caller's thread pool, so the video front
// door reuses its own workers. Internal; cluster_head() is the public door.
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "runtime/thread_pool.h"
#include "tilesplash/clusters.h"

namespace tilesplash::detail {

// The order of the query and key clusters in the run: a nearest-neighbour
// chain of the query centroids, refined by barycentre sweeps over the kept
// pairs so that they gather into blocks (SVG2 only asks that each cluster
// be contiguous; the order of the clusters is free).
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> cluster_sequences(
    const HeadClusters& clusters, std::span<const std::uint8_t> kept);

// Throws std::invalid_argument("clusters: ...") naming a bad option.
void check_cluster_options(const ClusterOptions& options);

HeadClusters cluster_head_on(runtime::ThreadPool& pool, int threads, const VideoGeometry& geometry,
                             const TensorView& q, const TensorView& k, std::int64_t head,
                             const ClusterOptions& options, const HeadClusters* warm);

}  // namespace tilesplash::detail
