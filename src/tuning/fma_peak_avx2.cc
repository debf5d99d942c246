// f32 peak on AVX2+FMA: 12 independent chains of vfmadd. Only 16 ymm registers
// exist, so 12 accumulators plus the two operands is the most that stays
// resident, and 12 still covers 2 pipes x 5 cycles of FMA latency.
#include <immintrin.h>

#include "tuning/fma_peak.h"

namespace tilesplash::tuning {
namespace {

constexpr int kChains = 12;
constexpr int kLanes = 8;

// Volatile so the compiler cannot see that acc = 0.5 * acc + 0.5 stays at 1.
volatile float g_multiplier = 0.5f;
volatile float g_addend = 0.5f;

float run(std::int64_t rounds) {
  const __m256 a = _mm256_set1_ps(g_multiplier);
  const __m256 b = _mm256_set1_ps(g_addend);
  __m256 acc[kChains];
#pragma GCC unroll 12
  for (int c = 0; c < kChains; ++c) acc[c] = _mm256_set1_ps(1.0f + static_cast<float>(c));
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 12
    for (int c = 0; c < kChains; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
  }
  __m256 total = acc[0];
#pragma GCC unroll 12
  for (int c = 1; c < kChains; ++c) total = _mm256_add_ps(total, acc[c]);
  alignas(32) float lanes[kLanes];
  _mm256_store_ps(lanes, total);
  float sum = 0.0f;
  for (float lane : lanes) sum += lane;
  return sum;
}

}  // namespace

FmaLoop fma_loop_f32_avx2() { return {&run, 2.0 * kChains * kLanes}; }

}  // namespace tilesplash::tuning
