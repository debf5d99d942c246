// The f32 path: every input dtype is widened to f32 while K and V are packed,
// and both products run the same register tile of kRows query rows by kPanel
// columns (kRows * kColVecs vector accumulators). Included by kernel-inl.h
// inside a target's namespace. A path is the kernel's data layout and
// micro-kernels; kernel/flash_forward-inl.h is the loop around them and works
// with any path that has these members (see Bf16DotPath in
// kernel/bf16_dot_path-inl.h, AmxBf16Path in kernel/amx_path-inl.h and Int8QkPath in
// kernel/int8_path-inl.h for the others).
//
// Layouts, per head:
//  K: panels of kPanel keys, each transposed to [d][kPanel], so the Q.K^T
//     micro-kernel loads kColVecs vectors and broadcasts kRows Q values per
//     channel.
//  V: column chunks of kPanel output columns, each [keys][kPanel] over all the
//     head's keys, so P.V streams one contiguous block per (tile, chunk). (A
//     row-major V walks keys at a stride of dv floats, 512 bytes at dv = 128,
//     which lands every key of a chunk in the same few L1 sets.)

struct F32Path {
  using QkElem = float;                          // element of packed Q and K
  using VElem = float;                           // element of packed V
  using Prob = float;                            // element P.V reads the probabilities from
  static constexpr bool kSeparateProbs = false;  // P.V reads the score rows in place
  static constexpr int kKeysPerVRow = 1;         // keys per row of a V chunk

  static std::int64_t k_panel_elems(std::int64_t d) { return d * kPanel; }
  static std::int64_t v_head_elems(std::int64_t keys, std::int64_t dvp) { return keys * dvp; }
  static std::int64_t q_row_elems(std::int64_t d) { return d; }
  static std::int64_t prob_row_elems(std::int64_t keys) { return keys; }

  // Per group of heads, before packing: nothing to prepare.
  void prepare_heads(const ForwardParams&, std::int64_t, std::int64_t, ThreadingContext&) {}
  // What the path subtracted from each score of a Q row: nothing.
  static double score_offset(const float*, std::int64_t) { return 0.0; }

  // Panel of kPanel keys starting at `key0`, transposed to [d][kPanel].
  static bool pack_k_panel(const TensorView& k, std::int64_t head, std::int64_t key0, float* panel,
                           float* row) {
    bool finite = true;
    const std::int64_t d = k.dim;
    for (std::int64_t j = 0; j < kPanel; ++j) {
      const std::int64_t key = key0 + j;
      if (key < k.len) {
        finite &= load_row_f32(k, head, key, row);
      } else {
        std::fill(row, row + d, 0.0f);
      }
      for (std::int64_t c = 0; c < d; ++c) panel[c * kPanel + j] = row[c];
    }
    return finite;
  }

  // Keys [key0, key0 + kPanel) of V into every column chunk of `head_v`, which
  // holds `keys` keys (a multiple of kPanel); columns past v.dim are 0.
  static VPanel pack_v_panel(const TensorView& v, std::int64_t head, std::int64_t key0,
                             std::int64_t keys, std::int64_t dvp, float* head_v, float* row) {
    VPanel info;
    for (std::int64_t j = 0; j < kPanel; ++j) {
      const std::int64_t key = key0 + j;
      if (key < v.len) {
        info.finite &= load_row_f32(v, head, key, row);
        info.field = std::max(info.field, exponent_field(row, v.dim));
        std::fill(row + v.dim, row + dvp, 0.0f);
      } else {
        std::fill(row, row + dvp, 0.0f);
      }
      for (std::int64_t col = 0; col < dvp; col += kPanel) {
        std::copy(row + col, row + col + kPanel, v_chunk(head_v, keys, key, col, dvp));
      }
    }
    return info;
  }

  static void load_q_row(const TensorView& q, std::int64_t head, std::int64_t row, float* dst) {
    load_row_f32(q, head, row, dst);
  }

  // Where key `key0` of the chunk holding output columns [col, col + kPanel)
  // starts, and the distance between consecutive keys there.
  template <typename T>
  static T* v_chunk(T* head_v, std::int64_t keys, std::int64_t key0, std::int64_t col,
                    std::int64_t /*dvp*/) {
    return head_v + col * keys + key0 * kPanel;
  }
  static std::int64_t v_key_stride(std::int64_t /*dvp*/) { return kPanel; }

  // The `nk` keys from `key0` of every column chunk, as contiguous spans.
  template <typename T, typename F>
  static void v_tile_spans(T* head_v, std::int64_t keys, std::int64_t key0, std::int64_t nk,
                           std::int64_t dvp, F&& span) {
    for (std::int64_t col = 0; col < dvp; col += kPanel) {
      span(v_chunk(head_v, keys, key0, col, dvp), nk * kPanel);
    }
  }

  // S[r][0, kPanel) = Q[r] . K_panel for R rows (Q rows q_stride apart), and
  // the running per-lane row max folded in while the scores are in registers.
  template <int R>
  static void qk(const float* __restrict q, std::int64_t q_stride, std::int64_t d,
                 const float* __restrict panel, float* __restrict s, std::int64_t s_stride,
                 VF* __restrict row_max) {
    VF acc[R][kColVecs];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) acc[r][j] = VF{};
    for (std::int64_t c = 0; c < d; ++c) {
      VF kv[kColVecs];
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) kv[j] = load(panel + c * kPanel + j * kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const VF qb = splat(q[r * q_stride + c]);
#pragma GCC unroll 8
        for (int j = 0; j < kColVecs; ++j) acc[r][j] += qb * kv[j];
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) {
        store(s + r * s_stride + j * kLanes, acc[r][j]);
        row_max[r] = vmax(acc[r][j], row_max[r]);
      }
    }
  }

  static void store_probs(const float*, std::int64_t, float*) {}

  // acc[r][0, kPanel) = acc[r] * alpha[r] + P[r] . V_chunk for R rows (acc rows
  // acc_stride apart), over `keys` keys of the chunk.
  template <int R>
  static void pv(const float* __restrict p, std::int64_t p_stride, std::int64_t keys,
                 const float* __restrict v, std::int64_t v_stride, float* __restrict acc,
                 std::int64_t acc_stride, const float* alpha) {
    VF a[R][kColVecs];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j)
        a[r][j] = load(acc + r * acc_stride + j * kLanes) * alpha[r];
    for (std::int64_t key = 0; key < keys; ++key) {
      VF vv[kColVecs];
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) vv[j] = load(v + key * v_stride + j * kLanes);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const VF pb = splat(p[r * p_stride + key]);
#pragma GCC unroll 8
        for (int j = 0; j < kColVecs; ++j) a[r][j] += pb * vv[j];
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) store(acc + r * acc_stride + j * kLanes, a[r][j]);
  }
};
