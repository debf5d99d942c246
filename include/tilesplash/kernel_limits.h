// The attention kernel's limits on head dims and tile sizes, in one place.
// Validation, the tuner, the tile candidates, the routing code and the CLI all
// read these; the per-target kernel traits (src/kernel/kernel_traits.h) check
// at compile time that every SIMD target can run every size allowed here.
#pragma once

#include <cstdint>
#include <string>

namespace tilesplash::kernel_limits {

// Head dims (d of Q and K, dv of V): multiples of 8 in [8, 256].
inline constexpr std::int64_t kHeadDimMultiple = 8;
inline constexpr std::int64_t kMinHeadDim = kHeadDimMultiple;
inline constexpr std::int64_t kMaxHeadDim = 256;
// Keys per tile (block_kv): multiples of 64 up to 1024; query rows per tile
// (block_q): 1 to 4096.
inline constexpr std::int64_t kBlockKvMultiple = 64;
inline constexpr std::int64_t kMaxBlockKv = 1024;
inline constexpr std::int64_t kMaxBlockQ = 4096;

static_assert(kMaxHeadDim % kHeadDimMultiple == 0);
static_assert(kMaxBlockKv % kBlockKvMultiple == 0);

constexpr bool valid_head_dim(std::int64_t d) {
  return d >= kMinHeadDim && d <= kMaxHeadDim && d % kHeadDimMultiple == 0;
}
constexpr bool valid_block_kv(std::int64_t block_kv) {
  return block_kv >= kBlockKvMultiple && block_kv <= kMaxBlockKv &&
         block_kv % kBlockKvMultiple == 0;
}
constexpr bool valid_block_q(std::int64_t block_q) { return block_q >= 1 && block_q <= kMaxBlockQ; }

// The softmax scale: the kernel folds scale * log2(e) into its exponent (in
// float32), so scale must leave that product finite, whatever q and k hold:
// finite, > 0 and at most kMaxScale (about 2.3587e38; the next float fails).
inline constexpr float kScaleLog2e = 1.4426950408889634f;
inline constexpr float kMaxScale = 2.35865744e38f;
constexpr bool valid_scale(float scale) {
  return scale > 0.0f && scale <= kMaxScale;  // NaN fails both
}

// The expected values, worded for error messages and --help.
inline std::string head_dim_rule() {
  return "a multiple of " + std::to_string(kHeadDimMultiple) + " in [" +
         std::to_string(kMinHeadDim) + ", " + std::to_string(kMaxHeadDim) + "]";
}
inline std::string block_kv_rule() {
  return "a multiple of " + std::to_string(kBlockKvMultiple) + " up to " +
         std::to_string(kMaxBlockKv);
}
inline std::string block_q_rule() { return "1 to " + std::to_string(kMaxBlockQ); }
inline std::string scale_rule() {
  return "finite, > 0 and at most 2.3586574e38 (scale * log2(e) must fit float32)";
}

}  // namespace tilesplash::kernel_limits
