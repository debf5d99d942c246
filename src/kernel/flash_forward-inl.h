// Block-sparse flash-attention forward, written once and compiled once per
// SIMD target (Highway's -inl.h pattern, with GCC vector extensions instead of
// Highway: Debian's Highway 1.0.3 has no Zen 4 target and never emits the BF16
// dot product, and the micro-kernels below need exact control of registers).
//
// The including translation unit opens `namespace tilesplash::kernel::<isa>`,
// defines `kLanes` (floats per vector) and `kColVecs` (vectors per micro-tile
// row), optionally defines TILESPLASH_KERNEL_BF16_DOT with a `Bf16DotPath`
// (see kernel_avx512bf16.cc), and includes this file. No #includes here: the
// TU includes kernel/flash_prelude.h before opening the namespace.
//
// Work and memory. Per (head, q-block) item, each visited tile costs
// 4 * rows * keys * d flops. K is packed once per head into panels of kPanel
// keys, transposed ([d][kPanel]), so a micro-kernel of kRows query rows by
// kPanel keys keeps kRows * kColVecs accumulators in registers and loads
// kColVecs vectors per kRows broadcasts; V is packed row-major with its width
// padded to kPanel, and P * V runs the same register tile over output columns.
// A tile of block_kv keys (K and V, 2 * block_kv * d * 4 bytes) stays in L2
// while every row group of the q-block passes over it. The softmax scale is
// folded into the exponent (one FMA per score) and exp2 is a polynomial.
//
// Tile modes. Full tiles run QK, softmax and PV with no mask work; partial
// tiles clear scores with their plan bitmask; `element` mode evaluates the
// mask's vectorised predicate on every pair of every visited tile; `bitmask`
// mode runs every visited tile through the bitmask path. The last, ragged kv
// tile also clears the padding columns.

constexpr int kRows = 6;
constexpr std::int64_t kPanel = static_cast<std::int64_t>(kLanes) * kColVecs;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

typedef float VF __attribute__((vector_size(kLanes * 4)));
typedef std::int32_t VI __attribute__((vector_size(kLanes * 4)));
typedef std::uint8_t VB __attribute__((vector_size(kLanes)));

inline VF load(const float* p) {
  VF v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, VF v) { __builtin_memcpy(p, &v, sizeof v); }
// A shuffle of lane 0 compiles to one broadcast; `VF{} + x` would add 0.0 first.
inline VF splat(float x) { return __builtin_shuffle(VF{x}, VI{}); }

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

// 2^t for t <= ~0. Cephes' exp2f polynomial on [-0.5, 0.5] (relative error
// ~2e-7); t is clamped at -127 where the exponent field becomes 0, so masked
// scores (-inf) give exactly 0.
inline VF exp2_vec(VF t) {
  t = t < -127.0f ? splat(-127.0f) : t;
  const VF magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const VF n = (t + magic) - magic;
  const VF f = t - n;
  VF p = splat(1.535336188319500e-4f);
  p = p * f + 1.339887440266574e-3f;
  p = p * f + 9.618437357674640e-3f;
  p = p * f + 5.550332471162809e-2f;
  p = p * f + 2.402264791363012e-1f;
  p = p * f + 6.931472028550421e-1f;
  p = p * f + 1.0f;
  const VI exponent = (__builtin_convertvector(n, VI) + 127) << 23;
  return p * reinterpret_cast<VF>(exponent);  // same-size vector cast is a bit cast
}

// ---------------------------------------------------------------------------
// Row operations on one row of scores (length a multiple of kLanes).

inline void clear_columns_from(float* row, std::int64_t from, std::int64_t to) {
  for (std::int64_t i = from; i < to; ++i) row[i] = kNegInf;
}

inline void apply_bits(float* row, const std::uint64_t* bits, std::int64_t n) {
  VI lane_bit;
  for (int i = 0; i < kLanes; ++i) lane_bit[i] = 1 << i;
  constexpr std::uint64_t kAll = (kLanes == 64) ? ~0ull : ((1ull << kLanes) - 1);
  for (std::int64_t i = 0; i < n; i += kLanes) {
    const std::uint64_t chunk = (bits[i / 64] >> (i % 64)) & kAll;
    if (chunk == kAll) continue;
    const VI keep = ((VI{} + static_cast<std::int32_t>(chunk)) & lane_bit) != 0;
    store(row + i, keep ? load(row + i) : splat(kNegInf));
  }
}

