// The bf16 dot-product path (Bf16DotPath): K packed as [d/2][kPanel] pairs of
// adjacent channels, V as [keys/2][dvp] pairs of adjacent keys, the softmax
// probabilities rounded to bf16 for P.V as GPU flash kernels do, and both
// products through vdpbf16ps (two bf16 multiply-adds per f32 lane). Those
// layouts are AMX's too (a tile row of B is one channel or key pair for 16
// columns), so the amx target's tile path (kernel/amx_path-inl.h) reuses the
// packing and replaces only the two micro-kernels. Included after
// kernel/kernel-inl.h by the translation units of targets with AVX-512 BF16.
static_assert(kPanel == 64, "the bf16 micro-kernels are written for 4 x 16 lanes");

inline std::uint32_t bf16_pair(std::uint16_t low, std::uint16_t high) {
  return static_cast<std::uint32_t>(low) | (static_cast<std::uint32_t>(high) << 16);
}

inline bool bf16_special(std::uint16_t bits) { return (bits & 0x7f80u) == 0x7f80u; }

// r[i] holds row i of a 16 x 16 block of 32-bit elements; afterwards r[j]
// holds its column j (unpacks within 128-bit lanes, then lane shuffles).
// The intrinsics take full masks and an explicit source, as simd-inl.h's do:
// GCC 12 warns the unmasked forms' undefined source may be used.
constexpr __mmask16 kAll16 = 0xffff;
constexpr __mmask8 kAll8 = 0xff;
// The largest of a vector's 32 unsigned 16-bit lanes.
inline std::uint16_t max_u16(__m512i x) {
  alignas(64) std::uint16_t lanes[32];
  _mm512_store_si512(lanes, x);
  return *std::max_element(lanes, lanes + 32);
}

