// The one list of SIMD targets (src/kernel/targets.def) against what the
// library exposes: every target of this build's architecture is selectable
// where the CPU has it, in the list's order, with its own peak loops; unknown
// names are refused naming the known ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/attention_check.h"
#include "tilesplash/attention.h"
#include "tilesplash/peak.h"

namespace tilesplash::test {
namespace {

// The targets.def entries compiled into this build, best first (CMake defines
// TILESPLASH_ARCH_X86 for the tests as for the library).
std::vector<std::string> compiled_targets() {
  constexpr bool kArch_any = true;
  constexpr bool kArch_x86 = TILESPLASH_ARCH_X86 != 0;
  std::vector<std::string> names;
#define TILESPLASH_TARGET(name, arch, features, flags) \
  if constexpr (kArch_##arch) names.emplace_back(#name);
#include "kernel/targets.def"
#undef TILESPLASH_TARGET
  return names;
}

TEST(IsaDispatch, AvailableTargetsFollowTheListInItsOrder) {
  const std::vector<std::string> compiled = compiled_targets();
  ASSERT_FALSE(compiled.empty());
  // Evaluates every target's CPU features: a feature name dispatch does not
  // know is a mistake in targets.def and throws.
  std::vector<std::string> available;
  ASSERT_NO_THROW(available = available_isas());
  ASSERT_FALSE(available.empty());
  // The portable target runs everywhere and is the last resort.
  EXPECT_EQ(available.back(), compiled.back());
  auto position = compiled.begin();
  for (const std::string& name : available) {
    const auto found = std::find(position, compiled.end(), name);
    ASSERT_NE(found, compiled.end()) << name << " is available but not listed (in this order)";
    position = found + 1;
  }
  // Automatic selection takes the best target the CPU has.
  set_isa("");
  EXPECT_EQ(active_isa(), available.front());
}

TEST(IsaDispatch, EveryRunnableTargetCanBeForcedAndMeasured) {
  for (const std::string& isa : runnable_isas()) {
    SCOPED_TRACE(isa);
    ScopedIsa scoped(isa);
    EXPECT_EQ(active_isa(), isa);
    for (const DType dtype : {DType::kF32, DType::kBF16}) {
      const PeakMeasurement peak = measure_peak(dtype, 1, 0.02);
      EXPECT_TRUE(std::isfinite(peak.gflops) && peak.gflops > 0.0);
      EXPECT_TRUE(std::isfinite(peak.cpu_gflops) && peak.cpu_gflops > 0.0);
    }
  }
}

TEST(IsaDispatch, UnknownTargetIsRefusedNamingTheKnownOnes) {
  try {
    set_isa("sse9000");
    FAIL() << "set_isa accepted an unknown target";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("sse9000"), std::string::npos) << message;
    for (const std::string& name : compiled_targets()) {
      EXPECT_NE(message.find(name), std::string::npos) << message;
    }
  }
  set_isa("");
}

TEST(Peak, RefusesANonPositiveOrNonFiniteDuration) {
  EXPECT_THROW(measure_peak(DType::kF32, 1, 0.0), std::invalid_argument);
  EXPECT_THROW(measure_peak(DType::kF32, 1, -1.0), std::invalid_argument);
  EXPECT_THROW(measure_peak_gflops(DType::kF32, 1, std::nan("")), std::invalid_argument);
}

}  // namespace
}  // namespace tilesplash::test
