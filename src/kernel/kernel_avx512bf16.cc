// The avx512bf16 target: the AVX-512 f32 kernel plus a bf16 path in which
// both products use vdpbf16ps (two bf16 multiply-adds per f32 lane), the one
// instruction Highway 1.0.3 cannot emit. Whether bf16 inputs take it or are
// widened to f32 is measured per CPU (choose_product_path(), attention.h):
// the dot product runs at twice the FMA rate on a Zen 4, at half of it on a
// Sapphire Rapids. The int8 path (AVX-512 VNNI, which every CPU with
// AVX-512 BF16 has) is the template's (kernel/int8_path-inl.h). The path and
// its layouts: kernel/bf16_dot_path-inl.h, which the amx target shares.
#include <immintrin.h>

#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx512bf16 {

using Traits = KernelTraits</*lanes=*/16, /*col_vecs=*/4, /*rows=*/6, /*registers=*/32>;

// clang-format off
#include "kernel/kernel-inl.h"
#include "kernel/bf16_dot_path-inl.h"
#include "kernel/pooled_merge_dot-inl.h"
#include "kernel/ladder_walk_dot-inl.h"
// clang-format on

namespace {

// The bf16 peak: kPeakChains independent chains of vdpbf16ps, two bf16
// multiply-adds (4 flops) per 32-bit lane each, the rate both bf16 products
// can reach. 2^-12 squared is 2^-24: every product is a normal f32 and the
// sums stay far from overflow for any realistic round count.
inline volatile float g_bf16_operand = 1.0f / 4096.0f;

float bf16_peak_run(std::int64_t rounds) {
  constexpr int kChains = Traits::kPeakChains;
  const __m512 x = _mm512_set1_ps(g_bf16_operand);
  const __m512bh a = _mm512_cvtne2ps_pbh(x, x);
  const __m512bh b = _mm512_cvtne2ps_pbh(x, x);
  __m512 acc[kChains];
#pragma GCC unroll 32
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + static_cast<float>(c));
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 32
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  VF total = acc[0];
#pragma GCC unroll 32
  for (int c = 1; c < kChains; ++c) total += acc[c];
  return reduce_add(total);
}

}  // namespace

TargetOps target_ops() {
  return target_ops_with<Bf16DotPath>({&bf16_peak_run, 4.0 * Traits::kPeakChains * kLanes});
}

}  // namespace tilesplash::kernel::avx512bf16
