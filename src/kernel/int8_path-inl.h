// The int8 Q.K^T path (Precision::kInt8): Q and the smoothed K quantized to
// int8 (kernel/int8_quantize.h says how, exactly), their products summed in
// int32 by dot4_u8s8 (vpdpbusd where the target has VNNI), and P.V left to
// the path the input dtype takes anyway (F32Path, or Bf16DotPath for bf16 on a
// CPU where the dot product is faster). Included by kernel-inl.h inside a
// target's namespace.
//
// vpdpbusd multiplies unsigned by signed bytes, so Q is stored offset by 128
// (u8 = q + 128, in [1, 255]) and K as it is (s8); each key's panel keeps
// 128 * (sum of its int8 values), the exact amount the offset adds, and the
// micro-kernel subtracts it once per tile. |sum| <= 256 * 255 * 127 < 2^24,
// so the int32 sums are exact and so is their conversion to float: the
// scores are float(sum) * k_scale * q_scale. Costs against the f32 path: K
// read two more times per call (mean, block scales) and every row quantized
// once, O(N * d) scalar work in all; the tile loops are unchanged.
//
// Layouts, per head:
//  K panel: [d/4][kPanel] quads (four channels of one key per 32-bit lane),
//           then kPanel int32 corrections and kPanel f32 scales (the key's
//           block's), so that any kPanel of a target reads them as vectors.
//  Q row:   d/4 quads (u8), its f32 scale, then q . mean(K) as a double (two
//           elements): the LSE adds back what the smoothing took from every
//           score of the row.

inline std::uint32_t pack_quad(const std::int8_t* v, int offset) {
  std::uint32_t quad = 0;
  for (int b = 0; b < 4; ++b) {
    quad |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(v[b] + offset)) << (8 * b);
  }
  return quad;
}

template <typename PvPath>
struct Int8QkPath {
  using QkElem = std::uint32_t;
  using VElem = typename PvPath::VElem;
  using Prob = typename PvPath::Prob;
  static constexpr bool kSeparateProbs = PvPath::kSeparateProbs;
  static constexpr int kKeysPerVRow = PvPath::kKeysPerVRow;
  static constexpr int kQOffset = 128;

  static std::int64_t k_panel_elems(std::int64_t d) { return (d / 4 + 2) * kPanel; }
  static std::int64_t v_head_elems(std::int64_t keys, std::int64_t dvp) {
    return PvPath::v_head_elems(keys, dvp);
  }
  static std::int64_t q_row_elems(std::int64_t d) { return d / 4 + 3; }
  static std::int64_t prob_row_elems(std::int64_t keys) { return PvPath::prob_row_elems(keys); }

  // Key `j` of a panel: its int8 channels, the offset correction and its scale.
  static void store_key(const std::int8_t* k8, std::int64_t d, std::int64_t j, float scale,
                        std::uint32_t* panel) {
    std::int32_t sum = 0;
    for (std::int64_t c = 0; c < d / 4; ++c) {
      panel[c * kPanel + j] = pack_quad(k8 + 4 * c, 0);
      for (int b = 0; b < 4; ++b) sum += k8[4 * c + b];
    }
    const std::int32_t correction = kQOffset * sum;
    std::memcpy(panel + d / 4 * kPanel + j, &correction, 4);
    std::memcpy(panel + (d / 4 + 1) * kPanel + j, &scale, 4);
  }

  static void store_q_row(const std::int8_t* q8, std::int64_t d, float scale, double offset,
                          std::uint32_t* dst) {
    for (std::int64_t c = 0; c < d / 4; ++c) dst[c] = pack_quad(q8 + 4 * c, kQOffset);
    std::memcpy(dst + d / 4, &scale, 4);
    std::memcpy(dst + d / 4 + 1, &offset, 8);
  }

  // What the smoothing subtracted from every score of a packed Q row: q . mean.
  static double score_offset(const std::uint32_t* q_row, std::int64_t d) {
    double offset;
    std::memcpy(&offset, q_row + d / 4 + 1, 8);
    return offset;
  }

