// Rows of the caller's tensors to and from f32: widening Q, K, V rows while
// packing (and noticing NaN / Inf on the way), the exponent range of V for the
// overflow guard, and the output rows in the caller's dtype. Included by
// kernel-inl.h inside a target's namespace; plain loops the compiler
// vectorises for that target.

// Widens row `row` of `head` to f32.
inline void widen_row_f32(const TensorView& t, std::int64_t head, std::int64_t row, float* dst) {
  const std::int64_t offset = head * t.head_stride + row * t.row_stride;
  const std::int64_t n = t.dim;
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
}

// Rows [row0, row0 + rows) of `head` widened to f32, dim floats apart
// (TargetOps::widen_rows: the ladder walk's key blocks).
inline void widen_rows(const TensorView& t, std::int64_t head, std::int64_t row0, std::int64_t rows,
                       float* dst) {
  for (std::int64_t i = 0; i < rows; ++i) widen_row_f32(t, head, row0 + i, dst + i * t.dim);
}

// part[c] (+)= t[head][row][c] in f32: `first` stores instead of adding.
inline void add_row_f32(const TensorView& t, std::int64_t head, std::int64_t row, bool first,
                        float* part) {
  const std::int64_t offset = head * t.head_stride + row * t.row_stride;
  const std::int64_t n = t.dim;
  if (first) {
    widen_row_f32(t, head, row, part);
    return;
  }
  switch (t.dtype) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(t.data) + offset;
      for (std::int64_t i = 0; i < n; ++i) part[i] += src[i];
      break;
    }
    case DType::kBF16: {
      const std::uint16_t* src = static_cast<const std::uint16_t*>(t.data) + offset;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::uint32_t wide = static_cast<std::uint32_t>(src[i]) << 16;
        float x;
        __builtin_memcpy(&x, &wide, 4);
        part[i] += x;
      }
      break;
    }
    case DType::kF16: {
      const std::uint16_t* src = static_cast<const std::uint16_t*>(t.data) + offset;
      for (std::int64_t i = 0; i < n; ++i) part[i] += f16_to_float(src[i]);
      break;
    }
  }
}

// A vector of f32 from kLanes consecutive elements (bf16 widened exactly).
typedef std::uint16_t VU16 __attribute__((vector_size(kLanes * sizeof(std::uint16_t))));
inline VF load_widened(const float* p) { return load(p); }
inline VF load_widened(const std::uint16_t* bf16) {
#if defined(__AVX512F__)
  // One vpmovzxwd from memory: GCC splits the generic form into halves. (The
  // zero-masked forms: GCC 12 warns that the unmasked ones' source is unset.)
  if constexpr (kLanes == 16) {
    constexpr __mmask16 kAll = 0xffff;
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(
        kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bf16)));
    return reinterpret_cast<VF>(_mm512_maskz_slli_epi32(kAll, wide, 16));
  }
#endif
  VU16 half;
  __builtin_memcpy(&half, bf16, sizeof half);
  const VI wide = __builtin_convertvector(half, VI) << 16;
  VF x;
  __builtin_memcpy(&x, &wide, sizeof x);
  return x;
}
inline float widened(float x) { return x; }
inline float widened(std::uint16_t bf16) {
  const std::uint32_t wide = static_cast<std::uint32_t>(bf16) << 16;
  float x;
  __builtin_memcpy(&x, &wide, 4);
  return x;
}

// Channels [c0, c0 + V * kLanes) of one group of sum_rows: its n rows added
// in f32 in registers, the first stored, then added to sum in double.
template <int V, typename T>
inline void sum_group_columns(const T* base, std::int64_t row_stride, const std::int64_t* rows,
                              std::int64_t n, std::int64_t c0, double* sum) {
  VF acc[V];
  const T* first = base + rows[0] * row_stride + c0;
#pragma GCC unroll 8
  for (int j = 0; j < V; ++j) acc[j] = load_widened(first + j * kLanes);
  for (std::int64_t i = 1; i < n; ++i) {
    const T* row = base + rows[i] * row_stride + c0;
#pragma GCC unroll 8
    for (int j = 0; j < V; ++j) acc[j] += load_widened(row + j * kLanes);
  }
  float part[V * kLanes];  // through memory: the widening adds below vectorise
#pragma GCC unroll 8
  for (int j = 0; j < V; ++j) store(part + j * kLanes, acc[j]);
  for (int c = 0; c < V * kLanes; ++c) sum[c0 + c] += static_cast<double>(part[c]);
}

