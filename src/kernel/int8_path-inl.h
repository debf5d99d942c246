// The int8 Q.K^T path (Precision::kInt8): Q and K smoothed, migrated and
// quantized to int8 (kernel/int8_quantize.h says how, exactly), their
// products summed in int32 by dot4_u8s8 (vpdpbusd where the target has VNNI),
// and P.V left to the path the input dtype takes anyway (F32Path, or
// Bf16DotPath for bf16 on a CPU where the dot product is faster). Included by
// kernel-inl.h inside a target's namespace.
//
// vpdpbusd multiplies unsigned by signed bytes, so Q is stored offset by 128
// (u8 = q + 128, in [1, 255]) and K as it is (s8); each key's panel keeps
// 128 * (sum of its int8 values), the exact amount the offset adds, and the
// micro-kernel subtracts it once per tile. |sum| <= 256 * 255 * 127 < 2^24,
// so the int32 sums are exact and so is their conversion to float: the
// scores are float(sum) * k_scale * q_scale + bias (the key's mu_q . k).
//
// Where int8 cannot keep its accuracy (a very sharp softmax), a tile falls
// back to f32: per (head, q-block, kv tile) the bound on any score's
// quantization error, scale * (q_scale / 2 * |k|_1 + k_scale / 2 * |q8 *
// q_scale|_1) maximised over the tile's rows and keys, is compared with
// kF32Bound, and a tile above it runs F32Path's product on the unquantized
// q and k - mu_k (Int8Report counts them). The f32 copy of K is packed only
// for heads whose bound over all rows and keys can pass kF32Bound.
//
// Layouts, per head:
//  K panel: [d/4][kPanel] quads (four channels of one key per 32-bit lane),
//           then kPanel int32 corrections, kPanel f32 scales, kPanel f32
//           biases, kPanel f32 bounds on |k|_1 and one row whose first lane
//           is the panel's index (head of the group * panels + panel) in the
//           f32 copy, so that any kPanel of a target reads them as vectors.
//  Q row:   d/4 quads (u8), its f32 scale, |q8 * scale|_1, q . mu_k as a
//           double (two elements: the LSE adds back what K's smoothing took
//           from every score), and head * q_len + row as an int64 (two
//           elements: a fallback tile reads the f32 row from Q again, which
//           keeps the rows the int8 tiles read compact).

// A tile whose score error bound (natural-log units of the softmax) passes
// this runs in f32. Measured (docs/kernel.md): Gaussian Q and K scaled up
// until int8's cosine to float64 drops to 0.9993 reach a bound of about 3.5.
inline constexpr float kF32Bound = 3.0f;

inline std::uint32_t pack_quad(const std::int8_t* v, int offset) {
  std::uint32_t quad = 0;
  for (int b = 0; b < 4; ++b) {
    quad |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(v[b] + offset)) << (8 * b);
  }
  return quad;
}

// The largest Q-side terms of a q-block's error bound.
struct Int8QBound {
  float scale = 0.0f;  // max q_scale
  float l1 = 0.0f;     // max |q8 * q_scale|_1
};

// TileSums: void for the vector micro-kernel (dot4_u8s8), or a type whose
// int8_sums<R>() computes the same int32 sums another way (AmxTiles,
// kernel/amx_path-inl.h); the scores are the same function of those sums.
template <typename PvPath, typename TileSums = void>
struct Int8QkPath {
  using QkElem = std::uint32_t;
  using VElem = typename PvPath::VElem;
  using Prob = typename PvPath::Prob;
  static constexpr bool kSeparateProbs = PvPath::kSeparateProbs;
  static constexpr int kKeysPerVRow = PvPath::kKeysPerVRow;
  static constexpr int kQOffset = 128;
  static constexpr bool kF32Fallback = true;

  static std::int64_t k_panel_elems(std::int64_t d) { return (d / 4 + 5) * kPanel; }
  static std::int64_t v_head_elems(std::int64_t keys, std::int64_t dvp) {
    return PvPath::v_head_elems(keys, dvp);
  }
  static std::int64_t q_row_elems(std::int64_t d) { return d / 4 + 6; }
  static std::int64_t prob_row_elems(std::int64_t keys) { return PvPath::prob_row_elems(keys); }

