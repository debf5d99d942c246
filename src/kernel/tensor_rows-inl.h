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

// sum[c] += t[head][rows[i]][c] for i < n and c < t.dim
// (TargetOps::sum_rows: the pooled tiles of compensation/pooled_tiles.cc):
// the rows in groups of kSumGroup (target_ops.h) from the first, each group summed in f32
// in order and then added to sum in double. Every channel takes the same
// adds in the same order on every target, so the bits do not depend on it.
inline void sum_rows(const TensorView& t, std::int64_t head, const std::int64_t* rows,
                     std::int64_t n, double* sum) {
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
