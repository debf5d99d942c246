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

// Test-only: a target outside targets.def, such as an emulated twin of one in
// it (tests/emulation/kernel_amx_emulated.cc), registered by the test binary
// before main(). It can be forced by name (set_isa, TILESPLASH_ISA) like a
// listed target, but is never the automatic choice and is not in
// available_isas(). Not thread-safe: only static initialisation calls it.
// `twin_of`: the listed target whose code it runs; `features`: what the CPU
// must have to run it here (those of twin_of less what is emulated).
void register_test_target(const char* name, const char* twin_of, const char* features,
                          TargetOps ops);

struct TestTarget {
  const char* name;
  const char* twin_of;
  const char* features;
};
std::vector<TestTarget> test_targets();  // in registration order

}  // namespace tilesplash::kernel