  // Key `j` of a panel: its int8 channels, the offset correction, its scale,
  // bias and a bound on |k|_1, scale * (sum |k8| + d / 2); `id` is the
  // panel's index in the f32 copy.
  static void store_key(const std::int8_t* k8, std::int64_t d, std::int64_t j, float scale,
                        float bias, std::uint32_t id, std::uint32_t* panel) {
    std::int32_t sum = 0, levels = 0;
    for (std::int64_t c = 0; c < d / 4; ++c) {
      panel[c * kPanel + j] = pack_quad(k8 + 4 * c, 0);
      for (int b = 0; b < 4; ++b) {
        sum += k8[4 * c + b];
        levels += k8[4 * c + b] < 0 ? -k8[4 * c + b] : k8[4 * c + b];
      }
    }
    const float l1 = scale * (static_cast<float>(levels) + 0.5f * static_cast<float>(d));
    const std::int32_t correction = kQOffset * sum;
    std::memcpy(panel + d / 4 * kPanel + j, &correction, 4);
    std::memcpy(panel + (d / 4 + 1) * kPanel + j, &scale, 4);
    std::memcpy(panel + (d / 4 + 2) * kPanel + j, &bias, 4);
    std::memcpy(panel + (d / 4 + 3) * kPanel + j, &l1, 4);
    panel[(d / 4 + 4) * kPanel + j] = id;
  }

  // A packed Q row: its int8 values and scale, the LSE's offset, and where
  // the row is in Q (head * q_len + row).
  static void store_q_row(const std::int8_t* q8, std::int64_t d, float scale, double offset,
                          std::int64_t at, std::uint32_t* dst) {
    std::int32_t levels = 0;
    for (std::int64_t c = 0; c < d; ++c) levels += q8[c] < 0 ? -q8[c] : q8[c];
    const float l1 = static_cast<float>(levels) * scale;
    for (std::int64_t c = 0; c < d / 4; ++c) dst[c] = pack_quad(q8 + 4 * c, kQOffset);
    std::memcpy(dst + d / 4, &scale, 4);
    std::memcpy(dst + d / 4 + 1, &l1, 4);
    std::memcpy(dst + d / 4 + 2, &offset, 8);
    std::memcpy(dst + d / 4 + 4, &at, 8);
  }

  // What K's smoothing subtracted from every score of a packed Q row: q . mu_k.
  static double score_offset(const std::uint32_t* q_row, std::int64_t d) {
    double offset;
    std::memcpy(&offset, q_row + d / 4 + 2, 8);
    return offset;
  }

  // Per group of heads, before packing (kernel/int8_quantize.h): the means of
  // K and Q, the migration factors, and which heads need the f32 copy of K,
  // from one pass over K and Q per block of rows, each block on a worker of
  // its own, the blocks combined in order: nothing depends on the threads.
  void prepare_heads(const ForwardParams& p, std::int64_t head0, std::int64_t count,
                     ThreadingContext& context) {
    const std::int64_t d = p.k.dim;
    head0_ = head0;
    d_ = d;
    scale_softmax_ = p.scale;
    q_ = p.q;
    k_blocks_ = blocks_of(p.k.len);
    q_blocks_ = blocks_of(p.q.len);
    panels_ = (p.k.len + kPanel - 1) / kPanel;
    statistics(p, count, context);
    fallback_heads(count);
  }

  bool pack_k_panel(const TensorView& k, std::int64_t head, std::int64_t key0, std::uint32_t* panel,
                    float* row) const {
    const std::int64_t d = k.dim;
    const std::int64_t h = head - head0_;
    const float* mean = mean_k_.data() + h * d;
    const float* mul = mul_.data() + h * d;
    const std::int64_t id = h * panels_ + key0 / kPanel;
    float* f32 = needs_f32_[static_cast<std::size_t>(h)] ? f32_k_ + id * d * kPanel : nullptr;
    std::int8_t k8[kMaxHeadDim];
    bool finite = true;
    for (std::int64_t j = 0; j < kPanel; ++j) {
      const std::int64_t key = key0 + j;
      if (key >= k.len) {
        std::fill(k8, k8 + d, std::int8_t{0});
        store_key(k8, d, j, 0.0f, 0.0f, static_cast<std::uint32_t>(id), panel);
        if (f32 != nullptr) {
          for (std::int64_t c = 0; c < d; ++c) f32[c * kPanel + j] = 0.0f;
        }
        continue;
      }
      finite &= load_row_f32(k, head, key, row);
      const int8::Scale s = int8::scale_for(int8::centred_amax(row, mean, mul, d));
      int8::quantize(row, mean, mul, d, s.inverse, k8);
      const auto bias = static_cast<float>(int8::centred_dot(row, mean, mean_q_.data() + h * d, d));
      store_key(k8, d, j, s.scale, bias, static_cast<std::uint32_t>(id), panel);
      if (f32 != nullptr) {
        for (std::int64_t c = 0; c < d; ++c) f32[c * kPanel + j] = row[c] - mean[c];
      }
    }
    return finite;
  }

