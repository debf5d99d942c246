// One row of a tile's scores between the two products: the mask (plan bitmask,
// element predicate, padding keys of a ragged last tile), the row max, and the
// exponent with its sum. Included by kernel-inl.h inside a target's namespace.
// Rows are kPanel-aligned lengths of floats that sit in L1 (the kernel works
// one register tile of rows at a time).

inline void clear_columns_from(float* row, std::int64_t from, std::int64_t to) {
  for (std::int64_t i = from; i < to; ++i) row[i] = kNegInf;
}

// Sets the scores of keys in [from, to) whose plan bit is 0 to -inf (from a
// multiple of kLanes; `row` and `bits` start at the tile's first key).
inline void apply_bits(float* row, const std::uint64_t* bits, std::int64_t from, std::int64_t to) {
  VI lane_bit;
  for (int i = 0; i < kLanes; ++i) lane_bit[i] = 1 << i;
  constexpr std::uint64_t kAll = (kLanes == 64) ? ~0ull : ((1ull << kLanes) - 1);
  for (std::int64_t i = from; i < to; i += kLanes) {
    const std::uint64_t chunk = (bits[i / 64] >> (i % 64)) & kAll;
    if (chunk == kAll) continue;
    const VI keep = ((VI{} + static_cast<std::int32_t>(chunk)) & lane_bit) != 0;
    store(row + i, keep ? load(row + i) : splat(kNegInf));
  }
}

// The keys of a tile that any of `rows` bitmask rows (`words` words apart)
// keeps, widened to whole key panels and clipped to `nkp`: [begin, end),
// empty (begin == end) when no row keeps any key.
struct KeyRange {
  std::int64_t begin, end;
};
inline KeyRange kept_key_panels(const std::uint64_t* bits, int rows, std::int64_t words,
                                std::int64_t nkp) {
  std::int64_t first = nkp, last = -1;
  for (std::int64_t w = 0; w < words; ++w) {
    std::uint64_t any = 0;
    for (int r = 0; r < rows; ++r) any |= bits[r * words + w];
    if (any == 0) continue;
    first = std::min(first, w * 64 + std::countr_zero(any));
    last = std::max(last, w * 64 + 63 - std::countl_zero(any));
  }
  if (last < 0) return {0, 0};
  const std::int64_t begin = first / kPanel * kPanel;
  const std::int64_t end = std::min(nkp, (last / kPanel + 1) * kPanel);
  return {begin, end};
}

// Sets the scores of keys whose predicate byte is 0 to -inf.
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
  for (std::int64_t i = 0; i < n; i += kLanes) best = vmax(load(row + i), best);
  return reduce_max(best);
}

// row[i] = 2^((row[i] - m) * c - shift), returns the sum. The max is
// subtracted before scaling, not folded into one FMA as row * c - m * c: once
// m * c is large (scores of 1e9 and up), the rounding error of m * c alone
// exceeds the exponent range and every weight becomes 0 or Inf. s - m is exact
// when s is near m (Sterbenz), which is where the weights that matter are.
inline float exp_row(float* row, std::int64_t n, float m, float c, float shift) {
  constexpr int kChains = 2;  // vectors in flight (see exp2_vecs); more only add spills
  VF sum = VF{};
  const VF vm = splat(m);
  const VF vc = splat(c);
  const VF vshift = splat(shift);
  std::int64_t i = 0;
  for (; i + kChains * kLanes <= n; i += kChains * kLanes) {
    VF e[kChains];
#pragma GCC unroll 8
    for (int j = 0; j < kChains; ++j) e[j] = (load(row + i + j * kLanes) - vm) * vc - vshift;
    exp2_vecs(e);
#pragma GCC unroll 8
    for (int j = 0; j < kChains; ++j) {
      store(row + i + j * kLanes, e[j]);
      sum += e[j];
    }
  }
  for (; i < n; i += kLanes) {
    const VF e = exp2_vec((load(row + i) - vm) * vc - vshift);
    store(row + i, e);
    sum += e;
  }
  return reduce_add(sum);
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

// The running state of one query row across the tiles it visits.
struct RowState {
  float m;  // max of the scores so far (-inf: none finite yet)
  float l;  // sum of 2^((s - m) * c - shift); kAllKeptOverflowed, or NaN, flags overflow
};

// Online softmax step for one row of masked scores whose max is `tile_max`:
// updates the running max and sum, leaves 2^((s - m) * c - shift) in the row
// and the factor the row's accumulator must be rescaled by in `alpha`.
// Returns false, leaving the row 0 (and so acc at 0), while the row has no
// finite score.
inline bool softmax_row(float* row, std::int64_t n, float tile_max, RowState& state, float& alpha,
                        float c, float shift) {
  const float m_new = std::max(state.m, tile_max);
  if (m_new == kNegInf) {
    std::fill(row, row + n, 0.0f);
    alpha = 1.0f;
    return false;
  }
  // m == -inf also drops a kAllKeptOverflowed mark: finite scores outweigh it.
  alpha = (state.m == kNegInf) ? 0.0f : exp2_scalar((state.m - m_new) * c);
  const float sum = exp_row(row, n, m_new, c, shift);
  state.l = state.l * alpha + sum;
  state.m = m_new;
  return true;
}
