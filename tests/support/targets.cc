#include "support/targets.h"

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "kernel/isa_dispatch.h"
#include "kernel/target_list.h"
#include "tilesplash/attention.h"

namespace tilesplash::test {

std::vector<std::string> compiled_targets() {
  std::vector<std::string> names;
  for (const kernel::ListedTarget& target : kernel::kListedTargets) {
    if (target.compiled) names.emplace_back(target.name);
  }
  // The test binary's emulated twins (tests/emulation/), after the listed targets.
  for (const kernel::TestTarget& target : kernel::test_targets()) names.emplace_back(target.name);
  return names;
}

bool is_test_target(const std::string& target) {
  for (const kernel::TestTarget& twin : kernel::test_targets()) {
    if (target == twin.name) return true;
  }
  return false;
}

namespace {

// The target dispatch picks on this CPU: the first of targets.def's list
// (best first) that is compiled and whose features the CPU has.
std::string best_runnable_target() {
  for (const kernel::ListedTarget& listed : kernel::kListedTargets) {
    if (listed.compiled && kernel::missing_cpu_features(listed.features).empty())
      return listed.name;
  }
  return "";
}

// TILESPLASH_TEST_TARGETS, a comma-separated list of target names ("best" is
// the one dispatch picks here), narrows the per-target tests to those
// targets. CI's sanitizer stage sets it: the README's tests already ran every
// target, and under ASan each repeat costs minutes and finds nothing the
// widest, the AVX2 and the portable paths do not. Unset: every target.
bool selected_by_environment(const std::string& target, std::string& why_not) {
  const char* list = std::getenv("TILESPLASH_TEST_TARGETS");
  if (list == nullptr || *list == '\0') return true;
  std::stringstream names(list);
  for (std::string name; std::getline(names, name, ',');) {
    if (name == target || (name == "best" && target == best_runnable_target())) return true;
  }
  why_not = std::string("TILESPLASH_TEST_TARGETS=") + list + " leaves target " + target + " out";
  return false;
}

}  // namespace

void use_target_or_skip(const std::string& target) {
  std::vector<kernel::TestTarget> known;
  for (const kernel::ListedTarget& listed : kernel::kListedTargets) {
    known.push_back({listed.name, listed.name, listed.features});
  }
  for (const kernel::TestTarget& twin : kernel::test_targets()) known.push_back(twin);
  for (const kernel::TestTarget& listed : known) {
    if (target != listed.name) continue;
    const std::vector<std::string> missing = kernel::missing_cpu_features(listed.features);
    if (!missing.empty()) {
      std::string names;
      for (const std::string& feature : missing) names += " " + feature;
      GTEST_SKIP() << "this CPU lacks what target " << target << " needs:" << names;
    }
    if (std::string why_not; !selected_by_environment(target, why_not)) GTEST_SKIP() << why_not;
    set_isa(target);
    return;
  }
  FAIL() << "target " << target << " is not in kernel/targets.def nor a test target";
}

void reset_target() { set_isa(""); }

}  // namespace tilesplash::test
