#include "support/targets.h"

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
    set_isa(target);
    return;
  }
  FAIL() << "target " << target << " is not in kernel/targets.def nor a test target";
}

void reset_target() { set_isa(""); }

}  // namespace tilesplash::test
