// "mix": the router chooses per head among the candidates of every method
// that is one mask family (has a SPEC term): spatial and temporal on their
// own bands, radial and the sta windows today. A family registered later
// joins the mix by being registered.
#include "methods/registry.h"

namespace tilesplash::detail {
namespace {

std::vector<MaskCandidate> candidates(const VideoGeometry& geometry, const MethodOptions& options) {
  std::vector<MaskCandidate> list;
  for (const MethodEntry* method : method_registry()) {
    if (!method->info.spec || method->candidates == nullptr) continue;
    for (MaskCandidate& candidate : method->candidates(geometry, options)) {
      list.push_back(std::move(candidate));
    }
  }
  return list;
}

}  // namespace

const MethodEntry& mix_method() {
  static const MethodEntry entry{
      .info = {.name = "mix",
               .summary = "Every mask family at once: each head routed among the spatial, "
                          "temporal, radial and sta candidates",
               .row_order = "the chosen candidate's",
               .spec = false,
               .candidates = true},
      .candidates = candidates,
  };
  return entry;
}

}  // namespace tilesplash::detail