  static VPanel pack_v_panel(const TensorView& v, std::int64_t head, std::int64_t key0,
                             std::int64_t keys, std::int64_t dvp, VElem* head_v, float* row) {
    return PvPath::pack_v_panel(v, head, key0, keys, dvp, head_v, row);
  }

  void load_q_row(const TensorView& q, std::int64_t head, std::int64_t row,
                  std::uint32_t* dst) const {
    const std::int64_t d = q.dim;
    const std::int64_t h = head - head0_;
    float x[kMaxHeadDim];
    std::int8_t q8[kMaxHeadDim];
    load_row_f32(q, head, row, x);
    const float* mean = mean_q_.data() + h * d;
    const float* inv = inv_mul_.data() + h * d;
    const int8::Scale s = int8::scale_for(int8::centred_amax(x, mean, inv, d));
    int8::quantize(x, mean, inv, d, s.inverse, q8);
    store_q_row(q8, d, s.scale, int8::dot_with_mean(x, mean_k_.data() + h * d, d),
                head * q.len + row, dst);
  }

  // The Q-side terms of the error bound over `rows` packed rows.
  static Int8QBound q_block_bound(const std::uint32_t* q, std::int64_t rows, std::int64_t q_stride,
                                  std::int64_t d) {
    Int8QBound b;
    for (std::int64_t r = 0; r < rows; ++r) {
      float scale, l1;
      std::memcpy(&scale, q + r * q_stride + d / 4, 4);
      std::memcpy(&l1, q + r * q_stride + d / 4 + 1, 4);
      b.scale = std::max(b.scale, scale);
      b.l1 = std::max(b.l1, l1);
    }
    return b;
  }

