// The worked example of docs/extending.md, "Adding a mask method": a method
// whose heads all run one symmetric window |q - k| <= W over the frame-major
// tokens, W chosen to meet the density. It is compiled into the test binary
// and checked by tests/extending_examples_test.cc, not registered: the
// demo-method branch registers it by moving it to src/methods/window/ and
// adding one line to src/methods/registry.cc.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

#include "methods/registry.h"

namespace tilesplash::detail {
namespace {

std::vector<MaskCandidate> candidates(const VideoGeometry& geometry, const MethodOptions& options) {
  const std::int64_t n = geometry.tokens();
  // |q - k| <= W keeps about (2 W + 1) / n of the map.
  const std::int64_t w = std::max<std::int64_t>(0, std::llround((options.density * n - 1.0) / 2));
  return {plain_candidate("window", Mask::local(w, w), n)};
}

}  // namespace

const MethodEntry& window_method() {
  static constexpr std::array<std::string_view, 1> kNames = {"window"};
  static const MethodEntry entry{
      .info = {.name = "window",
               .summary = "One symmetric window |q - k| <= W over frame-major tokens, W meeting "
                          "the density",
               .row_order = "frame-major",
               .candidates = true,
               .mask_names = kNames},
      .candidates = candidates,
  };
  return entry;
}

}  // namespace tilesplash::detail
