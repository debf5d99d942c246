// The SIMD targets as a test parameter. A test instantiated over
// compiled_targets() runs once per target of kernel/targets.def that this
// build compiles, each under its own name, and where the CPU lacks a target
// it shows as skipped, naming the missing CPU features, instead of vanishing.
//
//   class KMeansPerTarget : public test::TargetTest {};
//   TEST_P(KMeansPerTarget, MatchesThePlainReference) { ... GetParam() is the target ... }
//   TILESPLASH_INSTANTIATE_FOR_TARGETS(KMeansPerTarget);
//
// Tests that already take a case parameter derive from TargetCaseTest<Case>
// and instantiate with TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(prefix, Suite,
// cases): each case on every target, the targets of one case consecutively,
// named "<case name>_<target>".
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace tilesplash::test {

// The targets of kernel/targets.def compiled into this build, best first, then
// the test binary's emulated twins (kernel::test_targets(): amx_emulated, the
// amx target's code with its tile instructions modelled in software).
std::vector<std::string> compiled_targets();

// Whether `target` is one of the test binary's emulated twins, which other
// processes (the CLI, Python) do not have.
bool is_test_target(const std::string& target);

// Forces `target` (set_isa); when this CPU lacks it, marks the current test
// skipped with the features it lacks. Called from SetUp(), where a skip stops
// the test before its body.
void use_target_or_skip(const std::string& target);

// Back to the automatic choice (TearDown()).
void reset_target();

class TargetTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { use_target_or_skip(GetParam()); }
  void TearDown() override { reset_target(); }
};

template <typename Case>
class TargetCaseTest : public ::testing::TestWithParam<std::tuple<Case, std::string>> {
 protected:
  const Case& test_case() const { return std::get<0>(this->GetParam()); }
  const std::string& target() const { return std::get<1>(this->GetParam()); }
  void SetUp() override { use_target_or_skip(target()); }
  void TearDown() override { reset_target(); }
};

}  // namespace tilesplash::test

#define TILESPLASH_INSTANTIATE_FOR_TARGETS(suite)                                       \
  INSTANTIATE_TEST_SUITE_P(Targets, suite,                                              \
                           ::testing::ValuesIn(::tilesplash::test::compiled_targets()), \
                           [](const auto& info) { return info.param; })

#define TILESPLASH_INSTANTIATE_CASES_FOR_TARGETS(prefix, suite, cases)                        \
  INSTANTIATE_TEST_SUITE_P(                                                                   \
      prefix, suite,                                                                          \
      ::testing::Combine(cases, ::testing::ValuesIn(::tilesplash::test::compiled_targets())), \
      [](const auto& info) {                                                                  \
        return std::get<0>(info.param).name + "_" + std::get<1>(info.param);                  \
      })
