// Vectors of one SIMD target as GCC vector extensions, and the exponent.
// Included by kernel-inl.h inside the target's namespace, after `Traits`
// (kernel/kernel_traits.h) is defined; compiled once per target with its -m
// flags, so the same source becomes SSE2, AVX2 or AVX-512 code.

constexpr int kLanes = Traits::kLanes;
constexpr int kColVecs = Traits::kColVecs;
constexpr int kRows = Traits::kRows;
constexpr std::int64_t kPanel = Traits::kPanel;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

typedef float VF __attribute__((vector_size(kLanes * sizeof(float))));
typedef std::int32_t VI __attribute__((vector_size(kLanes * sizeof(std::int32_t))));
typedef std::uint8_t VB __attribute__((vector_size(kLanes)));

inline VF load(const float* p) {
  VF v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, VF v) { __builtin_memcpy(p, &v, sizeof v); }
// A shuffle of lane 0 compiles to one broadcast; `VF{} + x` would add 0.0 first.
inline VF splat(float x) { return __builtin_shuffle(VF{x}, VI{}); }
// (a > b) ? a : b is exactly x86's max(a, b): b when either is NaN.
inline VF vmax(VF a, VF b) { return a > b ? a : b; }

inline float reduce_add(VF v) {
  float sum = 0.0f;
  for (int i = 0; i < kLanes; ++i) sum += v[i];
  return sum;
}

inline float reduce_max(VF v) {
  float best = v[0];
  for (int i = 1; i < kLanes; ++i) best = v[i] > best ? v[i] : best;
  return best;
}

// 2^t for t <= ~0: 2^t = 2^n * 2^f with n = round(t) and f in [-0.5, 0.5],
// Cephes' exp2f polynomial for 2^f (relative error ~2e-7). Masked scores
// (-inf) must give exactly 0 and NaN must stay NaN (an overflowed score has to
// reach the row sum, where it is reported); vmax keeps NaN, see above.
inline VF exp2_poly(VF f) {
  VF p = splat(1.535336188319500e-4f);
  p = p * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  return p * f + 1.0f;
}

inline VF exp2_vec(VF t) {
#if defined(__AVX512F__)
  if constexpr (kLanes == 16) {
    // The ISA's own exponent step: vscalefps multiplies by 2^n in one
    // instruction. Below the clamp at -151, p * 2^n < 1.5 * 2^-151 rounds to
    // exactly 0; between -151 and -126 the results are subnormal, as exact as
    // f32 allows. (The all-ones masks only avoid GCC 12's uninitialised
    // _mm512_undefined_ps in the unmasked intrinsics.)
    t = vmax(splat(-151.0f), t);
    const VF n = _mm512_mask_roundscale_ps(t, static_cast<__mmask16>(0xffff), t,
                                           _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const VF p = exp2_poly(t - n);
    return _mm512_mask_scalef_ps(p, static_cast<__mmask16>(0xffff), p, n);
  }
#endif
  // Clamped at -127, where 2^n is 0. Adding 1.5 * 2^23 + 127 rounds t to an
  // integer n held in the low mantissa bits as n + 127 (+ 2^22): shifted left
  // by 23 they are the f32 exponent field of 2^n (0 at n = -127), and
  // subtracting the constant again gives n exactly.
  t = vmax(splat(-127.0f), t);
  constexpr float kRoundAndBias = 12582912.0f + 127.0f;
  const VF biased = t + kRoundAndBias;
  const VF n = biased - kRoundAndBias;
  const VI two_to_n = reinterpret_cast<VI>(biased) << 23;  // same-size vector cast: a bit cast
  return exp2_poly(t - n) * reinterpret_cast<VF>(two_to_n);
}
