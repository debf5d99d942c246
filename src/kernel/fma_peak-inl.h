// The f32 peak loop of a target: kPeakChains independent multiply-add chains
// of one vector each, as many as the register file holds beside the operands
// (kernel/kernel_traits.h), which covers the FMA latency of every x86 core
// with two FMA pipes. Included by kernel-inl.h inside a target's namespace.

// Volatile so the compiler cannot see that acc = 0.5 * acc + 0.5 stays at 1.
inline volatile float g_peak_multiplier = 0.5f;
inline volatile float g_peak_addend = 0.5f;

inline float fma_peak_run(std::int64_t rounds) {
  constexpr int kChains = Traits::kPeakChains;
  const VF a = splat(g_peak_multiplier);
  const VF b = splat(g_peak_addend);
  VF acc[kChains];
#pragma GCC unroll 32
  for (int c = 0; c < kChains; ++c) acc[c] = splat(1.0f + static_cast<float>(c));
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 32
    for (int c = 0; c < kChains; ++c) acc[c] = acc[c] * a + b;
  }
  VF total = acc[0];
#pragma GCC unroll 32
  for (int c = 1; c < kChains; ++c) total += acc[c];
  return reduce_add(total);
}

inline FmaLoop fma_peak_loop() { return {&fma_peak_run, 2.0 * Traits::kPeakChains * kLanes}; }
