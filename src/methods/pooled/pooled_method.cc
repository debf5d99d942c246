// "pooled": key tiles chosen per query tile by pooled scores (pooled.h;
// SpargeAttn, XAttention, SCOPE's floor). No candidate list: every head past
// the warm-up ranks the key tiles of each of its query tiles by its own
// pooled Q and K and keeps them to the density, planned per head and step
// directly from the kept tiles, cut in frame-major or token-major order
// (pooled.h: PooledOrder).
#include <algorithm>
#include <array>

#include "methods/registry.h"

namespace tilesplash::detail {
namespace {

std::optional<PooledOptions> pooled(const VideoGeometry&, const MethodOptions& options) {
  return pooled_options_of(options);
}

}  // namespace

PooledOptions pooled_options_of(const MethodOptions& options) {
  PooledOptions result;
  // p replaces the density, as a band replaces it for the band methods.
  if (options.p) {
    result.p = *options.p;
  } else {
    result.density = options.density;
  }
  if (options.floor) result.floor = *options.floor;
  if (options.gate) result.gate = *options.gate;
  if (options.order) result.order = *options.order;
  result.sink = options.sink;
  result.text_full = options.text_full;
  check_pooled_options(result);  // names p, floor or gate
  return result;
}

const MethodEntry& pooled_method() {
  static constexpr std::array<std::string_view, 1> kNames = {"pooled"};
  static const MethodEntry entry{
      .info = {.name = "pooled",
               .summary = "Pooled scores (SpargeAttn, XAttention): per query tile, key tiles by "
                          "falling pooled mass to the density, with a floor; diagonal, sink, text "
                          "and non-self-similar key tiles kept",
               .row_order = "per head, frame-major or token-major, whichever selection is "
                            "cheaper",
               .spec = false,
               .candidates = false,
               .mask_names = kNames,
               .data_driven = true,
               .choice = "pooled"},
      .pooled = pooled,
  };
  return entry;
}

}  // namespace tilesplash::detail
