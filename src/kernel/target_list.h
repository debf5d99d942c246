// The one list of SIMD targets (kernel/targets.def) as C++ reads it: each
// target's name, arch and CPU features, and whether this build compiles it.
// Dispatch (kernel/isa_dispatch.cc) and the tests read the list from here.
#pragma once

namespace tilesplash::kernel {

// The arch column of targets.def compiled in this build: cmake/TilesplashIsa.cmake
// defines TILESPLASH_ARCH_<ARCH> as 1 for the build's architecture, 0 for the
// others, for the library and the tests alike.
inline constexpr bool kArch_any = true;
inline constexpr bool kArch_x86 = TILESPLASH_ARCH_X86 != 0;
inline constexpr bool kArch_aarch64 = TILESPLASH_ARCH_AARCH64 != 0;

struct ListedTarget {
  const char* name;
  const char* arch;
  const char* features;  // space-separated CPU feature names (see cpu_has in isa_dispatch.cc)
  bool compiled;         // of this build's arch (or "any")
};

// Every line of targets.def, best first.
inline constexpr ListedTarget kListedTargets[] = {
#define TILESPLASH_TARGET(name, arch, features, flags) {#name, #arch, features, kArch_##arch},
#include "kernel/targets.def"
#undef TILESPLASH_TARGET
};

}  // namespace tilesplash::kernel