  // Whether the tile of `count` panels from `first` needs f32 for rows whose
  // Q-side terms are `qb`.
  bool tile_needs_f32(const Int8QBound& qb, const std::uint32_t* first, std::int64_t count,
                      std::int64_t d) const {
    const std::uint32_t id = first[(d / 4 + 4) * kPanel];
    if (!needs_f32_[static_cast<std::size_t>(id / panels_)]) return false;
    float k_scale = 0.0f, k_l1 = 0.0f;
    for (std::int64_t i = 0; i < count; ++i) {
      const std::uint32_t* panel = first + i * k_panel_elems(d);
      for (std::int64_t j = 0; j < kPanel; ++j) {
        float s, l1;
        std::memcpy(&s, panel + (d / 4 + 1) * kPanel + j, 4);
        std::memcpy(&l1, panel + (d / 4 + 3) * kPanel + j, 4);
        k_scale = std::max(k_scale, s);
        k_l1 = std::max(k_l1, l1);
      }
    }
    return exceeds_bound(qb.scale, k_l1, k_scale, qb.l1);
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

  // acc[r] = Q8[r] . K8 panel in int32, by dot4_u8s8.
  template <int R>
  static void vector_sums(const std::uint32_t* __restrict q, std::int64_t q_stride,
                          std::int64_t quads, const std::uint32_t* __restrict panel,
                          VI (&acc)[R][kColVecs]) {
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
  }

  // S[r][0, kPanel) = q_scale[r] * k_scale * (Q[r] . K_panel) + bias, the sums
  // in int32, for R rows (q_stride apart); the per-lane row max folded in.
  template <int R>
  static void qk(const std::uint32_t* __restrict q, std::int64_t q_stride, std::int64_t d,
                 const std::uint32_t* __restrict panel, float* __restrict s, std::int64_t s_stride,
                 VF* __restrict row_max) {
    const std::int64_t quads = d / 4;
    VI acc[R][kColVecs];
    if constexpr (std::is_void_v<TileSums>) {
      vector_sums<R>(q, q_stride, quads, panel, acc);
    } else {
      alignas(64) std::int32_t sums[R][kPanel];
      TileSums::template int8_sums<R>(q, q_stride, quads, panel, &sums[0][0]);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int j = 0; j < kColVecs; ++j) acc[r][j] = load_i(&sums[r][j * kLanes]);
    }
    const std::uint32_t* corrections = panel + quads * kPanel;
    const std::uint32_t* scales = panel + (quads + 1) * kPanel;
    const std::uint32_t* biases = panel + (quads + 2) * kPanel;
#pragma GCC unroll 8
    for (int j = 0; j < kColVecs; ++j) {
      const VI correction = load_i(corrections + j * kLanes);
      VF k_scale, bias;
      __builtin_memcpy(&k_scale, scales + j * kLanes, sizeof k_scale);
      __builtin_memcpy(&bias, biases + j * kLanes, sizeof bias);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        float q_scale;
        std::memcpy(&q_scale, q + r * q_stride + quads, 4);
        const VF score =
            __builtin_convertvector(acc[r][j] - correction, VF) * k_scale * q_scale + bias;
        store(s + r * s_stride + j * kLanes, score);
        row_max[r] = vmax(score, row_max[r]);
      }
    }
  }

  // The same scores in f32 (a fallback tile): Q[r] . (K_panel - mu_k) on the
  // unquantized values (the rows read from Q again), by F32Path's micro-kernel.
  template <int R>
  void qk_f32(const std::uint32_t* q_rows, std::int64_t q_stride, std::int64_t d,
              const std::uint32_t* panel, float* s, std::int64_t s_stride, VF* row_max) const {
    float rows[R][kMaxHeadDim];
    for (int r = 0; r < R; ++r) {
      std::int64_t at;
      std::memcpy(&at, q_rows + r * q_stride + d / 4 + 4, 8);
      load_row_f32(q_, at / q_.len, at % q_.len, rows[r]);
    }
    const std::uint32_t id = panel[(d / 4 + 4) * kPanel];
    F32Path::template qk<R>(rows[0], kMaxHeadDim, d,
                            f32_k_ + static_cast<std::int64_t>(id) * d * kPanel, s, s_stride,
                            row_max);
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
  static std::int64_t blocks_of(std::int64_t len) {
    return (len + int8::kKeyBlock - 1) / int8::kKeyBlock;
  }

  bool exceeds_bound(float q_scale, float k_l1, float k_scale, float q_l1) const {
    const double bound =
        static_cast<double>(scale_softmax_) *
        (0.5 * q_scale * static_cast<double>(k_l1) + 0.5 * k_scale * static_cast<double>(q_l1));
    return !(bound <= kF32Bound);  // NaN (unchecked data) too
  }

  // mean_k_, mean_q_, mul_ and inv_mul_ (kernel/int8_quantize.h): per block
  // of rows the double sums and each channel's range, one pass.
  void statistics(const ForwardParams& p, std::int64_t count, ThreadingContext& context) {
    const std::int64_t d = d_;
    const std::int64_t blocks = k_blocks_ + q_blocks_;  // per head: K's, then Q's
    const auto n = static_cast<std::size_t>(count * blocks * d);
    std::vector<double> sums(n, 0.0);
    std::vector<float> lo(n, std::numeric_limits<float>::infinity());
    std::vector<float> hi(n, -std::numeric_limits<float>::infinity());
    context.run(p.threads, count * blocks, [&](std::int64_t item, int) {
      const std::int64_t h = item / blocks;
      const std::int64_t b = item % blocks;
      const bool is_k = b < k_blocks_;
      const TensorView& t = is_k ? p.k : p.q;
      const std::int64_t r0 = (is_k ? b : b - k_blocks_) * int8::kKeyBlock;
      float row[kMaxHeadDim];
      for (std::int64_t r = r0; r < std::min(t.len, r0 + int8::kKeyBlock); ++r) {
        load_row_f32(t, head0_ + h, r, row);
        int8::add_row_range(row, d, sums.data() + item * d, lo.data() + item * d,
                            hi.data() + item * d);
      }
    });
    mean_k_.assign(static_cast<std::size_t>(count * d), 0.0f);
    mean_q_.assign(mean_k_.size(), 0.0f);
    k_amax_.assign(mean_k_.size(), 0.0f);
    q_amax_.assign(mean_k_.size(), 0.0f);
    mul_.resize(mean_k_.size());
    inv_mul_.resize(mean_k_.size());
    for (std::int64_t h = 0; h < count; ++h) {
      const std::int64_t k0 = h * blocks * d, q0 = k0 + k_blocks_ * d;
      float* mk = mean_k_.data() + h * d;
      float* mq = mean_q_.data() + h * d;
      int8::finish_mean(sums.data() + k0, k_blocks_, d, p.k.len, mk);
      int8::finish_mean(sums.data() + q0, q_blocks_, d, p.q.len, mq);
      int8::finish_amax(lo.data() + k0, hi.data() + k0, k_blocks_, mk, d, k_amax_.data() + h * d);
      int8::finish_amax(lo.data() + q0, hi.data() + q0, q_blocks_, mq, d, q_amax_.data() + h * d);
    }
    for (std::size_t i = 0; i < mul_.size(); ++i) {
      mul_[i] = int8::migration(q_amax_[i], k_amax_[i]);
      inv_mul_[i] = 1.0f / mul_[i];  // a power of two: exact
    }
  }

  // needs_f32_: whether any tile of a head can pass the bound, from the
  // channels' ranges (every key's scale is at most max_c k_amax_c * m_c / 127
  // and its |k|_1 at most sum_c k_amax_c * m_c; Q's likewise, its |q8 *
  // q_scale|_1 at most that sum plus d * q_scale / 2); and the f32 copy of
  // K for those heads.
  void fallback_heads(std::int64_t count) {
    const std::int64_t d = d_;
    needs_f32_.assign(static_cast<std::size_t>(count), false);
    bool any = false;
    for (std::int64_t h = 0; h < count; ++h) {
      double k_max = 0.0, k_sum = 0.0, q_max = 0.0, q_sum = 0.0;
      for (std::int64_t c = 0; c < d; ++c) {
        const std::size_t i = static_cast<std::size_t>(h * d + c);
        const double k = static_cast<double>(k_amax_[i]) * mul_[i];
        const double q = static_cast<double>(q_amax_[i]) * inv_mul_[i];
        k_max = std::max(k_max, k);
        k_sum += k;
        q_max = std::max(q_max, q);
        q_sum += q;
      }
      const double q_scale = q_max / int8::kLevels, k_scale = k_max / int8::kLevels;
      const double bound = static_cast<double>(scale_softmax_) *
                           (0.5 * q_scale * k_sum + 0.5 * k_scale * (q_sum + 0.5 * d * q_scale));
      // A little margin: the tiles' terms are summed in float.
      const bool needs = !(bound * 1.01 <= kF32Bound);
      needs_f32_[static_cast<std::size_t>(h)] = needs;
      any = any || needs;
    }
    f32_k_ = any ? f32_buffer_.get<float>(static_cast<std::size_t>(count * panels_ * d * kPanel))
                 : nullptr;
  }

  std::int64_t head0_ = 0, d_ = 0;
  float scale_softmax_ = 1.0f;
  TensorView q_;  // the call's Q, for the f32 rows of fallback tiles
  std::int64_t k_blocks_ = 0, q_blocks_ = 0, panels_ = 0;
  std::vector<float> mean_k_, mean_q_;  // [head of the group][d]
  std::vector<float> k_amax_, q_amax_;  // [head of the group][d]: max |x - mean|
  std::vector<float> mul_, inv_mul_;    // [head of the group][d]: K's and Q's migration
  std::vector<bool> needs_f32_;         // [head of the group]
  runtime::AlignedBuffer f32_buffer_;
  float* f32_k_ = nullptr;  // [head of the group][panel][d][kPanel] of k - mu_k, or null
};

