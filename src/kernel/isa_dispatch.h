// The run-time choice among the compiled SIMD targets of kernel/targets.def,
// made once per process from CPUID (or TILESPLASH_ISA / set_isa()). Callers
// get the active target's operations: its attention forward and its peak loops.
#pragma once

#include "kernel/target_ops.h"

namespace tilesplash::kernel {

// The operations of the active target.
const TargetOps& active_target();

}  // namespace tilesplash::kernel