  // Per group of heads, before packing: K's mean over the keys and the scale
  // of every block of int8::kKeyBlock keys (kernel/int8_quantize.h), each
  // block on a worker of its own (the blocks' sums are added in order, so
  // the mean does not depend on the thread count).
  void prepare_heads(const ForwardParams& p, std::int64_t head0, std::int64_t count,
                     ThreadingContext& context) {
    const std::int64_t d = p.k.dim;
    const std::int64_t len = p.k.len;
    head0_ = head0;
    blocks_ = (len + int8::kKeyBlock - 1) / int8::kKeyBlock;
    mean_.assign(static_cast<std::size_t>(count * d), 0.0f);
    scale_.assign(static_cast<std::size_t>(count * blocks_), 0.0f);
    inverse_.assign(static_cast<std::size_t>(count * blocks_), 0.0f);
    std::vector<double> sums(static_cast<std::size_t>(count * blocks_ * d), 0.0);
    const auto for_each_key = [&](std::int64_t item, auto&& body) {
      const std::int64_t h = item / blocks_;
      const std::int64_t key0 = item % blocks_ * int8::kKeyBlock;
      float row[kMaxHeadDim];
      for (std::int64_t key = key0; key < std::min(len, key0 + int8::kKeyBlock); ++key) {
        load_row_f32(p.k, head0 + h, key, row);
        body(h, row);
      }
    };
    context.run(p.threads, count * blocks_, [&](std::int64_t item, int) {
      for_each_key(item, [&](std::int64_t, const float* row) {
        int8::add_row(row, d, sums.data() + item * d);
      });
    });
    for (std::int64_t h = 0; h < count; ++h) {
      int8::finish_mean(sums.data() + h * blocks_ * d, blocks_, d, len, mean_.data() + h * d);
    }
    context.run(p.threads, count * blocks_, [&](std::int64_t item, int) {
      float amax = 0.0f;
      for_each_key(item, [&](std::int64_t h, const float* row) {
        const float a = int8::centred_amax(row, mean_.data() + h * d, d);
        if (!(a <= amax)) amax = a;
      });
      const int8::Scale s = int8::scale_for(amax);
      scale_[static_cast<std::size_t>(item)] = s.scale;
      inverse_[static_cast<std::size_t>(item)] = s.inverse;
    });
  }

  bool pack_k_panel(const TensorView& k, std::int64_t head, std::int64_t key0, std::uint32_t* panel,
                    float* row) const {
    const std::int64_t d = k.dim;
    const std::int64_t h = head - head0_;
    const float* mean = mean_.data() + h * d;
    std::int8_t k8[kMaxHeadDim];
    bool finite = true;
    for (std::int64_t j = 0; j < kPanel; ++j) {
      const std::int64_t key = key0 + j;
      if (key >= k.len) {
        std::fill(k8, k8 + d, std::int8_t{0});
        store_key(k8, d, j, 0.0f, panel);
        continue;
      }
      finite &= load_row_f32(k, head, key, row);
      const std::size_t block = static_cast<std::size_t>(h * blocks_ + key / int8::kKeyBlock);
      int8::quantize(row, mean, d, inverse_[block], k8);
      store_key(k8, d, j, scale_[block], panel);
    }
    return finite;
  }

  static bool pack_v_panel(const TensorView& v, std::int64_t head, std::int64_t key0,
                           std::int64_t keys, std::int64_t dvp, VElem* head_v, float* row) {
    return PvPath::pack_v_panel(v, head, key0, keys, dvp, head_v, row);
  }

  void load_q_row(const TensorView& q, std::int64_t head, std::int64_t row,
                  std::uint32_t* dst) const {
    const std::int64_t d = q.dim;
    float x[kMaxHeadDim];
    std::int8_t q8[kMaxHeadDim];
    load_row_f32(q, head, row, x);
    const int8::Scale s = int8::scale_for(int8::centred_amax(x, nullptr, d));
    int8::quantize(x, nullptr, d, s.inverse, q8);
    store_q_row(q8, d, s.scale, int8::dot_with_mean(x, mean_.data() + (head - head0_) * d, d), dst);
  }

  template <typename T>
  static T* v_chunk(T* head_v, std::int64_t keys, std::int64_t key0, std::int64_t col,
                    std::int64_t dvp) {
    return PvPath::v_chunk(head_v, keys, key0, col, dvp);
  }
  static std::int64_t v_key_stride(std::int64_t dvp) { return PvPath::v_key_stride(dvp); }
  template <typename T, typename F>
  static void v_tile_spans(T* head_v, std::int64_t keys, std::int64_t key0, std::int64_t nk,
                           std::int64_t dvp, F&& span) {
    PvPath::v_tile_spans(head_v, keys, key0, nk, dvp, span);
  }

  // S[r][0, kPanel) = q_scale[r] * k_scale * (Q[r] . K_panel), the sums in
  // int32, for R rows (q_stride apart); the per-lane row max folded in.
  template <int R>
  static void qk(const std::uint32_t* __restrict q, std::int64_t q_stride, std::int64_t d,
                 const std::uint32_t* __restrict panel, float* __restrict s, std::int64_t s_stride,
                 VF* __restrict row_max) {
    const std::int64_t quads = d / 4;
    VI acc[R][kColVecs];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) acc[r][j] = VI{};
    for (std::int64_t c = 0; c < quads; ++c) {
      VI kv[kColVecs];
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) kv[j] = load_i(panel + c * kPanel + j * kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const VI qb = splat_i(static_cast<std::int32_t>(q[r * q_stride + c]));
#pragma GCC unroll 8
        for (int j = 0; j < kColVecs; ++j) acc[r][j] = dot4_u8s8(acc[r][j], qb, kv[j]);
      }
    }
    const std::uint32_t* corrections = panel + quads * kPanel;
    const std::uint32_t* scales = panel + (quads + 1) * kPanel;
