// Methods by name: the one table a binding needs to turn
// `method="radial"` into front-door options.
#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>

#include "tilesplash/routing.h"

namespace tilesplash {
namespace {

constexpr std::array<std::string_view, 7> kAttentionMethods = {
    "svg", "spatial", "temporal", "radial", "sta", "mix", "svg2"};

}  // namespace

std::span<const std::string_view> attention_method_names() { return kAttentionMethods; }

VideoAttentionOptions method_attention_options(std::string_view method,
                                               const VideoGeometry& geometry,
                                               const MethodOptions& options) {
  VideoAttentionOptions result;
  result.density = options.density;
  result.sink = options.sink;
  result.text_full = options.text_full;
  if (method == "svg2") {
    if (!(options.density > 0.0 && options.density <= 1.0)) {
      throw std::invalid_argument(
          "method_attention_options: options.density must be in (0, 1], got " +
          std::to_string(options.density));
    }
    ClusterOptions clusters = default_cluster_options(geometry);
    clusters.density = options.density;
    // The floor of key clusters per query cluster (a fraction of the keys
    // when clusters are even) must leave the density room to choose.
    clusters.min_kc_ratio = std::min(clusters.min_kc_ratio, options.density / 2.0);
    result.clusters = clusters;
    return result;
  }
  for (const std::string_view name : method_names()) {
    if (name == method) {
      result.candidates = method_candidates(method, geometry, options);
      return result;
    }
  }
  std::string names;
  for (std::size_t i = 0; i < kAttentionMethods.size(); ++i) {
    names += (i == 0                              ? ""
              : i + 1 == kAttentionMethods.size() ? " or "
                                                  : ", ") +
             std::string(kAttentionMethods[i]);
  }
  throw std::invalid_argument("method_attention_options: unknown method '" + std::string(method) +
                              "' (expected " + names + ")");
}

}  // namespace tilesplash
