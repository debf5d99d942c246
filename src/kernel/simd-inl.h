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
template <typename T>
inline VI load_i(const T* p) {
  static_assert(sizeof(T) == 4);
  VI v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
// A shuffle of lane 0 compiles to one broadcast; `VF{} + x` would add 0.0 first.
inline VF splat(float x) { return __builtin_shuffle(VF{x}, VI{}); }
inline VI splat_i(std::int32_t x) { return __builtin_shuffle(VI{x}, VI{}); }
// (a > b) ? a : b, so b when either is NaN: exactly x86's maxps(a, b). GCC
// does not always see that in the ternary (it emits a compare and a blend),
// hence the intrinsics where the target has them. (A template only so that
// the branches of the other widths are discarded, not type-checked.)
template <typename V>
inline V vmax(V a, V b) {
#if defined(__AVX512F__)
  if constexpr (kLanes == 16) return _mm512_mask_max_ps(a, static_cast<__mmask16>(0xffff), a, b);
#endif
#if defined(__AVX__)
  if constexpr (kLanes == 8) return _mm256_max_ps(a, b);
#endif
#if defined(__SSE__)
  if constexpr (kLanes == 4) return _mm_max_ps(a, b);
#endif
  return a > b ? a : b;
}

// Horizontal reductions as a tree of lane rotations (log2(kLanes) shuffles
// with constant indices), not lane by lane: they run once per row and tile,
// often enough to matter. (A template so that the branches of the other
// widths are discarded, not instantiated.)
template <typename V, typename Op>
inline float reduce(V v, Op op) {
  if constexpr (sizeof(V) == 64) {
    v = op(v, __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7));
    v = op(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3, 12, 13, 14, 15, 8, 9, 10, 11));
    v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5, 10, 11, 8, 9, 14, 15, 12, 13));
    v = op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6, 9, 8, 11, 10, 13, 12, 15, 14));
  } else if constexpr (sizeof(V) == 32) {
    v = op(v, __builtin_shufflevector(v, v, 4, 5, 6, 7, 0, 1, 2, 3));
    v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1, 6, 7, 4, 5));
    v = op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2, 5, 4, 7, 6));
  } else {
    static_assert(sizeof(V) == 16, "vectors of 4, 8 or 16 floats");
    v = op(v, __builtin_shufflevector(v, v, 2, 3, 0, 1));
    v = op(v, __builtin_shufflevector(v, v, 1, 0, 3, 2));
  }
  return v[0];
}

inline float reduce_add(VF v) {
  return reduce(v, [](VF a, VF b) { return a + b; });
}
inline float reduce_max(VF v) {
  return reduce(v, [](VF a, VF b) { return vmax(a, b); });
}

// 2^t for t <= ~0: 2^t = 2^n * 2^f with n = round(t) and f in [-0.5, 0.5],
// Cephes' exp2f polynomial for 2^f (relative error ~2e-7). Masked scores
// (-inf) must give exactly 0 and NaN must stay NaN (an overflowed score has to
// reach the row sum, where it is reported); vmax keeps NaN, see above.
//
// N independent vectors at once, written stage by stage: one vector's chain
// is ~45 cycles deep (the polynomial alone is 6 dependent FMAs), and chains
// side by side let the FP scheduler find ready work sooner.
template <int N>
inline void exp2_vecs(VF (&t)[N]) {
  constexpr float kPoly[] = {1.535336188319500e-4f,
                             1.339887440266574e-3f,
                             9.618437357674640e-3f,
                             5.550332471162809e-2f,
                             2.402264791363012e-1f,
                             6.931472028550421e-1f,
                             1.0f};
  VF n[N], p[N];
#if defined(__AVX512F__)
  if constexpr (kLanes == 16) {
    // The ISA's own exponent step: vscalefps multiplies by 2^n in one
    // instruction. Below the clamp at -151, p * 2^n < 1.5 * 2^-151 rounds to
    // exactly 0; between -151 and -126 the results are subnormal, as exact as
    // f32 allows. (The all-ones masks only avoid GCC 12's uninitialised
    // _mm512_undefined_ps in the unmasked intrinsics.)
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      t[j] = vmax(splat(-151.0f), t[j]);
      n[j] = _mm512_mask_roundscale_ps(t[j], static_cast<__mmask16>(0xffff), t[j],
                                       _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      t[j] -= n[j];
      p[j] = splat(kPoly[0]);
    }
#pragma GCC unroll 8
    for (int k = 1; k < 7; ++k) {
#pragma GCC unroll 8
      for (int j = 0; j < N; ++j) p[j] = p[j] * t[j] + kPoly[k];
    }
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) {
      t[j] = _mm512_mask_scalef_ps(p[j], static_cast<__mmask16>(0xffff), p[j], n[j]);
    }
    return;
  }