inline void apply_keep(float* row, const std::uint8_t* keep, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += kLanes) {
    VB bytes;
    __builtin_memcpy(&bytes, keep + i, sizeof bytes);
    const VI kept = __builtin_convertvector(bytes, VI) != 0;
    store(row + i, kept ? load(row + i) : splat(kNegInf));
  }
}

inline float row_max(const float* row, std::int64_t n) {
  VF best = splat(kNegInf);
  for (std::int64_t i = 0; i < n; i += kLanes) {
    const VF x = load(row + i);
    best = x > best ? x : best;
  }
  return reduce_max(best);
}

// row[i] = 2^((row[i] - m) * c - shift), returns the sum. The max is
// subtracted before scaling, not folded into one FMA as row * c - m * c: once
// m * c is large (scores of 1e9 and up), the rounding error of m * c alone
// exceeds the exponent range and every weight becomes 0 or Inf. s - m is exact
// when s is near m (Sterbenz), which is where the weights that matter are.
inline float exp_row(float* row, std::int64_t n, float m, float c, float shift) {
  VF sum = VF{};
  const VF vm = splat(m);
  const VF vc = splat(c);
  const VF vshift = splat(shift);
  for (std::int64_t i = 0; i < n; i += kLanes) {
    const VF e = exp2_vec((load(row + i) - vm) * vc - vshift);
    store(row + i, e);
    sum += e;
  }
  return reduce_add(sum);
}

// ---------------------------------------------------------------------------
// Conversions between the caller's tensors and f32 rows.

// Widens row `row` of `head` to f32; returns false if it holds NaN or Inf.
inline bool load_row_f32(const TensorView& t, std::int64_t head, std::int64_t row, float* dst) {
  const std::int64_t offset = head * t.head_stride + row * t.row_stride;
  const std::int64_t n = t.dim;
  std::uint32_t any_special = 0;
  switch (t.dtype) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(t.data) + offset;
      for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
      break;
    }
    case DType::kBF16: {
      const std::uint16_t* src = static_cast<const std::uint16_t*>(t.data) + offset;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t wide = static_cast<std::uint32_t>(src[i]) << 16;
        __builtin_memcpy(dst + i, &wide, 4);
      }
      break;
    }
    case DType::kF16: {
      const std::uint16_t* src = static_cast<const std::uint16_t*>(t.data) + offset;
      for (std::int64_t i = 0; i < n; ++i) dst[i] = f16_to_float(src[i]);
      break;
    }
  }
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    __builtin_memcpy(&bits, dst + i, 4);
    any_special |= static_cast<std::uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
  }
  return any_special == 0;
}

inline bool row_is_finite(const TensorView& t, std::int64_t head, std::int64_t row) {
  float tmp[kMaxHeadDim];
  return load_row_f32(t, head, row, tmp);
}

// Largest biased f32 exponent field among rows [key0, key1) of `head` (|x| <
// 2^(field - 126) for every element); `row` is dim floats of scratch.
inline int max_exponent_field(const TensorView& t, std::int64_t head, std::int64_t key0,
                              std::int64_t key1, float* row) {
  std::uint32_t best = 0;
  for (std::int64_t key = key0; key < key1; ++key) {
    load_row_f32(t, head, key, row);
    for (std::int64_t i = 0; i < t.dim; ++i) {
      std::uint32_t bits;
      __builtin_memcpy(&bits, row + i, 4);
      const std::uint32_t field = (bits >> 23) & 0xffu;
      best = field > best ? field : best;
    }
  }
  return static_cast<int>(best);
}

inline void atomic_max(std::atomic<int>& target, int value) {
  int current = target.load();
  while (value > current && !target.compare_exchange_weak(current, value)) {
  }
}

