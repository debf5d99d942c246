// "svg2": Sparse VideoGen 2's semantic clusters (clusters.h). No candidate
// list: every head past the warm-up runs its own k-means clusters of Q and
// K and the cluster pairs that meet the density, planned per head and step.
#include <algorithm>
#include <array>

#include "methods/registry.h"

namespace tilesplash::detail {
namespace {

ClusterOptions clusters(const VideoGeometry& geometry, const MethodOptions& options) {
  ClusterOptions result = default_cluster_options(geometry);
  result.density = options.density;
  // The floor of key clusters per query cluster (a fraction of the keys
  // when clusters are even) must leave the density room to choose.
  result.min_kc_ratio = std::min(result.min_kc_ratio, options.density / 2.0);
  return result;
}

}  // namespace

const MethodEntry& svg2_method() {
  static constexpr std::array<std::string_view, 1> kNames = {"svg2"};
  static const MethodEntry entry{
      .info = {.name = "svg2",
               .summary = "Sparse VideoGen 2: each head's own k-means clusters of Q and K, "
                          "warm-started across steps, and the cluster pairs that meet the density",
               .row_order = "queries by query cluster, keys and values by key cluster",
               .spec = false,
               .candidates = false,
               .mask_names = kNames,
               .data_driven = true,
               .choice = "svg2"},
      .clusters = clusters,
  };
  return entry;
}

}  // namespace tilesplash::detail
