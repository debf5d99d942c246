// The generic target: 4 floats per vector (SSE2 on x86-64, NEON elsewhere), a 6-row by 8-key
// register tile in 12 of 16 registers (see kernel/f32_path-inl.h and kernel/flash_forward-inl.h).
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::generic {

using Traits = KernelTraits</*lanes=*/4, /*col_vecs=*/2, /*rows=*/6, /*registers=*/16>;

#include "kernel/kernel-inl.h"

TargetOps target_ops() { return target_ops_with<void>({}); }

}  // namespace tilesplash::kernel::generic
