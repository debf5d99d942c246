// "mix": the router chooses per head among the candidates of every method
// that is one mask family (has a SPEC term): spatial and temporal on their
// own bands, radial and the sta windows today. A family registered later
// joins the mix by being registered. MethodOptions::families narrows the
// mix to the methods it names and may add a method whose heads rank their
// own pooled key tiles: each head is then scored on its own selection too
// (VideoAttentionOptions::pooled beside the candidates), and opt-in, since
// its cost is a selection per head per call and the flex backend cannot
// run it.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "methods/registry.h"

namespace tilesplash::detail {
namespace {

bool is_mask_family(const MethodEntry& method) {
  return method.info.spec && method.candidates != nullptr;
}

bool ranks_pooled(const MethodEntry& method) {
  return method.info.data_driven && method.pooled != nullptr;
}

// "'spatial', 'temporal', ... or 'pooled'": what families may name.
std::string joinable() {
  std::string list;
  std::vector<std::string_view> names;
  for (const MethodEntry* method : method_registry()) {
    if (is_mask_family(*method) || ranks_pooled(*method)) names.push_back(method->info.name);
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    list += (i == 0 ? "'" : i + 1 == names.size() ? " or '" : ", '") + std::string(names[i]) + "'";
  }
  return list;
}

// Throws naming MethodOptions::families unless each of its names is a
// registered mask family or pooled-ranking method, named once.
void check_families(const MethodOptions& options) {
  for (std::size_t i = 0; i < options.families.size(); ++i) {
    const std::string& name = options.families[i];
    const MethodEntry* method = find_method(name);
    if (method == nullptr || !(is_mask_family(*method) || ranks_pooled(*method))) {
      throw std::invalid_argument("families[" + std::to_string(i) + "]: expected " + joinable() +
                                  ", got '" + name + "'");
    }
    if (std::find(options.families.begin(), options.families.begin() + i, name) !=
        options.families.begin() + i) {
      throw std::invalid_argument("families: '" + name + "' is named twice");
    }
  }
}

bool joins(const MethodEntry& method, const MethodOptions& options) {
  if (options.families.empty()) return is_mask_family(method);
  return std::find(options.families.begin(), options.families.end(), method.info.name) !=
         options.families.end();
}

std::vector<MaskCandidate> candidates(const VideoGeometry& geometry, const MethodOptions& options) {
  check_families(options);
  std::vector<MaskCandidate> list;
  for (const MethodEntry* method : method_registry()) {
    if (!is_mask_family(*method) || !joins(*method, options)) continue;
    for (MaskCandidate& candidate : method->candidates(geometry, options)) {
      list.push_back(std::move(candidate));
    }
  }
  return list;
}

std::optional<PooledOptions> pooled(const VideoGeometry& geometry, const MethodOptions& options) {
  check_families(options);
  for (const MethodEntry* method : method_registry()) {
    if (ranks_pooled(*method) && joins(*method, options)) return method->pooled(geometry, options);
  }
  return std::nullopt;
}

}  // namespace

const MethodEntry& mix_method() {
  static const MethodEntry entry{
      .info = {.name = "mix",
               .summary = "Every mask family at once: each head routed among the spatial, "
                          "temporal, radial and sta candidates (families= narrows them or "
                          "adds each head's own pooled tiles)",
               .row_order = "the chosen candidate's",
               .spec = false,
               .candidates = true},
      .candidates = candidates,
      .pooled = pooled,
      .routes_families = true,
  };
  return entry;
}

}  // namespace tilesplash::detail
