// The avx512 target: 16 floats per vector, a 6-row by 64-key register tile: 24 of the 32 zmm
// registers hold accumulators (see kernel/f32_path-inl.h and kernel/flash_forward-inl.h).
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx512 {

using Traits = KernelTraits</*lanes=*/16, /*col_vecs=*/4, /*rows=*/6, /*registers=*/32>;

#include "kernel/kernel-inl.h"

namespace {
void forward(const ForwardParams& params, Workspace& workspace, ThreadingContext& context) {
  FlashForward<F32Path>(params).run(workspace, context);
}
}  // namespace

TargetOps target_ops() { return {&forward, fma_peak_loop(), {}, &nearest_centroid}; }

}  // namespace tilesplash::kernel::avx512