#endif
  // Clamped at -127, where 2^n is 0. Adding 1.5 * 2^23 + 127 rounds t to an
  // integer n held in the low mantissa bits as n + 127 (+ 2^22): shifted left
  // by 23 they are the f32 exponent field of 2^n (0 at n = -127), and
  // subtracting the constant again gives n exactly.
  constexpr float kRoundAndBias = 12582912.0f + 127.0f;
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) {
    t[j] = vmax(splat(-127.0f), t[j]);
    n[j] = t[j] + kRoundAndBias;  // n + 127, in the low mantissa bits
    t[j] -= n[j] - kRoundAndBias;
    p[j] = splat(kPoly[0]);
  }
#pragma GCC unroll 8
  for (int k = 1; k < 7; ++k) {
#pragma GCC unroll 8
    for (int j = 0; j < N; ++j) p[j] = p[j] * t[j] + kPoly[k];
  }
#pragma GCC unroll 8
  for (int j = 0; j < N; ++j) {
    const VI two_to_n = reinterpret_cast<VI>(n[j]) << 23;  // same-size vector cast: a bit cast
    t[j] = p[j] * reinterpret_cast<VF>(two_to_n);
  }
}

inline VF exp2_vec(VF t) {
  VF one[1] = {t};
  exp2_vecs(one);
  return one[0];
}

// exp2_vec for one value, inline: a libm call in the per-row code would also
// make every live vector register a spill (all are call-clobbered).
inline float exp2_scalar(float t) { return exp2_vec(splat(t))[0]; }

// acc + the sum of the four products a[b] * k[b] per 32-bit lane, a's bytes
// unsigned and k's signed (the semantics of vpdpbusd): exact in int32 for the
// int8 path's sums (kernel/int8_path-inl.h). VNNI does it in one instruction
// (AVX-512 VNNI on 16 lanes; AVX-VNNI, or AVX-512 VNNI with VL, on 8); other
// targets take the bytes apart with shifts.
inline VI dot4_u8s8(VI acc, VI a, VI k) {
#if defined(__AVX512VNNI__)
  if constexpr (kLanes == 16) {
    return reinterpret_cast<VI>(_mm512_dpbusd_epi32(reinterpret_cast<__m512i>(acc),
                                                    reinterpret_cast<__m512i>(a),
                                                    reinterpret_cast<__m512i>(k)));
  }
#endif
#if defined(__AVXVNNI__)
  if constexpr (kLanes == 8) {
    return reinterpret_cast<VI>(_mm256_dpbusd_avx_epi32(reinterpret_cast<__m256i>(acc),
                                                        reinterpret_cast<__m256i>(a),
                                                        reinterpret_cast<__m256i>(k)));
  }
#endif
#pragma GCC unroll 4
  for (int b = 0; b < 4; ++b) {
    const VI ab = (a >> (8 * b)) & 0xff;      // byte b, zero-extended
    const VI kb = (k << (24 - 8 * b)) >> 24;  // byte b, sign-extended
    acc += ab * kb;
  }
  return acc;
}

// The name of dot4_u8s8's instructions on this target, for reports.
constexpr const char* int8_dot_name() {
#if defined(__AVX512VNNI__)
  if (kLanes == 16) return "vpdpbusd (AVX-512 VNNI)";
#endif
#if defined(__AVXVNNI__)
  if (kLanes == 8) return "vpdpbusd (AVX-VNNI)";
#endif
  return "plain";
}

// Brings the cache line at p into L2 (not L1: the current tile's data lives
// there). Inline asm on x86, because GCC drops a loop of __builtin_prefetch
// that has no other effect.
inline void prefetch_l2(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht1 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0, 2);
#endif
}