// Lane indices of _mm512_permutex2var_epi16 (32 and up: the second source)
// that interleave two rows' first 16 halves, then their last 16.
alignas(64) constexpr std::uint16_t kInterleaveLow[32] = {
    0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
    8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
alignas(64) constexpr std::uint16_t kInterleaveHigh[32] = {
    16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
    24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63};

inline void transpose_16x16(__m512i r[16]) {
  __m512i t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_mask_unpacklo_epi32(r[i], kAll16, r[i], r[i + 1]);
    t[i + 1] = _mm512_mask_unpackhi_epi32(r[i], kAll16, r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_mask_unpacklo_epi64(t[i], kAll8, t[i], t[i + 2]);
    r[i + 1] = _mm512_mask_unpackhi_epi64(t[i], kAll8, t[i], t[i + 2]);
    r[i + 2] = _mm512_mask_unpacklo_epi64(t[i + 1], kAll8, t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_mask_unpackhi_epi64(t[i + 1], kAll8, t[i + 1], t[i + 3]);
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_mask_shuffle_i32x4(r[i], kAll16, r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_mask_shuffle_i32x4(r[i], kAll16, r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_mask_shuffle_i32x4(r[i + 8], kAll16, r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_mask_shuffle_i32x4(r[i + 8], kAll16, r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 8; ++i) {
    r[i] = _mm512_mask_shuffle_i32x4(t[i], kAll16, t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_mask_shuffle_i32x4(t[i], kAll16, t[i], t[i + 8], 0xdd);
  }
}

// The members kernel/flash_forward-inl.h expects of a path (see F32Path).
struct Bf16DotPath {
  static constexpr const char* kName = "vdpbf16ps";
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

  // Panel of kPanel keys from `key0` as [d / 2][kPanel] channel pairs; false
  // if it holds NaN or Inf. A whole panel goes 16 keys x 16 pairs at a time
  // through a register transpose (the scalar loop's scattered stores made
  // packing a tenth of a small layer's time); past the last key, scalar.
  static bool pack_k_panel(const TensorView& k, std::int64_t head, std::int64_t key0,
                           std::uint32_t* panel, float*) {
    const std::int64_t pairs = k.dim / 2;
    const std::int64_t whole = key0 + kPanel <= k.len ? pairs / 16 * 16 : 0;
    const __m512i exponent = _mm512_set1_epi16(static_cast<short>(0x7f80));
    __m512i top = _mm512_setzero_si512();  // largest exponent bits seen
    bool special = false;
    for (std::int64_t j0 = 0; j0 < kPanel && whole > 0; j0 += 16) {
      for (std::int64_t c0 = 0; c0 < whole; c0 += 16) {
        __m512i r[16];
        for (int i = 0; i < 16; ++i) {
          r[i] = _mm512_loadu_si512(row_ptr(k, head, key0 + j0 + i) + 2 * c0);
          top = _mm512_max_epu16(top, _mm512_and_si512(r[i], exponent));
        }
        transpose_16x16(r);
        for (int i = 0; i < 16; ++i) _mm512_storeu_si512(panel + (c0 + i) * kPanel + j0, r[i]);
      }
    }
    special = max_u16(top) == 0x7f80;
    for (std::int64_t j = 0; j < kPanel; ++j) {  // what the transpose left
      const std::int64_t key = key0 + j;
      if (key >= k.len) {
        for (std::int64_t c = 0; c < pairs; ++c) panel[c * kPanel + j] = 0;
        continue;
      }
      const std::uint16_t* src = row_ptr(k, head, key);
      for (std::int64_t c = whole; c < pairs; ++c) {
        special |= bf16_special(src[2 * c]) | bf16_special(src[2 * c + 1]);
        panel[c * kPanel + j] = bf16_pair(src[2 * c], src[2 * c + 1]);
      }
    }
    return !special;
  }

  // V stays row-major in key pairs, [keys / 2][dvp]: 32 columns of a key pair
  // at a time, the two keys' bf16 interleaved by one two-source permute each
  // for the first and the last 16 columns.
  static VPanel pack_v_panel(const TensorView& v, std::int64_t head, std::int64_t key0,
                             std::int64_t /*keys*/, std::int64_t dvp, std::uint32_t* head_v,
                             float*) {
    std::uint32_t* out = head_v + key0 / 2 * dvp;
    const std::int64_t whole = v.dim / 32 * 32;
    const __m512i exponent = _mm512_set1_epi16(static_cast<short>(0x7f80));
    const __m512i first = _mm512_loadu_si512(kInterleaveLow);
    const __m512i second = _mm512_loadu_si512(kInterleaveHigh);
    __m512i top = _mm512_setzero_si512();  // largest exponent bits seen
    std::uint16_t tail = 0;                // the same for the scalar columns
    for (std::int64_t pair = 0; pair < kPanel / 2; ++pair) {
      const std::int64_t key = key0 + 2 * pair;
      const std::uint16_t* even = key < v.len ? row_ptr(v, head, key) : nullptr;
      const std::uint16_t* odd = key + 1 < v.len ? row_ptr(v, head, key + 1) : nullptr;
      std::uint32_t* dst = out + pair * dvp;
      const bool both = even != nullptr && odd != nullptr;
      for (std::int64_t col = 0; both && col < whole; col += 32) {
        const __m512i low = _mm512_loadu_si512(even + col);
        const __m512i high = _mm512_loadu_si512(odd + col);
        top = _mm512_max_epu16(top, _mm512_and_si512(low, exponent));
        top = _mm512_max_epu16(top, _mm512_and_si512(high, exponent));
        _mm512_storeu_si512(dst + col, _mm512_permutex2var_epi16(low, first, high));
        _mm512_storeu_si512(dst + col + 16, _mm512_permutex2var_epi16(low, second, high));
      }
      for (std::int64_t col = both ? whole : 0; col < dvp; ++col) {
        const bool in = col < v.dim;
        const std::uint16_t low = (in && even) ? even[col] : 0;
        const std::uint16_t high = (in && odd) ? odd[col] : 0;
        tail = std::max<std::uint16_t>(tail, std::max(low & 0x7f80, high & 0x7f80));
        dst[col] = bf16_pair(low, high);
      }
    }
    tail = std::max(tail, max_u16(top));
    // bf16's exponent field is f32's: bits 7-14 of the half.
    return {tail != 0x7f80, tail >> 7};
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
