// parse_mask_spec(): the SPEC grammar (masks/spec_parser.h) with the core
// families of mask.h and, after them, the SPEC term of every registered
// method that has one.
#include <vector>

#include "masks/spec_parser.h"
#include "methods/registry.h"
#include "tilesplash/mask_spec.h"

namespace tilesplash {
namespace {

const std::vector<detail::SpecFamily>& spec_families() {
  static const std::vector<detail::SpecFamily> families = [] {
    const std::span<const detail::SpecFamily> core = detail::core_spec_families();
    std::vector<detail::SpecFamily> result(core.begin(), core.end());
    for (const detail::MethodEntry* method : detail::method_registry()) {
      if (method->parse != nullptr) result.push_back({method->info.name, method->parse});
    }
    return result;
  }();
  return families;
}

}  // namespace

Mask parse_mask_spec(std::string_view spec) { return detail::parse_spec(spec, spec_families()); }

std::vector<std::string_view> mask_spec_names() {
  std::vector<std::string_view> names;
  for (const detail::SpecFamily& family : spec_families()) names.push_back(family.name);
  return names;
}

}  // namespace tilesplash
