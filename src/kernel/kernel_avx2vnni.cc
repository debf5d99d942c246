// The avx2vnni target (AVX-VNNI without AVX-512: Alder Lake and later client
// cores, Sierra Forest): the avx2 kernel with the int8 Q.K^T on the
// VEX-encoded vpdpbusd (32 multiply-adds per instruction).
#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx2vnni {

using Traits = KernelTraits</*lanes=*/8, /*col_vecs=*/2, /*rows=*/6, /*registers=*/16>;

#include "kernel/kernel-inl.h"

TargetOps target_ops() { return target_ops_with<void>({}); }

}  // namespace tilesplash::kernel::avx2vnni
