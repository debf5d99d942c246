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
  return names;
}

void use_target_or_skip(const std::string& target) {
  for (const kernel::ListedTarget& listed : kernel::kListedTargets) {
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
  FAIL() << "target " << target << " is not in kernel/targets.def";
}

void reset_target() { set_isa(""); }

}  // namespace tilesplash::test
