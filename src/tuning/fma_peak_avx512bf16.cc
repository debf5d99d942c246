// bf16 peak: 16 independent chains of vdpbf16ps. Each instruction does two
// bf16 multiply-adds per 32-bit lane (4 flops), the same rate the kernel's
// BF16 Q.K^T and P.V products can reach.
#include <immintrin.h>

#include "tuning/fma_peak.h"

namespace tilesplash::tuning {
namespace {

constexpr int kChains = 16;
constexpr int kLanes = 16;

// 2^-12 squared is 2^-24: every product is a normal f32, and the sums stay far
// from overflow for any realistic round count. Volatile to defeat folding.
volatile float g_operand = 1.0f / 4096.0f;

float run(std::int64_t rounds) {
  const __m512 x = _mm512_set1_ps(g_operand);
  const __m512bh a = _mm512_cvtne2ps_pbh(x, x);
  const __m512bh b = _mm512_cvtne2ps_pbh(x, x);
  __m512 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + static_cast<float>(c));
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], a, b);
  }
  __m512 total = acc[0];
#pragma GCC unroll 16
  for (int c = 1; c < kChains; ++c) total = _mm512_add_ps(total, acc[c]);
  // Summed through memory: GCC 12's _mm512_reduce_add_ps trips -Wuninitialized.
  alignas(64) float lanes[kLanes];
  _mm512_store_ps(lanes, total);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}

}  // namespace

FmaLoop fma_loop_bf16_avx512bf16() { return {&run, 4.0 * kChains * kLanes}; }

}  // namespace tilesplash::tuning
