// Rows of the caller's tensors to and from f32 for the compensation pass, with
// the same conversions (round to nearest even) as the kernel's output store,
// so a row the pass does not change keeps the kernel's exact bits.
#pragma once

#include <cstdint>

#include "tilesplash/kernel_limits.h"
#include "tilesplash/tensor.h"

namespace tilesplash::compensation {

inline void load_row(const TensorView& t, std::int64_t head, std::int64_t row, float* dst) {
  const std::int64_t offset = head * t.head_stride + row * t.row_stride;
  switch (t.dtype) {
    case DType::kF32: {
      const float* src = static_cast<const float*>(t.data) + offset;
      for (std::int64_t c = 0; c < t.dim; ++c) dst[c] = src[c];
      break;
    }
    case DType::kBF16: {
      const auto* src = static_cast<const std::uint16_t*>(t.data) + offset;
      for (std::int64_t c = 0; c < t.dim; ++c) dst[c] = bf16_to_float(src[c]);
      break;
    }
    case DType::kF16: {
      const auto* src = static_cast<const std::uint16_t*>(t.data) + offset;
      for (std::int64_t c = 0; c < t.dim; ++c) dst[c] = f16_to_float(src[c]);
      break;
    }
  }
}

inline void store_row(const MutableTensorView& t, std::int64_t head, std::int64_t row,
                      const float* src) {
  const std::int64_t offset = head * t.head_stride + row * t.row_stride;
  switch (t.dtype) {
    case DType::kF32: {
      float* dst = static_cast<float*>(t.data) + offset;
      for (std::int64_t c = 0; c < t.dim; ++c) dst[c] = src[c];
      break;
    }
    case DType::kBF16: {
      auto* dst = static_cast<std::uint16_t*>(t.data) + offset;
      for (std::int64_t c = 0; c < t.dim; ++c) dst[c] = float_to_bf16(src[c]);
      break;
    }
    case DType::kF16: {
      auto* dst = static_cast<std::uint16_t*>(t.data) + offset;
      for (std::int64_t c = 0; c < t.dim; ++c) dst[c] = float_to_f16(src[c]);
      break;
    }
  }
}

// Row `row` of head `head` of an f32 view.
inline float* f32_row(const MutableTensorView& t, std::int64_t head, std::int64_t row) {
  return static_cast<float*>(t.data) + head * t.head_stride + row * t.row_stride;
}

}  // namespace tilesplash::compensation
