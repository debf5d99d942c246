// Tensors as callers hold them: a layout names how a 3-d or 4-d tensor maps
// onto the kernel's strided [heads, len, dim] views (tensor.h) -- hnd
// [heads, N, d], bhnd [batch, heads, N, d] as PyTorch's SDPA, bnhd [batch, N,
// heads, d] as diffusers and FlashAttention -- and a StridedTensor is such a
// tensor in memory the caller owns, with its own element strides (a NumPy or
// PyTorch view, a transpose of another layout, a slice of a packed QKV
// buffer). The whole-tensor entry points (batched_attention.h,
// routing_layout.h, merge.h) take them; nothing here computes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tilesplash/tensor.h"

namespace tilesplash {

enum class Layout : std::uint8_t {
  kHND,   // [heads, N, d]
  kBHND,  // [batch, heads, N, d], PyTorch scaled_dot_product_attention
  kBNHD,  // [batch, N, heads, d], FlashAttention
};

std::string_view to_string(Layout layout);                  // "hnd", "bhnd", "bnhd"
std::optional<Layout> parse_layout(std::string_view text);  // case-sensitive, as above
std::string_view layout_axes_text(Layout layout);           // "[heads, N, d]", ... for messages

// "[2, 8, 1024, 64]", as used in error messages.
std::string shape_to_string(const std::vector<std::int64_t>& shape);

// A tensor in a layout: rank 3 for hnd, 4 for bhnd and bnhd.
struct StridedTensor {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;  // in elements, one per axis (may be negative); empty: C order
};

struct MutableStridedTensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  std::vector<std::int64_t> shape;
  std::vector<std::int64_t> strides;
};

}  // namespace tilesplash