// TargetOps::int8_dot: out[i * keys + j] = sum_c q[i][c] * k[j][c], exactly,
// through this target's packing and Q.K^T micro-kernel (scales of 1, no
// smoothing), so the tests can check the int8 arithmetic of every target
// bit for bit.
template <typename TileSums = void>
void int8_dot(const std::int8_t* q, std::int64_t rows, const std::int8_t* k, std::int64_t keys,
              std::int64_t d, std::int32_t* out) {
  using Path = Int8QkPath<F32Path, TileSums>;
  const std::int64_t panels = (keys + kPanel - 1) / kPanel;
  const std::int64_t q_stride = Path::q_row_elems(d);
  std::vector<std::uint32_t> packed_k(static_cast<std::size_t>(panels * Path::k_panel_elems(d)));
  std::vector<std::uint32_t> packed_q(static_cast<std::size_t>(rows * q_stride));
  std::vector<std::int8_t> zeros(static_cast<std::size_t>(d), 0);
  for (std::int64_t key = 0; key < panels * kPanel; ++key) {
    Path::store_key(key < keys ? k + key * d : zeros.data(), d, key % kPanel, 1.0f, 0.0f, 0,
                    packed_k.data() + key / kPanel * Path::k_panel_elems(d));
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    Path::store_q_row(q + r * d, d, 1.0f, 0.0, r, packed_q.data() + r * q_stride);
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
