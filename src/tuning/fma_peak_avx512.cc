// f32 peak on AVX-512: 16 independent chains of vfmadd, enough to cover the
// FMA latency on both pipes of current cores (4 cycles x 2 pipes = 8 needed).
#include <immintrin.h>

#include "tuning/fma_peak.h"

namespace tilesplash::tuning {
namespace {

constexpr int kChains = 16;
constexpr int kLanes = 16;

// Volatile so the compiler cannot see that acc = 0.5 * acc + 0.5 stays at 1.
volatile float g_multiplier = 0.5f;
volatile float g_addend = 0.5f;

float run(std::int64_t rounds) {
  const __m512 a = _mm512_set1_ps(g_multiplier);
  const __m512 b = _mm512_set1_ps(g_addend);
  __m512 acc[kChains];
#pragma GCC unroll 16
  for (int c = 0; c < kChains; ++c) acc[c] = _mm512_set1_ps(1.0f + static_cast<float>(c));
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < kChains; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
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

FmaLoop fma_loop_f32_avx512() { return {&run, 2.0 * kChains * kLanes}; }

}  // namespace tilesplash::tuning
