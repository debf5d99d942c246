// The ladder walk's loops on the bf16 dot product (WalkDotOps in
// kernel/target_ops.h), for the routing code's walk (routing/ladder_scorer.cc)
// over bf16 inputs where the kernel's product path is the dot product:
//  - the scores: every sampled row against a block of keys, the rows in the
//    vector lanes as pairs of channels, each key's pair broadcast from its row
//    in place (no widened copy of K);
//  - the weighted sums: the block's V as key pairs (the kernel's own V layout
//    and packing, Bf16DotPath::pack_v_panel), the weights rounded to bf16 as
//    the kernel rounds its probabilities; the reference rows on the kernel's
//    P.V micro-kernel, each ring of a track over the pairs its keys touch.
// Each instruction does two multiply-adds per lane where the f32 loops did
// one, and on a Zen 4 at the same rate. Included after
// kernel/bf16_dot_path-inl.h by the targets with a bf16 dot product (the
// DotPath parameter only defers the definition to them; every loop here is
// vdpbf16ps, AMX or not). Sums run in a fixed order, so the bits do not depend
// on the thread.

static_assert(kPanel == kWalkDotBlock, "a walk block is one of the kernel's V panels");

// J keys from `keys` against the rows_padded rows of qt.
template <int J>
inline void walk_scores_dot_tile(const std::uint32_t* __restrict qt, std::int64_t rows_padded,
                                 std::int64_t d, const std::uint16_t* __restrict keys,
                                 std::int64_t key_stride, float scale, float* __restrict scores) {
  const std::int64_t pairs = d / 2;
  for (std::int64_t v0 = 0; v0 < rows_padded; v0 += kLanes) {
    __m512 acc[J];
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) acc[j] = _mm512_setzero_ps();
    for (std::int64_t c = 0; c < pairs; ++c) {
      const __m512bh q = reinterpret_cast<__m512bh>(_mm512_loadu_si512(qt + c * rows_padded + v0));
#pragma GCC unroll 8
      for (int j = 0; j < J; ++j) {
        std::uint32_t pair;
        __builtin_memcpy(&pair, keys + j * key_stride + 2 * c, sizeof pair);
        const __m512bh k = reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(pair)));
        acc[j] = _mm512_dpbf16_ps(acc[j], q, k);
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < J; ++j) {
      _mm512_storeu_ps(scores + j * rows_padded + v0, _mm512_mul_ps(acc[j], _mm512_set1_ps(scale)));
    }
  }
}

inline void walk_scores_dot(const std::uint32_t* qt, std::int64_t rows_padded, std::int64_t d,
                            const std::uint16_t* keys, std::int64_t key_stride, std::int64_t n,
                            float scale, float* scores) {
  constexpr int kKeys = 8;
  std::int64_t j = 0;
  for (; j + kKeys <= n; j += kKeys) {
    walk_scores_dot_tile<kKeys>(qt, rows_padded, d, keys + j * key_stride, key_stride, scale,
                                scores + j * rows_padded);
  }
  for (; j < n; ++j) {
    walk_scores_dot_tile<1>(qt, rows_padded, d, keys + j * key_stride, key_stride, scale,
                            scores + j * rows_padded);
  }
}

inline bool walk_pack_values(const TensorView& t, std::int64_t head, std::int64_t key0,
                             std::int64_t end, std::int64_t dvp, std::uint32_t* pairs) {
  TensorView block = t;  // from key0, ending at `end`: later keys are packed as zeros
  block.data = static_cast<const std::uint16_t*>(t.data) + key0 * t.row_stride;
  block.len = end - key0;
  return Bf16DotPath::pack_v_panel(block, head, 0, kPanel, dvp, pairs, nullptr).finite;
}

inline void walk_rows_axpy_dot(const float* w, std::int64_t w_stride, const std::uint32_t* values,
                               std::int64_t dvp, const float* alpha, std::int64_t rows, float* o,
                               std::int64_t o_stride, std::uint32_t* probs) {
  constexpr std::int64_t kPairs = kWalkDotBlock / 2;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int group = static_cast<int>(std::min<std::int64_t>(kRows, rows - r0));
    std::uint32_t* group_probs = probs + r0 * kPairs;  // kept: masked_axpy reuses them
    for (int r = 0; r < group; ++r) {
      Bf16DotPath::store_probs(w + (r0 + r) * w_stride, kWalkDotBlock, group_probs + r * kPairs);
    }
    with_rows(group, [&]<int R>() {
      for (std::int64_t c0 = 0; c0 < dvp; c0 += kPanel) {
        Bf16DotPath::pv<R>(group_probs, kPairs, kWalkDotBlock, values + c0, dvp,
                           o + r0 * o_stride + c0, o_stride, alpha + r0);
      }
    });
  }
}

