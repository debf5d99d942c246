// The run-time choice among the compiled SIMD targets of kernel/targets.def,
// made once per process from the CPU's features (or TILESPLASH_ISA /
// set_isa()). Callers get the active target's operations: its attention
// forward, its peak loops and its k-means assignment loop.
#pragma once

#include <string>
#include <vector>

#include "kernel/target_ops.h"

namespace tilesplash::kernel {

// The operations of the active target.
const TargetOps& active_target();

// The names in `features` (a targets.def features string, space-separated)
// that this CPU lacks, in their order; empty when a target needing them runs
// here. Throws std::logic_error on a name dispatch does not know.
std::vector<std::string> missing_cpu_features(const char* features);

}  // namespace tilesplash::kernel
