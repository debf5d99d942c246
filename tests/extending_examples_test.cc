// The worked examples of docs/extending.md, compiled and checked here so the
// page cannot drift from code that works: the example method
// (tests/examples/window_method.cc) against its definition, and the
// registry's flags that code asks instead of a method's name.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "family_check.h"
#include "methods/registry.h"
#include "tilesplash/candidates.h"
#include "tilesplash/methods.h"
#include "tilesplash/routing.h"
#include "tilesplash/video.h"

namespace tilesplash {
namespace detail {
const MethodEntry& window_method();  // tests/examples/window_method.cc
}  // namespace detail
namespace {

TEST(ExtendingExamples, TheWindowMethodRunsItsDefinition) {
  const detail::MethodEntry& entry = detail::window_method();
  const std::vector<VideoGeometry> geometries = {{7, 9, 3, 0, TextPlacement::kNone},
                                                 {8, 9, 2, 5, TextPlacement::kBefore}};
  for (const VideoGeometry& g : geometries) {
    for (const double density : {0.05, 0.3, 0.7}) {
      const std::string what = g.to_string() + " density " + std::to_string(density);
      const std::int64_t n = g.tokens();
      const std::vector<MaskCandidate> list = entry.candidates(g, {density});
      ASSERT_EQ(list.size(), 1u) << what;
      const MaskCandidate& c = list.front();
      EXPECT_EQ(c.name, "window") << what;
      // The definition: |q - k| <= W with (2 W + 1) / n the density, rounded.
      const std::int64_t w = std::llround((density * static_cast<double>(n) - 1.0) / 2.0);
      // A mask is a predicate on any pair; the plans clip it to [0, n).
      const auto keeps = [&](std::int64_t q, std::int64_t k) { return std::llabs(q - k) <= w; };
      test::audit_mask(c.mask, n, keeps, what);
      std::int64_t kept = 0;
      for (std::int64_t q = 0; q < n; ++q) {
        for (std::int64_t k = 0; k < n; ++k) kept += keeps(q, k) ? 1 : 0;
      }
      EXPECT_DOUBLE_EQ(c.density, static_cast<double>(kept) / static_cast<double>(n * n)) << what;
      EXPECT_EQ(c.run.order.name(), "original") << what;  // frame-major, as it is
      EXPECT_EQ(c.run.mask, c.mask) << what;
    }
  }
}

// Code outside the registry asks these flags, never a method's name: exactly
// one method takes a band (svg); two are data-driven (svg2's clusters and
// pooled's own tiles), each naming its heads' choice after itself.
TEST(MethodFlags, TheRegistryCarriesWhatCodeUsedToAskByName) {
  int band = 0, data_driven = 0;
  for (const MethodInfo& method : methods()) {
    band += method.takes_band ? 1 : 0;
    if (method.takes_band) {
      EXPECT_EQ(method.name, "svg");
    }
    if (method.data_driven) {
      ++data_driven;
      EXPECT_EQ(method.choice, method.name);
      EXPECT_FALSE(method.candidates) << "a data-driven method has no candidate list";
    } else {
      EXPECT_TRUE(method.choice.empty()) << method.name;
      EXPECT_TRUE(method.candidates) << method.name;
    }
  }
  EXPECT_EQ(band, 1);
  EXPECT_EQ(data_driven, 2);
  EXPECT_EQ(cluster_choice(), "svg2");
}

// A band in tokens is refused for a method without the flag, by the flag.
TEST(MethodFlags, ABandAppliesToTheMethodThatTakesOne) {
  const VideoGeometry g{4, 4, 4, 0, TextPlacement::kNone};
  for (const MethodInfo& method : methods()) {
    MethodOptions options;
    options.band = 8;
    if (method.takes_band) {
      EXPECT_NO_THROW(method_attention_options(method.name, g, options)) << method.name;
    } else {
      EXPECT_THROW(method_attention_options(method.name, g, options), std::invalid_argument)
          << method.name;
    }
  }
}

}  // namespace
}  // namespace tilesplash
