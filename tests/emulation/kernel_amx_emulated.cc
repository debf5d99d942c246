// Test-only: the amx target's code (kernel/amx_path-inl.h, as kernel_amx.cc
// compiles it) with the AMX tile instructions modelled in software
// (emulation/amx_tile_emu.h), registered as the test target `amx_emulated`,
// so that every test parameterised over the targets runs the tile paths on a
// CPU without AMX. Compiled with the avx512bf16 target's flags (or, in the
// TILESPLASH_EMULATE_AVX512 build, on SIMDe), so the tests skip it, naming
// the features, on a CPU without AVX-512 BF16 and VNNI. Tile emulation is
// scalar: slow, and never a measure of speed.
#include "emulation/amx_tile_emu.h"  // first: replaces GCC's tile intrinsics
#include "kernel/flash_prelude.h"
#include "kernel/isa_dispatch.h"

namespace tilesplash::kernel::amx_emulated {

using Traits = KernelTraits</*lanes=*/16, /*col_vecs=*/4, /*rows=*/6, /*registers=*/32>;

// clang-format off
#include "kernel/kernel-inl.h"
#include "kernel/bf16_dot_path-inl.h"
#include "kernel/amx_path-inl.h"
#include "kernel/pooled_merge_dot-inl.h"
#include "kernel/ladder_walk_dot-inl.h"
// clang-format on

namespace {

// The amx line of targets.def less its amx-* features, which are emulated.
[[maybe_unused]] const bool g_registered = [] {
  register_test_target("amx_emulated", "amx",
                       "avx512f avx512bw avx512dq avx512vl avx512bf16 avx512vnni avx2 fma f16c",
                       amx_target_ops());
  return true;
}();

}  // namespace

}  // namespace tilesplash::kernel::amx_emulated
