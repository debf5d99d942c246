// The public face of the registry: methods(), the candidate lists by name,
// and how any mask executes (mask_run), each by iterating the registry.
#include <stdexcept>
#include <string>
#include <vector>

#include "methods/registry.h"
#include "tilesplash/candidates.h"
#include "tilesplash/methods.h"
#include "tilesplash/plan.h"

namespace tilesplash {
namespace {

std::string join(const std::vector<std::string_view>& names) {
  std::string text;
  for (std::size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string(names[i]);
  }
  return text;
}

std::vector<std::string_view> names_where(bool (*keep)(const detail::MethodEntry&)) {
  std::vector<std::string_view> names;
  for (const detail::MethodEntry* method : detail::method_registry()) {
    if (keep(*method)) names.push_back(method->info.name);
  }
  return names;
}

const std::vector<std::string_view>& candidate_method_names() {
  static const std::vector<std::string_view> names =
      names_where([](const detail::MethodEntry& m) { return m.candidates != nullptr; });
  return names;
}

}  // namespace

std::span<const MethodInfo> methods() {
  static const std::vector<MethodInfo> infos = [] {
    std::vector<MethodInfo> result;
    for (const detail::MethodEntry* method : detail::method_registry()) {
      result.push_back(method->info);
    }
    return result;
  }();
  return infos;
}

std::string method_list_text() {
  return join(names_where([](const detail::MethodEntry&) { return true; }));
}

const MethodInfo& method_info(std::string_view name, std::string_view who) {
  for (const MethodInfo& method : methods()) {
    if (method.name == name) return method;
  }
  throw std::invalid_argument(std::string(who) + ": unknown method '" + std::string(name) +
                              "' (expected " + method_list_text() + ")");
}

MaskCandidate plain_candidate(std::string name, const Mask& mask, std::int64_t tokens) {
  const TilePlan plan = TilePlan::build(mask, tokens, tokens, {256, 256});
  return {std::move(name),      mask, MaskRun{RowOrder(), mask, std::nullopt},
          plan.stats().density, {},   0.0};
}

std::span<const std::string_view> method_names() { return candidate_method_names(); }

std::vector<MaskCandidate> method_candidates(std::string_view method, const VideoGeometry& geometry,
                                             const MethodOptions& options) {
  geometry.validate();
  if (!(options.density > 0.0 && options.density <= 1.0)) {
    throw std::invalid_argument("method_candidates: options.density must be in (0, 1], got " +
                                std::to_string(options.density));
  }
  const detail::MethodEntry* entry = detail::find_method(method);
  if (entry == nullptr) {
    throw std::invalid_argument("method_candidates: unknown method '" + std::string(method) +
                                "' (expected " + join(candidate_method_names()) + ")");
  }
  if (entry->candidates == nullptr) {
    throw std::invalid_argument("method_candidates: method '" + std::string(method) +
                                "' has no candidate list: its masks come from each head's data "
                                "(use method_attention_options in routing.h)");
  }
  return entry->candidates(geometry, options);
}

MaskRun mask_run(const Mask& mask, std::int64_t tokens) {
  mask.check_lengths(tokens, tokens);
  for (const detail::MethodEntry* method : detail::method_registry()) {
    if (method->run == nullptr) continue;
    if (std::optional<MaskRun> run = method->run(mask)) return std::move(*run);
  }
  return MaskRun{RowOrder(), mask, std::nullopt};
}

}  // namespace tilesplash
