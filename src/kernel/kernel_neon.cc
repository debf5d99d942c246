// The neon target (64-bit ARM, Advanced SIMD): 4 floats per vector, a 6-row by 16-key register
// tile: 24 of the 32 NEON registers hold accumulators, 4 hold K (or V) and 1 the broadcast (see
// kernel/f32_path-inl.h and kernel/flash_forward-inl.h). The generic target runs the same 4-lane
// code with a tile sized for 16 registers.
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::neon {

using Traits = KernelTraits</*lanes=*/4, /*col_vecs=*/4, /*rows=*/6, /*registers=*/32>;

#include "kernel/kernel-inl.h"

TargetOps target_ops() { return target_ops_with<void>({}); }

}  // namespace tilesplash::kernel::neon
