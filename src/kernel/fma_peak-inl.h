// The f32 peak loop of a target: kPeakChains independent multiply-add chains
// of one vector each, as many as the register file holds beside the operands
// (kernel/kernel_traits.h), which covers the FMA latency of every x86 core
// with two FMA pipes. Included by kernel-inl.h inside a target's namespace.
//
// With a fused multiply-add each step is acc += acc * s: the accumulator is
// both the addend and a factor, so the one instruction fits every FMA
// encoding, including those that can only accumulate into their addend (ARM's
// fmla), where acc = acc * a + b would cost two register copies per FMA.
// s = 2^-30 is below half an ulp of acc, so acc keeps its value (no overflow,
// no subnormals). Without one (SSE2, the generic target on x86-64) a multiply
// and an add in place, acc = acc * a + b, need no copy. The operands arrive
// through volatiles, so the compiler cannot fold the steps away.
#if defined(__FMA__) || defined(__aarch64__)
constexpr bool kPeakFused = true;
#else
constexpr bool kPeakFused = false;
#endif

inline volatile float g_peak_step = 0x1p-30f;
inline volatile float g_peak_multiplier = 0.5f;
inline volatile float g_peak_addend = 0.5f;

inline float fma_peak_run(std::int64_t rounds) {
  constexpr int kChains = Traits::kPeakChains;
  const VF s = splat(g_peak_step);
  const VF a = splat(g_peak_multiplier);
  const VF b = splat(g_peak_addend);
  VF acc[kChains];
#pragma GCC unroll 32
  for (int c = 0; c < kChains; ++c) acc[c] = splat(1.0f + static_cast<float>(c));
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 32
    for (int c = 0; c < kChains; ++c) {
      if constexpr (kPeakFused) {
        acc[c] += acc[c] * s;
      } else {
        acc[c] = acc[c] * a + b;
      }
    }
  }
  VF total = acc[0];
#pragma GCC unroll 32
  for (int c = 1; c < kChains; ++c) total += acc[c];
  return reduce_add(total);
}

inline FmaLoop fma_peak_loop() { return {&fma_peak_run, 2.0 * Traits::kPeakChains * kLanes}; }