#pragma GCC unroll 8
    for (int j = 0; j < kColVecs; ++j) {
      const VI correction = load_i(corrections + j * kLanes);
      VF k_scale;
      __builtin_memcpy(&k_scale, scales + j * kLanes, sizeof k_scale);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        float q_scale;
        std::memcpy(&q_scale, q + r * q_stride + quads, 4);
        const VF score = __builtin_convertvector(acc[r][j] - correction, VF) * k_scale * q_scale;
        store(s + r * s_stride + j * kLanes, score);
        row_max[r] = vmax(score, row_max[r]);
      }
    }
  }

  static void store_probs(const float* row, std::int64_t keys, Prob* probs) {
    PvPath::store_probs(row, keys, probs);
  }

  template <int R>
  static void pv(const Prob* __restrict probs, std::int64_t p_stride, std::int64_t keys,
                 const VElem* __restrict v, std::int64_t v_stride, float* __restrict acc,
                 std::int64_t acc_stride, const float* alpha) {
    PvPath::template pv<R>(probs, p_stride, keys, v, v_stride, acc, acc_stride, alpha);
  }

 private:
  std::int64_t head0_ = 0;
  std::int64_t blocks_ = 0;
  std::vector<float> mean_;     // [head of the group][d]
  std::vector<float> scale_;    // [head of the group][key block]
  std::vector<float> inverse_;  // the same, 127 / amax
};

// TargetOps::int8_dot: out[i * keys + j] = sum_c q[i][c] * k[j][c], exactly,
// through this target's packing and Q.K^T micro-kernel (scales of 1, no
// smoothing), so the tests can check the int8 arithmetic of every target
// bit for bit.
inline void int8_dot(const std::int8_t* q, std::int64_t rows, const std::int8_t* k,
                     std::int64_t keys, std::int64_t d, std::int32_t* out) {
  using Path = Int8QkPath<F32Path>;
  const std::int64_t panels = (keys + kPanel - 1) / kPanel;
  const std::int64_t q_stride = Path::q_row_elems(d);
  std::vector<std::uint32_t> packed_k(static_cast<std::size_t>(panels * Path::k_panel_elems(d)));
  std::vector<std::uint32_t> packed_q(static_cast<std::size_t>(rows * q_stride));
  std::vector<std::int8_t> zeros(static_cast<std::size_t>(d), 0);
  for (std::int64_t key = 0; key < panels * kPanel; ++key) {
    Path::store_key(key < keys ? k + key * d : zeros.data(), d, key % kPanel, 1.0f,
                    packed_k.data() + key / kPanel * Path::k_panel_elems(d));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    Path::store_q_row(q + r * d, d, 1.0f, 0.0, packed_q.data() + r * q_stride);
  }
  std::vector<float> scores(static_cast<std::size_t>(kRows * kPanel));
  for (std::int64_t r0 = 0; r0 < rows; r0 += kRows) {
    const int n = static_cast<int>(std::min<std::int64_t>(kRows, rows - r0));
    for (std::int64_t panel = 0; panel < panels; ++panel) {
      VF row_max[kRows];
      for (VF& m : row_max) m = splat(kNegInf);
      with_rows(n, [&]<int R>() {
        Path::template qk<R>(packed_q.data() + r0 * q_stride, q_stride, d,
                             packed_k.data() + panel * Path::k_panel_elems(d), scores.data(),
                             kPanel, row_max);
      });
      for (int r = 0; r < n; ++r) {
        for (std::int64_t j = 0; j < kPanel && panel * kPanel + j < keys; ++j) {
          out[(r0 + r) * keys + panel * kPanel + j] =
              static_cast<std::int32_t>(scores[static_cast<std::size_t>(r * kPanel + j)]);
        }
      }
    }
  }
}

// The int8 multiply-add peak: kPeakChains independent chains of dot4_u8s8,
// eight operations (four multiply-adds) per 32-bit lane each. A zero operand
// (through a volatile, so the compiler cannot know) keeps the sums constant.
inline volatile std::int32_t g_int8_operand = 0x01010101;
inline volatile std::int32_t g_int8_zero = 0;

inline float int8_peak_run(std::int64_t rounds) {
  constexpr int kChains = Traits::kPeakChains;
  const VI a = splat_i(g_int8_operand);
  const VI b = splat_i(g_int8_zero);
  VI acc[kChains];
#pragma GCC unroll 32
  for (int c = 0; c < kChains; ++c) acc[c] = splat_i(c);
  for (std::int64_t r = 0; r < rounds; ++r) {
#pragma GCC unroll 32
    for (int c = 0; c < kChains; ++c) acc[c] = dot4_u8s8(acc[c], a, b);
  }
  VI total = acc[0];
#pragma GCC unroll 32
  for (int c = 1; c < kChains; ++c) total += acc[c];
  return static_cast<float>(reduce_add(__builtin_convertvector(total, VF)));
}

inline FmaLoop int8_peak_loop() { return {&int8_peak_run, 8.0 * Traits::kPeakChains * kLanes}; }
