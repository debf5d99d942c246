// The avx2 target: 8 floats per vector, a 6-row by 16-key register tile: 12 of the 16 ymm registers
// hold accumulators (see kernel/f32_path-inl.h and kernel/flash_forward-inl.h).
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx2 {

using Traits = KernelTraits</*lanes=*/8, /*col_vecs=*/2, /*rows=*/6, /*registers=*/16>;

#include "kernel/kernel-inl.h"

TargetOps target_ops() { return target_ops_with<void>({}); }

}  // namespace tilesplash::kernel::avx2