// Rows whose every kept key so far scored -inf carry this in l: an overflowed
// q.k, which a masked key (also -inf) must not be mistaken for.
constexpr float kAllKeptOverflowed = -1.0f;

// True when the mask keeps at least one of the tile's first n keys in this row.
inline bool row_keeps_any(const std::uint64_t* bits, const std::uint8_t* keep, std::int64_t n) {
  if (keep != nullptr) {
    for (std::int64_t i = 0; i < n; ++i)
      if (keep[i] != 0) return true;
    return false;
  }
  if (bits == nullptr) return n > 0;  // a full tile
  for (std::int64_t i = 0; i < n; ++i)
    if ((bits[i / 64] >> (i % 64)) & 1u) return true;
  return false;
}

inline void store_out_row(const MutableTensorView& out, std::int64_t head, std::int64_t row,
                          const float* acc, float inv) {
  const std::int64_t offset = head * out.head_stride + row * out.row_stride;
  switch (out.dtype) {
    case DType::kF32: {
      float* dst = static_cast<float*>(out.data) + offset;
      for (std::int64_t i = 0; i < out.dim; ++i) dst[i] = acc[i] * inv;
      break;
    }
    case DType::kBF16: {
      std::uint16_t* dst = static_cast<std::uint16_t*>(out.data) + offset;
      for (std::int64_t i = 0; i < out.dim; ++i) dst[i] = float_to_bf16(acc[i] * inv);
      break;
    }
    case DType::kF16: {
      std::uint16_t* dst = static_cast<std::uint16_t*>(out.data) + offset;
      for (std::int64_t i = 0; i < out.dim; ++i) dst[i] = float_to_f16(acc[i] * inv);
      break;
    }
  }
}

// ---------------------------------------------------------------------------
// f32 path: every input dtype widened to f32 while packing.

struct F32Path {
  using Packed = float;
  static constexpr bool kNeedsBf16Input = false;

  static std::int64_t k_panel_elems(std::int64_t d) { return d * kPanel; }
  static std::int64_t v_row_elems(std::int64_t dvp) { return dvp; }  // per key
  static std::int64_t q_row_elems(std::int64_t d) { return d; }

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

  // Rows [key0, key0 + kPanel) of V, width padded to dvp with zeros.
  static bool pack_v_panel(const TensorView& v, std::int64_t head, std::int64_t key0,
                           std::int64_t dvp, float* out, float*) {
    bool finite = true;
    for (std::int64_t j = 0; j < kPanel; ++j) {
      float* dst = out + j * dvp;
      const std::int64_t key = key0 + j;
      if (key < v.len) {
        finite &= load_row_f32(v, head, key, dst);
        std::fill(dst + v.dim, dst + dvp, 0.0f);
      } else {
        std::fill(dst, dst + dvp, 0.0f);
      }
    }
    return finite;
  }

  static void load_q_row(const TensorView& q, std::int64_t head, std::int64_t row, float* dst) {
    load_row_f32(q, head, row, dst);
  }

  static const float* v_tile(const float* packed_v, std::int64_t key0, std::int64_t dvp) {
    return packed_v + key0 * dvp;
  }

  template <int R>
  static void qk(const float* __restrict q, std::int64_t d, const float* __restrict panel,
                 float* __restrict s, std::int64_t s_stride) {
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
        const VF qb = splat(q[r * d + c]);
#pragma GCC unroll 8
        for (int j = 0; j < kColVecs; ++j) acc[r][j] += qb * kv[j];
      }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) store(s + r * s_stride + j * kLanes, acc[r][j]);
  }

  using Prob = float;
  static constexpr bool kSeparateProbs = false;  // P.V reads the score buffer in place
  static void store_probs(const float*, std::int64_t, float*) {}

  // acc[r][col, col + kPanel) = acc * alpha[r] + P[r] . V[:, col, col + kPanel)
  // for R rows; V rows of width dvp start at the tile's first key.
  template <int R>
  static void pv(const float* __restrict p, std::int64_t p_stride, std::int64_t keys,
                 const float* __restrict v, std::int64_t dvp, std::int64_t col,
                 float* __restrict acc, const float* alpha) {
    VF a[R][kColVecs];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j)
        a[r][j] = load(acc + r * dvp + col + j * kLanes) * alpha[r];
    for (std::int64_t key = 0; key < keys; ++key) {
      VF vv[kColVecs];
#pragma GCC unroll 8
      for (int j = 0; j < kColVecs; ++j) vv[j] = load(v + key * dvp + col + j * kLanes);
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
      for (int j = 0; j < kColVecs; ++j) store(acc + r * dvp + col + j * kLanes, a[r][j]);
  }
};

