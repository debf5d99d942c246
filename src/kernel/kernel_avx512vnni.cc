// The avx512vnni target (Cascade Lake, Ice Lake and later Xeons without
// AVX-512 BF16): the avx512 kernel with the int8 Q.K^T on vpdpbusd (64
// multiply-adds per instruction). bf16 inputs are widened to f32.
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx512vnni {

using Traits = KernelTraits</*lanes=*/16, /*col_vecs=*/4, /*rows=*/6, /*registers=*/32>;

#include "kernel/kernel-inl.h"

TargetOps target_ops() { return target_ops_with<void>({}); }

}  // namespace tilesplash::kernel::avx512vnni
