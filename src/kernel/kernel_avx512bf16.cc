// The avx512bf16 target: the AVX-512 f32 kernel plus a bf16 path in which
// both products use vdpbf16ps (two bf16 multiply-adds per f32 lane), the one
// instruction Highway 1.0.3 cannot emit. K is packed as [d/2][64] pairs of
// adjacent channels, V as [keys/2][dv] pairs of adjacent keys, and the softmax
// probabilities are rounded to bf16 for P.V, as GPU flash kernels do.
#include <immintrin.h>

#include "kernel/flash_prelude.h"

namespace tilesplash::kernel::avx512bf16 {

constexpr int kLanes = 16;
constexpr int kColVecs = 4;

#include "kernel/flash_forward-inl.h"

static_assert(kPanel == 64, "the bf16 micro-kernels are written for 4 x 16 lanes");

inline std::uint32_t bf16_pair(std::uint16_t low, std::uint16_t high) {
  return static_cast<std::uint32_t>(low) | (static_cast<std::uint32_t>(high) << 16);
}

inline bool bf16_special(std::uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u; }

struct Bf16DotPath {
  using Packed = std::uint32_t;

  static std::int64_t k_panel_elems(std::int64_t d) { return d / 2 * kPanel; }
  static std::int64_t v_row_elems(std::int64_t dvp) { return dvp / 2; }
  static std::int64_t q_row_elems(std::int64_t d) { return d / 2; }

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

  static bool pack_v_panel(const TensorView& v, std::int64_t head, std::int64_t key0,
                           std::int64_t dvp, std::uint32_t* out, float*) {
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

  static const std::uint32_t* v_tile(const std::uint32_t* packed_v, std::int64_t key0,
                                     std::int64_t dvp) {
    return packed_v + key0 / 2 * dvp;
  }

  template <int R>
  static void qk(const std::uint32_t* __restrict q, std::int64_t d,
                 const std::uint32_t* __restrict panel, float* __restrict s,
                 std::int64_t s_stride) {
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
            reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(q[r * pairs + c])));
#pragma GCC unroll 4
        for (int j = 0; j < 4; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], qb, kv[j]);
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) _mm512_storeu_ps(s + r * s_stride + j * 16, acc[r][j]);
  }

  using Prob = std::uint32_t;
  static constexpr bool kSeparateProbs = true;

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
                 const std::uint32_t* __restrict v, std::int64_t dvp, std::int64_t col,
                 float* __restrict acc, const float* alpha) {
    __m512 a[R][4];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 scale = _mm512_set1_ps(alpha[r]);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        a[r][j] = _mm512_mul_ps(_mm512_loadu_ps(acc + r * dvp + col + j * 16), scale);
      }
    }
    for (std::int64_t pair = 0; pair < keys / 2; ++pair) {
      __m512bh vv[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        vv[j] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(v + pair * dvp + col + j * 16));
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
      for (int j = 0; j < 4; ++j) _mm512_storeu_ps(acc + r * dvp + col + j * 16, a[r][j]);
  }
};

void forward(const ForwardParams& params, Workspace& workspace, runtime::ThreadPool& pool) {
  if (params.q.dtype == DType::kBF16) {
    FlashForward<Bf16DotPath>(params).run(workspace, pool);
  } else {
    FlashForward<F32Path>(params).run(workspace, pool);
  }
}

}  // namespace tilesplash::kernel::avx512bf16