// ---------------------------------------------------------------------------
// Orchestration, shared by both paths.

template <typename F>
inline void with_rows(int rows, F&& body) {
  switch (rows) {
    case 1:
      return body.template operator()<1>();
    case 2:
      return body.template operator()<2>();
    case 3:
      return body.template operator()<3>();
    case 4:
      return body.template operator()<4>();
    case 5:
      return body.template operator()<5>();
    default:
      return body.template operator()<kRows>();
  }
}

template <typename Path>
struct FlashForward {
  using Packed = typename Path::Packed;

  const ForwardParams& p;
  const TilePlan& plan;
  std::int64_t d, dv, dvp, block_q, block_kv, words;
  std::int64_t panels;        // K/V panels per head
  std::int64_t k_head_elems;  // packed K elements per head
  std::int64_t v_head_elems;
  float exp_scale;  // scale * log2(e)

  explicit FlashForward(const ForwardParams& params)
      : p(params),
        plan(*params.plan),
        d(params.q.dim),
        dv(params.v.dim),
        dvp((params.v.dim + kPanel - 1) / kPanel * kPanel),
        block_q(params.plan->blocks().block_q),
        block_kv(params.plan->blocks().block_kv),
        words(params.plan->words_per_row()),
        panels((params.k.len + kPanel - 1) / kPanel),
        k_head_elems(panels * Path::k_panel_elems(params.q.dim)),
        v_head_elems(panels * kPanel * Path::v_row_elems(dvp)),
        exp_scale(params.scale * kLog2e),
        shift_(static_cast<std::size_t>(params.q.heads), 0.0f) {}

  // Per-worker scratch, carved by ScratchLayout (floats; Packed is 4 bytes).
  struct ScratchLayout {
    std::int64_t q, scores, probs, keep, acc, m, l, alpha, total;
  };
  ScratchLayout layout() const {
    auto round = [](std::int64_t n) { return (n + 15) / 16 * 16; };  // keep 64-byte alignment
    ScratchLayout s{};
    s.q = 0;
    s.scores = s.q + round(block_q * Path::q_row_elems(d));
    s.probs = s.scores + round(block_q * block_kv);
    s.keep = s.probs + round(Path::kSeparateProbs ? block_q * block_kv / 2 : 0);
    s.acc = s.keep + round(block_kv / 4 + 1);
    s.m = s.acc + round(block_q * dvp);
    s.l = s.m + round(block_q);
    s.alpha = s.l + round(block_q);
    s.total = s.alpha + round(block_q) + round(std::max(d, dvp));
    return s;
  }