// sum_rows over f32 or bf16 rows (base: the head's first element).
template <typename T>
inline void sum_rows_of(const T* base, std::int64_t row_stride, std::int64_t dim,
                        const std::int64_t* rows, std::int64_t n, double* sum) {
  constexpr int kVecs = 8;  // accumulators per pass: 128 channels on AVX-512
  for (std::int64_t i0 = 0; i0 < n; i0 += kSumGroup) {
    const std::int64_t g = i0 + kSumGroup < n ? kSumGroup : n - i0;
    const std::int64_t* group = rows + i0;
    std::int64_t c = 0;
    for (; c + kVecs * kLanes <= dim; c += kVecs * kLanes) {
      sum_group_columns<kVecs>(base, row_stride, group, g, c, sum);
    }
    for (; c + kLanes <= dim; c += kLanes) sum_group_columns<1>(base, row_stride, group, g, c, sum);
    for (; c < dim; ++c) {
      float part = widened(base[group[0] * row_stride + c]);
      for (std::int64_t i = 1; i < g; ++i) part += widened(base[group[i] * row_stride + c]);
      sum[c] += static_cast<double>(part);
    }
  }
}

// sum[c] += t[head][rows[i]][c] for i < n and c < t.dim
// (TargetOps::sum_rows: the pooled tiles of compensation/pooled_tiles.cc):
// the rows in groups of kSumGroup (target_ops.h) from the first, each group summed in f32
// in order and then added to sum in double. Every channel takes the same
// adds in the same order on every target, so the bits do not depend on it.
// f32 and bf16 rows sum a group in registers (through part[] in memory, a
// load and a store per row and vector held the loop to a third of its rate);
// f16 rows go through part[].
inline void sum_rows(const TensorView& t, std::int64_t head, const std::int64_t* rows,
                     std::int64_t n, double* sum) {
  if (t.dtype == DType::kF32) {
    sum_rows_of(static_cast<const float*>(t.data) + head * t.head_stride, t.row_stride, t.dim, rows,
                n, sum);
    return;
  }
  if (t.dtype == DType::kBF16) {
    sum_rows_of(static_cast<const std::uint16_t*>(t.data) + head * t.head_stride, t.row_stride,
                t.dim, rows, n, sum);
    return;
  }
  float part[kMaxHeadDim];
  for (std::int64_t i0 = 0; i0 < n; i0 += kSumGroup) {
    const std::int64_t i1 = i0 + kSumGroup < n ? i0 + kSumGroup : n;
    for (std::int64_t i = i0; i < i1; ++i) add_row_f32(t, head, rows[i], i == i0, part);
    for (std::int64_t c = 0; c < t.dim; ++c) sum[c] += static_cast<double>(part[c]);
  }
}

// Widens row `row` of `head` to f32; returns false if it holds NaN or Inf.
inline bool load_row_f32(const TensorView& t, std::int64_t head, std::int64_t row, float* dst) {
  widen_row_f32(t, head, row, dst);
  const std::int64_t n = t.dim;
  std::uint32_t any_special = 0;
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

// What packing one panel of V found: whether its rows are finite, and the
// largest biased f32 exponent field among them (|x| < 2^(field - 126) for
// every element), which the overflow guard of pack_heads needs. Each path's
// pack_v_panel reports both from the rows it already holds, so V is read once.
struct VPanel {
  bool finite = true;
  int field = 0;
};

// Largest biased exponent field of n f32 values.
inline int exponent_field(const float* row, std::int64_t n) {
  std::uint32_t best = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint32_t bits;
    __builtin_memcpy(&bits, row + i, 4);
    const std::uint32_t field = (bits >> 23) & 0xffu;
    best = field > best ? field : best;
  }
  return static_cast<int>(best);
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
