// The kernel templates of one SIMD target, in dependency order. A target's
// translation unit (kernel_<name>.cc) includes kernel/flash_prelude.h, opens
// `namespace tilesplash::kernel::<name>`, defines `using Traits =
// KernelTraits<...>` and includes this file; Highway's -inl.h pattern, with
// GCC vector extensions instead of Highway (Debian's Highway 1.0.3 has no Zen 4
// target and never emits the BF16 dot product, and the micro-kernels need
// exact control of registers).
// clang-format off
#include "kernel/simd-inl.h"
#include "kernel/tensor_rows-inl.h"
#include "kernel/softmax_rows-inl.h"
#include "kernel/row_groups-inl.h"
#include "kernel/f32_path-inl.h"
#include "kernel/flash_forward-inl.h"
#include "kernel/int8_path-inl.h"
#include "kernel/fma_peak-inl.h"
#include "kernel/nearest_centroid-inl.h"
#include "kernel/ladder_walk-inl.h"
#include "kernel/pooled_merge-inl.h"
#include "kernel/forward_paths-inl.h"
// clang-format on