  void run(Workspace& ws, runtime::ThreadPool& pool) {
    const std::int64_t heads = p.q.heads;
    const int threads = p.threads;
    if (static_cast<int>(ws.per_worker.size()) < threads) ws.per_worker.resize(threads);
    if (p.mask_mode == MaskMode::kBitmask) {
      std::uint64_t* ones = ws.all_ones_bits.get<std::uint64_t>(block_q * words);
      std::fill(ones, ones + block_q * words, ~0ull);
      ones_bits_ = ones;
    }
    if (p.check_finite) check_q_finite(pool);

    // Heads are processed in groups whose packed K/V fit a budget, so memory
    // stays O(N * d) per group rather than a second copy of every head.
    const std::int64_t head_bytes = (k_head_elems + v_head_elems) * 4;
    const std::int64_t budget = std::int64_t{512} << 20;
    const std::int64_t group =
        std::clamp<std::int64_t>(budget / std::max<std::int64_t>(head_bytes, 1), 1, heads);
    Packed* packed_k = ws.packed_k.get<Packed>(group * k_head_elems);
    Packed* packed_v = ws.packed_v.get<Packed>(group * v_head_elems);

    std::vector<std::int64_t> order;
    order_work_items(plan, 1, order);
    overflow_rows_ = 0;
    first_overflow_ = std::numeric_limits<std::int64_t>::max();
    for (std::int64_t head0 = 0; head0 < heads; head0 += group) {
      const std::int64_t count = std::min(group, heads - head0);
      pack_heads(head0, count, packed_k, packed_v, ws, pool);
      const std::int64_t items = count * static_cast<std::int64_t>(order.size());
      pool.run(threads, items, [&](std::int64_t item, int worker) {
        // Costliest q-blocks of every head first, heads interleaved.
        const std::int64_t rank = item / count;
        const std::int64_t head = head0 + item % count;
        compute_item(head, order[rank], packed_k + (head - head0) * k_head_elems,
                     packed_v + (head - head0) * v_head_elems, ws.per_worker[worker]);
      });
    }
    report_overflow();
  }

  // Finite inputs whose q.k exceeds the f32 range have no f32 answer here;
  // refusing beats the NaN rows the arithmetic would give.
  void report_overflow() const {
    const std::int64_t count = overflow_rows_.load();
    if (count == 0 || !p.check_finite) return;  // unchecked: the caller vouches for its data
    const std::int64_t first = first_overflow_.load();
    throw std::invalid_argument("attention: q.k overflows float32 (|q.k| > 3.4e38) in " +
                                std::to_string(count) + " row" + (count == 1 ? "" : "s") +
                                " (first: head " + std::to_string(first / p.q.len) + ", q row " +
                                std::to_string(first % p.q.len) +
                                "); expected dot products within the f32 range: scale Q or K down");
  }

  void check_q_finite(runtime::ThreadPool& pool) {
    const std::int64_t blocks = plan.num_q_blocks();
    std::atomic<std::int64_t> first_bad{std::numeric_limits<std::int64_t>::max()};
    pool.run(p.threads, p.q.heads * blocks, [&](std::int64_t item, int) {
      const std::int64_t head = item / blocks;
      const IndexRange rows = plan.q_range(item % blocks);
      for (std::int64_t row = rows.begin; row < rows.end; ++row) {
        if (!row_is_finite(p.q, head, row)) {
          atomic_min(first_bad, head * p.q.len + row);
          return;
        }
      }
    });
    report_non_finite("q", first_bad.load(), p.q.len);
  }

  void pack_heads(std::int64_t head0, std::int64_t count, Packed* packed_k, Packed* packed_v,
                  Workspace& ws, runtime::ThreadPool& pool) {
    std::atomic<std::int64_t> bad_k{std::numeric_limits<std::int64_t>::max()};
    std::atomic<std::int64_t> bad_v{std::numeric_limits<std::int64_t>::max()};
    std::vector<std::atomic<int>> v_field(static_cast<std::size_t>(count));
    pool.run(p.threads, count * panels, [&](std::int64_t item, int worker) {
      const std::int64_t h = item / panels;
      const std::int64_t panel = item % panels;
      const std::int64_t key0 = panel * kPanel;
      const ScratchLayout sl = layout();
      float* row = ws.per_worker[worker].template get<float>(sl.total) + sl.alpha + block_q;
      Packed* kp = packed_k + h * k_head_elems + panel * Path::k_panel_elems(d);
      Packed* vp = packed_v + h * v_head_elems + panel * kPanel * Path::v_row_elems(dvp);
      const bool k_ok = Path::pack_k_panel(p.k, head0 + h, key0, kp, row);
      const bool v_ok = Path::pack_v_panel(p.v, head0 + h, key0, dvp, vp, row);
      atomic_max(v_field[h],
                 max_exponent_field(p.v, head0 + h, key0, std::min(key0 + kPanel, p.v.len), row));
      if (p.check_finite && !(k_ok && v_ok)) {
        // Find the exact row for the message; this is the rare error path.
        for (std::int64_t key = key0; key < std::min(key0 + kPanel, p.k.len); ++key) {
          if (!row_is_finite(p.k, head0 + h, key)) atomic_min(bad_k, (head0 + h) * p.k.len + key);
          if (!row_is_finite(p.v, head0 + h, key)) atomic_min(bad_v, (head0 + h) * p.v.len + key);
        }
      }
    });
    if (p.check_finite) {
      report_non_finite("k", bad_k.load(), p.k.len);
      report_non_finite("v", bad_v.load(), p.v.len);
    }
    // acc sums up to kv_len weights <= 1 times |V| < 2^(field - 126); when that
    // could pass 2^126, every weight is scaled by 2^-shift (exactly, in the
    // exponent) so acc stays finite while acc / l, the output, is unchanged.
    const int length_bits = std::bit_width(static_cast<std::uint64_t>(p.v.len));
    for (std::int64_t h = 0; h < count; ++h) {
      const int bound = v_field[h].load() - 126 + length_bits;
      shift_[head0 + h] = static_cast<float>(std::max(0, bound - 126));
    }
  }

