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

// "'a' or 'b'": the methods whose entry has `flag`.
std::string methods_with(bool detail::MethodEntry::*flag) {
  std::vector<std::string_view> names;
  for (const detail::MethodEntry* entry : detail::method_registry()) {
    if (entry->*flag) names.push_back(entry->info.name);
  }
  std::string list;
  for (std::size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "'" : i + 1 == names.size() ? " or '" : ", '") + std::string(names[i]) + "'";
  }
  return list;
}

// "'pooled', or 'mix' with it among its families".
std::string pooled_methods() {
  std::string list;
  for (const detail::MethodEntry* entry : detail::method_registry()) {
    if (entry->pooled == nullptr || entry->routes_families) continue;
    list += (list.empty() ? "'" : " or '") + std::string(entry->info.name) + "'";
  }
  return list + ", or " + methods_with(&detail::MethodEntry::routes_families) +
         " with it among its families";
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
  if (!options.families.empty() && !entry.routes_families) {
    throw std::invalid_argument("families: applies to method " +
                                methods_with(&detail::MethodEntry::routes_families) +
                                " only, got method '" + std::string(method) + "'");
  }
  // The heads' own pooled tiles, beside or instead of candidates.
  std::optional<PooledOptions> pooled;
  if (entry.pooled != nullptr) pooled = entry.pooled(geometry, options);
  if (!pooled && (options.p || options.floor || options.gate || options.order)) {
    throw std::invalid_argument(std::string(options.p       ? "p"
                                            : options.floor ? "floor"
                                            : options.gate  ? "gate"
                                                            : "order") +
                                ": applies to heads that rank their own pooled key tiles (method " +
                                pooled_methods() + "), got method '" + std::string(method) + "'");
  }
  VideoAttentionOptions result;
  result.density = options.density;
  result.band = options.band;
  result.sink = options.sink;
  result.text_full = options.text_full;
  result.pooled = pooled;
  if (target) {
    check_error_target(target->error, "error");
    if (options.band) {
      throw std::invalid_argument(
          "band: with error the ladder's densities choose the bands; give no band");
    }
    if (options.p) {
      throw std::invalid_argument(
          "p: with error the ladder of p (pooled_p_ladder()) chooses it; give no p");
    }
    result.error = target->error;
    result.candidates = ladder_candidates(
        method, geometry, options,
        target->densities ? std::span<const double>(*target->densities) : default_density_ladder());
  } else if (entry.clusters != nullptr) {
    result.clusters = entry.clusters(geometry, options);
  } else if (entry.candidates != nullptr) {
    result.candidates = entry.candidates(geometry, options);
  }
  return result;
}

}  // namespace tilesplash
