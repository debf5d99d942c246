// The one central list of compiled SIMD targets and the run-time choice among
// them, made once per process from CPUID (or TILESPLASH_ISA / set_isa).
#pragma once

#include "kernel/forward_params.h"

namespace tilesplash::kernel {

// The forward function of the active target.
ForwardFn active_forward();

}  // namespace tilesplash::kernel