  // One (head, q-block): for every visited tile, scores for all rows (each K
  // panel stays in L1 while every row group passes over it), then mask and
  // online softmax row by row, then P.V (each V column chunk stays in L1).
  void compute_item(std::int64_t head, std::int64_t q_block, const Packed* kp, const Packed* vp,
                    runtime::AlignedBuffer& scratch_buffer) {
    const IndexRange rows = plan.q_range(q_block);
    const std::int64_t nrows = rows.size();
    const ScratchLayout sl = layout();
    float* scratch = scratch_buffer.get<float>(sl.total);
    Packed* q = reinterpret_cast<Packed*>(scratch + sl.q);
    float* s = scratch + sl.scores;
    auto* probs =
        reinterpret_cast<typename Path::Prob*>(Path::kSeparateProbs ? scratch + sl.probs : s);
    std::uint8_t* keep = reinterpret_cast<std::uint8_t*>(scratch + sl.keep);
    float* acc = scratch + sl.acc;
    float* m = scratch + sl.m;
    float* l = scratch + sl.l;
    float* alpha = scratch + sl.alpha;

    const std::int64_t q_stride = Path::q_row_elems(d);
    const std::int64_t p_stride = Path::kSeparateProbs ? block_kv / 2 : block_kv;
    for (std::int64_t r = 0; r < nrows; ++r) {
      Path::load_q_row(p.q, head, rows.begin + r, q + r * q_stride);
    }
    std::fill(acc, acc + nrows * dvp, 0.0f);
    std::fill(m, m + nrows, kNegInf);
    std::fill(l, l + nrows, 0.0f);

    const Mask& mask = plan.mask();
    const float shift = shift_[head];
    for (const PlanTile& tile : plan.tiles(q_block)) {
      const IndexRange cols = plan.kv_range(tile.kv_block);
      const std::int64_t nk = cols.size();
      const std::int64_t nkp = (nk + kPanel - 1) / kPanel * kPanel;
      const std::int64_t panel0 = cols.begin / kPanel;
      const std::uint64_t* bits = nullptr;
      if (p.mask_mode != MaskMode::kElement) {
        if (!tile.is_full()) {
          bits = plan.partial_bits(tile.partial_id);
        } else if (p.mask_mode == MaskMode::kBitmask) {
          bits = ones_bits_;
        }
      }
      for (std::int64_t panel = 0; panel < nkp / kPanel; ++panel) {
        const Packed* kpanel = kp + (panel0 + panel) * Path::k_panel_elems(d);
        for (std::int64_t r0 = 0; r0 < nrows; r0 += kRows) {
          with_rows(static_cast<int>(std::min<std::int64_t>(kRows, nrows - r0)), [&]<int R>() {
            Path::template qk<R>(q + r0 * q_stride, d, kpanel, s + r0 * block_kv + panel * kPanel,
                                 block_kv);
          });
        }
      }
      for (std::int64_t r = 0; r < nrows; ++r) {
        float* srow = s + r * block_kv;
        if (p.mask_mode == MaskMode::kElement) {
          mask.eval_row(rows.begin + r, cols.begin, nk, keep);
          std::fill(keep + nk, keep + nkp, std::uint8_t{0});
          apply_keep(srow, keep, nkp);
        } else if (bits != nullptr) {
          apply_bits(srow, bits + r * words, nkp);
        }
        if (nk < nkp) clear_columns_from(srow, nk, nkp);
        if (!softmax_row(srow, nkp, m[r], l[r], alpha[r], shift) && l[r] == 0.0f &&
            row_keeps_any(bits == nullptr ? nullptr : bits + r * words,
                          p.mask_mode == MaskMode::kElement ? keep : nullptr, nk)) {
          l[r] = kAllKeptOverflowed;
        }
        Path::store_probs(srow, nkp, probs + r * p_stride);
      }
      const auto* vtile = Path::v_tile(vp, cols.begin, dvp);
      for (std::int64_t col = 0; col < dvp; col += kPanel) {
        for (std::int64_t r0 = 0; r0 < nrows; r0 += kRows) {
          with_rows(static_cast<int>(std::min<std::int64_t>(kRows, nrows - r0)), [&]<int R>() {
            Path::template pv<R>(probs + r0 * p_stride, p_stride, nkp, vtile, dvp, col,
                                 acc + r0 * dvp, alpha + r0);
          });
        }
      }
    }
    finish_rows(head, rows, acc, m, l);
  }