// Columns [0, V * 16) of walk_gather_axpy_dot from `acc` and `values`: every
// pair whose bit is set in `used`, in order.
template <int V>
inline void walk_gather_pairs(const std::uint32_t* __restrict weights, std::uint64_t used,
                              const std::uint32_t* __restrict values, std::int64_t dvp, float alpha,
                              float* __restrict acc) {
  __m512 a[V];
#pragma GCC unroll 8
  for (int j = 0; j < V; ++j)
    a[j] = _mm512_mul_ps(_mm512_loadu_ps(acc + j * 16), _mm512_set1_ps(alpha));
  for (; used != 0; used &= used - 1) {
    const int pair = std::countr_zero(used);
    const __m512bh w =
        reinterpret_cast<__m512bh>(_mm512_set1_epi32(static_cast<int>(weights[pair])));
    const std::uint32_t* v = values + pair * dvp;
#pragma GCC unroll 8
    for (int j = 0; j < V; ++j) {
      a[j] = _mm512_dpbf16_ps(a[j], w, reinterpret_cast<__m512bh>(_mm512_loadu_si512(v + j * 16)));
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < V; ++j) _mm512_storeu_ps(acc + j * 16, a[j]);
}

inline void walk_gather_axpy_dot(const float* p, const std::int32_t* index, std::int64_t n,
                                 const std::uint32_t* values, std::int64_t dvp, float alpha,
                                 float* acc) {
  static_assert(kWalkDotBlock <= 128, "a block's pairs are the bits of one word");
  // The keys' weights in bf16 at their places in the block, zero elsewhere.
  alignas(64) std::uint16_t weights[kWalkDotBlock] = {};
  std::uint64_t used = 0;
  for (std::int64_t i = 0; i < n; i += 16) {
    const int m = static_cast<int>(std::min<std::int64_t>(16, n - i));
    alignas(64) float chunk[16] = {};
    std::copy(p + i, p + i + m, chunk);
    const __m256bh rounded = _mm512_cvtneps_pbh(_mm512_load_ps(chunk));
    alignas(32) std::uint16_t bits[16];
    _mm256_store_si256(reinterpret_cast<__m256i*>(bits), reinterpret_cast<const __m256i&>(rounded));
    for (int t = 0; t < m; ++t) {
      const std::int32_t key = index[i + t];
      weights[key] = bits[t];
      used |= std::uint64_t{1} << (key / 2);
    }
  }
  std::uint32_t pairs[kWalkDotBlock / 2];
  __builtin_memcpy(pairs, weights, sizeof pairs);
  std::int64_t c = 0;
  for (; c + 128 <= dvp; c += 128)
    walk_gather_pairs<8>(pairs, used, values + c, dvp, alpha, acc + c);
  for (; c < dvp; c += 64) walk_gather_pairs<4>(pairs, used, values + c, dvp, alpha, acc + c);
}

// The pairs holding a key of `keys` (bit p: key 2p or 2p + 1): the odd
// bits folded onto the even ones, then the even bits packed down (pext
// without BMI2, which these targets' flags do not assume).
inline std::uint64_t pairs_of_keys(std::uint64_t keys) {
  std::uint64_t x = (keys | (keys >> 1)) & 0x5555555555555555u;
  x = (x | (x >> 1)) & 0x3333333333333333u;
  x = (x | (x >> 2)) & 0x0f0f0f0f0f0f0f0fu;
  x = (x | (x >> 4)) & 0x00ff00ff00ff00ffu;
  x = (x | (x >> 8)) & 0x0000ffff0000ffffu;
  return (x | (x >> 16)) & 0x00000000ffffffffu;
}

inline float walk_masked_axpy_dot(const float* w, const std::uint32_t* probs, std::uint64_t keys,
                                  const std::uint32_t* values, std::int64_t dvp, float alpha,
                                  float* acc) {
  static_assert(kWalkDotBlock == 64, "a block's keys are the bits of one word");
  // The row's rounded weights, zero outside `keys`: 32 keys per vector.
  alignas(64) std::uint32_t pairs[kWalkDotBlock / 2];
  __m512 sum = _mm512_setzero_ps();
  for (int half = 0; half < 2; ++half) {
    const auto bits = static_cast<__mmask32>(keys >> (32 * half));
    const __m512i kept = _mm512_maskz_mov_epi16(bits, _mm512_loadu_si512(probs + 16 * half));
    _mm512_store_si512(pairs + 16 * half, kept);
    for (int quarter = 0; quarter < 2; ++quarter) {
      const auto lanes = static_cast<__mmask16>(bits >> (16 * quarter));
      sum = _mm512_add_ps(
          sum, _mm512_maskz_mov_ps(lanes, _mm512_loadu_ps(w + 32 * half + 16 * quarter)));
    }
  }
  const std::uint64_t used = pairs_of_keys(keys);
  std::int64_t c = 0;
  for (; c + 128 <= dvp; c += 128)
    walk_gather_pairs<8>(pairs, used, values + c, dvp, alpha, acc + c);
  for (; c < dvp; c += 64) walk_gather_pairs<4>(pairs, used, values + c, dvp, alpha, acc + c);
  return reduce_add(sum);
}

template <typename DotPath>
WalkDotOps walk_dot_ops() {
  static_assert(kLanes == 16, "the bf16 dot product's targets have 512-bit vectors");
  return {&walk_scores_dot, &walk_pack_values, &walk_rows_axpy_dot, &walk_gather_axpy_dot,
          &walk_masked_axpy_dot};
}
