// The one list of SIMD targets (src/kernel/targets.def, read through
// kernel/target_list.h as dispatch reads it) against what the library exposes:
// every target of this build's architecture is selectable where the CPU has
// it, in the list's order, with its own peak loops; a target the CPU lacks is
// refused naming the features it lacks, an unknown name naming the known ones.
#include "kernel/isa_dispatch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernel/target_list.h"
#include "support/targets.h"
#include "tilesplash/attention.h"
#include "tilesplash/peak.h"

namespace tilesplash::test {
namespace {

// The build compiles the arch column of the compiler's architecture, and the
// portable target, last in the list, everywhere.
TEST(IsaDispatch, TheBuildsArchAndThePortableTargetLast) {
#if defined(__x86_64__) || defined(__i386__)
  EXPECT_TRUE(kernel::kArch_x86 && !kernel::kArch_aarch64);
#elif defined(__aarch64__)
  EXPECT_TRUE(kernel::kArch_aarch64 && !kernel::kArch_x86);
#else
  EXPECT_FALSE(kernel::kArch_x86 || kernel::kArch_aarch64);
#endif
  ASSERT_GT(std::size(kernel::kListedTargets), 0u);
  const kernel::ListedTarget& last = kernel::kListedTargets[std::size(kernel::kListedTargets) - 1];
  EXPECT_STREQ(last.arch, "any");
  EXPECT_TRUE(last.compiled);
  EXPECT_STREQ(last.features, "");
  for (const kernel::ListedTarget& target : kernel::kListedTargets) {
    SCOPED_TRACE(target.name);
    // Evaluates every feature name of the build's arch: one dispatch does not
    // know is a mistake in targets.def and throws.
    if (target.compiled) {
      EXPECT_NO_THROW(kernel::missing_cpu_features(target.features));
    }
  }
}

TEST(IsaDispatch, AvailableTargetsFollowTheListInItsOrder) {
  std::vector<std::string> compiled;  // the listed ones: test targets are never available
  for (const kernel::ListedTarget& target : kernel::kListedTargets) {
    if (target.compiled) compiled.emplace_back(target.name);
  }
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

// Every compiled target the CPU has is available, can be forced and has its
// own peak loops.
class IsaDispatchPerTarget : public TargetTest {};

TEST_P(IsaDispatchPerTarget, CanBeForcedAndMeasured) {
  EXPECT_EQ(active_isa(), GetParam());
  const std::vector<std::string> available = available_isas();
  // An emulated twin can be forced but is never offered as available.
  EXPECT_NE(std::find(available.begin(), available.end(), GetParam()) == available.end(),
            !is_test_target(GetParam()));
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    const PeakMeasurement peak = measure_peak(dtype, 1, 0.02);
    EXPECT_TRUE(std::isfinite(peak.gflops) && peak.gflops > 0.0);
    EXPECT_TRUE(std::isfinite(peak.cpu_gflops) && peak.cpu_gflops > 0.0);
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(IsaDispatchPerTarget);

TEST(IsaDispatch, ATargetTheCpuLacksIsRefusedNamingTheMissingFeatures) {
  int refused = 0;
  for (const kernel::ListedTarget& target : kernel::kListedTargets) {
    if (!target.compiled) continue;
    const std::vector<std::string> missing = kernel::missing_cpu_features(target.features);
    if (missing.empty()) continue;
    try {
      set_isa(target.name);
      ADD_FAILURE() << "set_isa accepted " << target.name;
    } catch (const std::invalid_argument& e) {
      ++refused;
      const std::string message = e.what();
      for (const std::string& feature : missing) {
        EXPECT_NE(message.find(feature), std::string::npos) << message;
      }
    }
  }
  set_isa("");
  if (refused == 0) GTEST_SKIP() << "this CPU has every target this build compiles";
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