  // Online softmax for one row of raw scores: updates the running max and
  // sum, leaves exp2((s - m) * c - shift) in the row and the rescale factor in
  // alpha. Returns false, leaving acc at 0, while the row has no finite score.
  bool softmax_row(float* row, std::int64_t n, float& m, float& l, float& alpha,
                   float shift) const {
    const float tile_max = row_max(row, n);
    const float m_new = std::max(m, tile_max);
    if (m_new == kNegInf) {
      std::fill(row, row + n, 0.0f);
      alpha = 1.0f;
      return false;
    }
    // m == -inf also drops a kAllKeptOverflowed mark: finite scores outweigh it.
    alpha = (m == kNegInf) ? 0.0f : std::exp2((m - m_new) * exp_scale);
    const float sum = exp_row(row, n, m_new, exp_scale, shift);
    l = l * alpha + sum;
    m = m_new;
    return true;
  }

  void finish_rows(std::int64_t head, IndexRange rows, const float* acc, const float* m,
                   const float* l) {
    constexpr double kLn2 = 0.6931471805599453;
    const double shift = shift_[head];
    for (std::int64_t r = 0; r < rows.size(); ++r) {
      // NaN (an Inf or NaN score), the overflow mark, or an infinite max.
      if (!(l[r] >= 0.0f) || m[r] == -kNegInf) {
        overflow_rows_.fetch_add(1);
        atomic_min(first_overflow_, head * p.q.len + rows.begin + r);
      }
      const bool kept = l[r] > 0.0f && m[r] != -kNegInf;
      store_out_row(p.out, head, rows.begin + r, acc + r * dvp, kept ? 1.0f / l[r] : 0.0f);
      if (p.lse != nullptr) {
        // In double: m * scale alone may pass the f32 range when the log does not.
        const double lse = static_cast<double>(m[r]) * p.scale + std::log(l[r]) + shift * kLn2;
        // Out-of-range double to float is undefined behaviour, not Inf: clamp.
        constexpr double kMax = std::numeric_limits<float>::max();
        p.lse[head * p.q.len + rows.begin + r] = !kept ? kNegInf
                                                 : std::fabs(lse) <= kMax
                                                     ? static_cast<float>(lse)
                                                     : std::copysign(-kNegInf, lse);
      }
    }
  }

  const std::uint64_t* ones_bits_ = nullptr;
  std::vector<float> shift_;  // per head: weights scaled by 2^-shift (see pack_heads)
  std::atomic<std::int64_t> overflow_rows_{0};
  std::atomic<std::int64_t> first_overflow_{std::numeric_limits<std::int64_t>::max()};
};
