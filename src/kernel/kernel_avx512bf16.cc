// The avx512bf16 target: the AVX-512 f32 kernel plus a bf16 path in which
// both products use vdpbf16ps (two bf16 multiply-adds per f32 lane), the one
// instruction Highway 1.0.3 cannot emit. Whether bf16 inputs take it or are
// widened to f32 is measured per CPU (choose_product_path(), attention.h):
// the dot product runs at twice the FMA rate on a Zen 4, at half of it on a
// Sapphire Rapids. The int8 path (AVX-512 VNNI, which every CPU with
// AVX-512 BF16 has) is the template's (kernel/int8_path-inl.h). K is packed as [d/2][64] pairs of
// adjacent channels, V as [keys/2][dv] pairs of adjacent keys, and the softmax
// probabilities are rounded to bf16 for P.V, as GPU flash kernels do.
#include <immintrin.h>

#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx512bf16 {

using Traits = KernelTraits</*lanes=*/16, /*col_vecs=*/4, /*rows=*/6, /*registers=*/32>;

#include "kernel/kernel-inl.h"

static_assert(kPanel == 64, "the bf16 micro-kernels are written for 4 x 16 lanes");

inline std::uint32_t bf16_pair(std::uint16_t low, std::uint16_t high) {
  return static_cast<std::uint32_t>(low) | (static_cast<std::uint32_t>(high) << 16);
}

inline bool bf16_special(std::uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u; }

// The members kernel/flash_forward-inl.h expects of a path (see F32Path).
struct Bf16DotPath {
  using QkElem = std::uint32_t;  // a pair of bf16
  using VElem = std::uint32_t;
  using Prob = std::uint32_t;  // a pair of bf16 probabilities of adjacent keys
  static constexpr bool kSeparateProbs = true;
  static constexpr int kKeysPerVRow = 2;

  static std::int64_t k_panel_elems(std::int64_t d) { return d / 2 * kPanel; }
  static std::int64_t v_head_elems(std::int64_t keys, std::int64_t dvp) { return keys / 2 * dvp; }
  static std::int64_t q_row_elems(std::int64_t d) { return d / 2; }
  static std::int64_t prob_row_elems(std::int64_t keys) { return keys / 2; }

  void prepare_heads(const ForwardParams&, std::int64_t, std::int64_t, ThreadingContext&) {}
  static double score_offset(const std::uint32_t*, std::int64_t) { return 0.0; }

  static const std::uint16_t* row_ptr(const TensorView& t, std::int64_t head, std::int64_t row) {
    return static_cast<const std::uint16_t*>(t.data) + head * t.head_stride + row * t.row_stride;
  }

  static bool pack_k_panel(const TensorView& k, std::int64_t head, std::int64_t key0,
                           std::uint32_t* panel, float*) {
    const std::int64_t pairs = k.dim / 2;
    bool special = false;
    for (std::int64_t j = 0; j < kPanel; ++j) {
      const std::int64_t key = key0 + j;
      if (key >= k.len) {
        for (std::int64_t c = 0; c < pairs; ++c) panel[c * kPanel + j] = 0;
        continue;
      }
      const std::uint16_t* src = row_ptr(k, head, key);
      for (std::int64_t c = 0; c < pairs; ++c) {
        special |= bf16_special(src[2 * c]) | bf16_special(src[2 * c + 1]);
        panel[c * kPanel + j] = bf16_pair(src[2 * c], src[2 * c + 1]);
      }
    }
    return !special;
  }

  // V stays row-major in key pairs, [keys / 2][dvp].
  static bool pack_v_panel(const TensorView& v, std::int64_t head, std::int64_t key0,
                           std::int64_t /*keys*/, std::int64_t dvp, std::uint32_t* head_v, float*) {
    std::uint32_t* out = head_v + key0 / 2 * dvp;
    bool special = false;
    for (std::int64_t pair = 0; pair < kPanel / 2; ++pair) {
      const std::int64_t key = key0 + 2 * pair;
      const std::uint16_t* even = key < v.len ? row_ptr(v, head, key) : nullptr;
      const std::uint16_t* odd = key + 1 < v.len ? row_ptr(v, head, key + 1) : nullptr;
      std::uint32_t* dst = out + pair * dvp;
      for (std::int64_t col = 0; col < dvp; ++col) {
        const bool in = col < v.dim;
        const std::uint16_t low = (in && even) ? even[col] : 0;
        const std::uint16_t high = (in && odd) ? odd[col] : 0;
        special |= bf16_special(low) | bf16_special(high);
        dst[col] = bf16_pair(low, high);
      }
    }
    return !special;
  }

  static void load_q_row(const TensorView& q, std::int64_t head, std::int64_t row,
                         std::uint32_t* dst) {
    std::memcpy(dst, row_ptr(q, head, row), q.dim * 2);
  }

  template <typename T>
  static T* v_chunk(T* head_v, std::int64_t /*keys*/, std::int64_t key0, std::int64_t col,
                    std::int64_t dvp) {
    return head_v + key0 / 2 * dvp + col;
  }
  static std::int64_t v_key_stride(std::int64_t dvp) { return dvp; }  // per key pair

  // The `nk` keys from `key0`, all columns: one span.
  template <typename T, typename F>
  static void v_tile_spans(T* head_v, std::int64_t keys, std::int64_t key0, std::int64_t nk,
                           std::int64_t dvp, F&& span) {
    span(v_chunk(head_v, keys, key0, 0, dvp), nk / 2 * dvp);
  }

  template <int R>
  static void qk(const std::uint32_t* __restrict q, std::int64_t q_stride, std::int64_t d,
                 const std::uint32_t* __restrict panel, float* __restrict s, std::int64_t s_stride,
                 VF* __restrict row_max) {
    const std::int64_t pairs = d / 2;
    __m512 acc[R][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_setzero_ps();
    for (std::int64_t c = 0; c < pairs; ++c) {
      __m512bh kv[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        kv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(panel + c * kPanel + j * 16));
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh qb =
            reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(q[r * q_stride + c])));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], qb, kv[j]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        _mm512_storeu_ps(s + r * s_stride + j * 16, acc[r][j]);
        row_max[r] = vmax(acc[r][j], row_max[r]);
      }
    }
  }

  // Probabilities to bf16, adjacent keys paired in one 32-bit lane.
  static void store_probs(const float* row, std::int64_t keys, std::uint32_t* pairs) {
    for (std::int64_t key = 0; key < keys; key += 16) {
      const __m256bh half = _mm512_cvtneps_pbh(_mm512_loadu_ps(row + key));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(pairs + key / 2),
                          reinterpret_cast<const __m256i&>(half));
    }
  }

  template <int R>
  static void pv(const std::uint32_t* __restrict pairs, std::int64_t p_stride, std::int64_t keys,
                 const std::uint32_t* __restrict v, std::int64_t v_stride, float* __restrict acc,
                 std::int64_t acc_stride, const float* alpha) {
    __m512 a[R][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 scale = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        a[r][j] = _mm512_mul_ps(_mm512_loadu_ps(acc + r * acc_stride + j * 16), scale);
      }
    }
    for (std::int64_t pair = 0; pair < keys / 2; ++pair) {
      __m512bh vv[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        vv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(v + pair * v_stride + j * 16));
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512bh pb = reinterpret_cast<__m512bh>(
            _mm512_set1_epi32(static_cast<int>(pairs[r * p_stride + pair])));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) a[r][j] = _mm512_dpbf16_ps(a[r][j], pb, vv[j]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) _mm512_storeu_ps(acc + r * acc_stride + j * 16, a[r][j]);
  }
};

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
