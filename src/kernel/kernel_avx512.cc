// The avx512 target: 16 floats per vector, a 6-row by 64-key register tile: 24 of the 32 zmm
// registers hold accumulators (see kernel/f32_path-inl.h and kernel/flash_forward-inl.h).
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx512 {

using Traits = KernelTraits</*lanes=*/16, /*col_vecs=*/4, /*rows=*/6, /*registers=*/32>;

#include "kernel/kernel-inl.h"

TargetOps target_ops() { return target_ops_with<void>({}); }

}  // namespace tilesplash::kernel::avx512
