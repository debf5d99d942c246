// Test-only: lets the avx512 and avx512bf16 kernel translation units compile
// and run on a CPU without AVX-512 (CMake option TILESPLASH_EMULATE_AVX512,
// see docs/kernel.md). Force-included (-include) before anything else in those
// units, which are then compiled with the avx2 flags only: the _mm512_*
// intrinsics become SIMDe's portable implementations through its native
// aliases, and __AVX512F__ is defined afterwards so the kernels take their
// AVX-512 branches. Never part of a normal build.
#pragma once

#if defined(__AVX512F__)
#error "avx512_simde_shim.h is for builds without -mavx512f"
#endif

// GCC's headers first: SIMDe then reuses their __m512 / __m512bh types.
#include <immintrin.h>

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>

#include <cstdint>
#include <cstring>

// Intrinsics SIMDe 0.7.4 lacks, written from Intel's pseudo-code.
namespace tilesplash_emulation {

// VCVTNEPS2BF16 on one value: round to nearest even, NaN stays a quiet NaN,
// and (the instruction ignores MXCSR) denormal inputs and outputs are zero.
inline std::uint16_t cvtne_f32_bf16(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, 4);
  if ((bits & 0x7f800000u) == 0) return static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  const std::uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>(rounded >> 16);
}

inline __m256bh cvtneps_pbh(__m512 a) {
  float in[16];
  std::uint16_t out[16];
  std::memcpy(in, &a, sizeof in);
  for (int i = 0; i < 16; ++i) out[i] = cvtne_f32_bf16(in[i]);
  __m256bh r;
  std::memcpy(&r, out, sizeof r);
  return r;
}

// Element i of the result is a[i - 16] for i >= 16, b[i] below (b is low).
inline __m512bh cvtne2ps_pbh(__m512 a, __m512 b) {
  const __m256bh low = cvtneps_pbh(b);
  const __m256bh high = cvtneps_pbh(a);
  __m512bh r;
  std::memcpy(&r, &low, 32);
  std::memcpy(reinterpret_cast<char*>(&r) + 32, &high, 32);
  return r;
}

// VPMOVZXWD, zero-masked (kernel/tensor_rows-inl.h's bf16 widening).
inline __m512i maskz_cvtepu16_epi32(__mmask16 k, __m256i a) {
  std::uint16_t in[16];
  std::uint32_t out[16];
  std::memcpy(in, &a, sizeof in);
  for (int i = 0; i < 16; ++i) out[i] = (k >> i) & 1 ? in[i] : 0u;
  __m512i r;
  std::memcpy(&r, out, sizeof r);
  return r;
}

}  // namespace tilesplash_emulation

#define _mm512_cvtneps_pbh(a) tilesplash_emulation::cvtneps_pbh(a)
#define _mm512_cvtne2ps_pbh(a, b) tilesplash_emulation::cvtne2ps_pbh(a, b)
#define _mm512_maskz_cvtepu16_epi32(k, a) tilesplash_emulation::maskz_cvtepu16_epi32(k, a)
#define _mm512_maskz_slli_epi32(k, a, imm8) \
  simde_mm512_maskz_mov_epi32(k, simde_mm512_slli_epi32(a, imm8))
// SIMDe defines the function but not its native alias (bf16_dot_path-inl.h's
// transpose uses the masked form: GCC 12 warns about the unmasked one).
#define _mm512_mask_shuffle_i32x4(src, k, a, b, imm8) \
  simde_mm512_mask_shuffle_i32x4(src, k, a, b, imm8)

// The kernels test these to pick their AVX-512 code.
#define __AVX512F__ 1
#define __AVX512BW__ 1
#define __AVX512DQ__ 1
#define __AVX512VL__ 1
#define __AVX512BF16__ 1
// vpdpbusd through SIMDe's _mm512_dpbusd_epi32, for the targets compiled
// with -mavx512vnni only (cmake/TilesplashIsa.cmake passes the flag).
#if defined(TILESPLASH_EMULATE_AVX512VNNI)
#define __AVX512VNNI__ 1
#endif
