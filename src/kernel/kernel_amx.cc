// The amx target (Sapphire Rapids and later Xeons): the avx512bf16 target's
// AVX-512 kernel with both bf16 products and the int8 Q.K^T on AMX tiles
// (kernel/amx_path-inl.h). f32 inputs keep the AVX-512 FMA path. Dispatch
// (isa_dispatch.cc) offers it only where the CPU has the tiles, the OS
// enables their state (XCR0) and Linux grants this process the tile data
// (arch_prctl); elsewhere the next target of targets.def runs.
#include <immintrin.h>

#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::amx {

using Traits = KernelTraits</*lanes=*/16, /*col_vecs=*/4, /*rows=*/6, /*registers=*/32>;

// clang-format off
#include "kernel/kernel-inl.h"
#include "kernel/bf16_dot_path-inl.h"
#include "kernel/amx_path-inl.h"
#include "kernel/pooled_merge_dot-inl.h"
#include "kernel/ladder_walk_dot-inl.h"
// clang-format on

TargetOps target_ops() { return amx_target_ops(); }

}  // namespace tilesplash::kernel::amx
