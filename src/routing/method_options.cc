// Front-door options by method name, from the registry: a binding passes
// `method="radial"`, never builds masks itself.
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/registry.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"

namespace tilesplash {

std::span<const std::string_view> attention_method_names() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> result;
    for (const MethodInfo& method : methods()) result.push_back(method.name);
    return result;
  }();
  return names;
}

namespace {

const detail::MethodEntry& entry_of(std::string_view method, const std::string& who) {
  const detail::MethodEntry* entry = detail::find_method(method);
  if (entry == nullptr) {
    throw std::invalid_argument(who + ": unknown method '" + std::string(method) + "' (expected " +
                                method_list_text() + ")");
  }
  return *entry;
}

// "'svg'" or "'a' or 'b'": the methods whose heads share a band.
std::string band_methods() {
  std::string list;
  for (const MethodInfo& method : methods()) {
    if (!method.takes_band) continue;
    list += (list.empty() ? "'" : " or '") + std::string(method.name) + "'";
  }
  return list;
}

}  // namespace

VideoAttentionOptions method_attention_options(std::string_view method,
                                               const VideoGeometry& geometry,
                                               const MethodOptions& options,
                                               const std::optional<ErrorTarget>& target) {
  const detail::MethodEntry& entry = entry_of(method, "method_attention_options");
  if (options.band && !entry.info.takes_band) {
    throw std::invalid_argument("band: a band in tokens applies to method " + band_methods() +
                                " only, got method '" + std::string(method) +
                                "' (give density instead)");
  }
  geometry.validate();
  if (!options.band && !(options.density > 0.0 && options.density <= 1.0)) {
    throw std::invalid_argument("density: must be in (0, 1], got " +
                                std::to_string(options.density));
  }
  VideoAttentionOptions result;
  result.density = options.density;
  result.band = options.band;
  result.sink = options.sink;
  result.text_full = options.text_full;
  if (target) {
    check_error_target(target->error, "error");
    if (options.band) {
      throw std::invalid_argument(
          "band: with error the ladder's densities choose the bands; give no band");
    }
    result.error = target->error;
    result.candidates = ladder_candidates(
        method, geometry, options,
        target->densities ? std::span<const double>(*target->densities) : default_density_ladder());
    if (entry.pooled != nullptr)
      result.pooled = entry.pooled(geometry, options);  // p as the ladder
  } else if (entry.clusters != nullptr) {
    result.clusters = entry.clusters(geometry, options);
  } else if (entry.pooled != nullptr) {
    result.pooled = entry.pooled(geometry, options);
  } else {
    result.candidates = entry.candidates(geometry, options);
  }
  return result;
}

}  // namespace tilesplash
