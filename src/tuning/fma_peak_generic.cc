// f32 peak of portable code: what the compiler makes of independent
// multiply-add chains for the baseline target (SSE2 mul + add on x86-64, NEON
// FMA elsewhere). It is the ceiling the portable kernel can hope for, not the
// CPU's datasheet peak.
#include "tuning/fma_peak.h"

namespace tilesplash::tuning {
namespace {

// 12 x 4 floats fill 12 of the 16 xmm (or 32 NEON) registers with room for
// the two operands.
constexpr int kChains = 12;
constexpr int kLanes = 4;

// Volatile so the compiler cannot see that acc = 0.5 * acc + 0.5 stays at 1.
volatile float g_multiplier = 0.5f;
volatile float g_addend = 0.5f;

float run(std::int64_t rounds) {
  const float a = g_multiplier;
  const float b = g_addend;
  // One flat array: GCC's loop vectoriser turns it into whole 4-lane vectors,
  // where a [chain][lane] nest got split into 2-lane pieces shuffled through
  // general registers.
  float acc[kChains * kLanes];
  for (int i = 0; i < kChains * kLanes; ++i) acc[i] = 1.0f + static_cast<float>(i);
  for (std::int64_t r = 0; r < rounds; ++r) {
    for (int i = 0; i < kChains * kLanes; ++i) acc[i] = acc[i] * a + b;
  }
  float sum = 0.0f;
  for (float value : acc) sum += value;
  return sum;
}

}  // namespace

FmaLoop fma_loop_f32_generic() { return {&run, 2.0 * kChains * kLanes}; }

}  // namespace tilesplash::tuning
