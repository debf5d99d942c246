// Test tensors: host buffers in f32 / bf16 / f16 with any [heads, len, dim]
// layout, filled from a seed so that every failure reproduces, plus the error
// budget a kernel is allowed against the double-precision reference.
#pragma once

#include <cstdint>
#include <vector>

#include "tilesplash/tensor.h"

namespace tilesplash::test {

class HostTensor {
 public:
  // Contiguous [heads, len, dim].
  HostTensor(DType dtype, std::int64_t heads, std::int64_t len, std::int64_t dim);
  // Element (h, r, c) at h * head_stride + r * row_stride + c; e.g. head_stride = dim and
  // row_stride = heads * dim is the [len, heads, dim] layout of FlashAttention.
  HostTensor(DType dtype, std::int64_t heads, std::int64_t len, std::int64_t dim,
             std::int64_t head_stride, std::int64_t row_stride);

  DType dtype() const { return dtype_; }
  std::int64_t heads() const { return heads_; }
  std::int64_t len() const { return len_; }
  std::int64_t dim() const { return dim_; }

  TensorView view() const;
  MutableTensorView mutable_view();

  float get(std::int64_t h, std::int64_t r, std::int64_t c) const;
  // Rounds to the tensor's dtype (round-to-nearest-even, like the library).
  void set(std::int64_t h, std::int64_t r, std::int64_t c, float value);

  // Every logical element ~ N(0, 1), rounded to the dtype.
  void fill_normal(std::uint64_t seed);
  // Every storage element, gaps between rows included: a sentinel that shows
  // both unwritten outputs and writes outside the view.
  void fill_storage(float value);
  // The same values in another layout.
  HostTensor relayout(std::int64_t head_stride, std::int64_t row_stride) const;

  double max_abs() const;
  const std::vector<unsigned char>& storage() const { return storage_; }

 private:
  std::int64_t offset(std::int64_t h, std::int64_t r, std::int64_t c) const {
    return h * head_stride_ + r * row_stride_ + c;
  }
  float load(std::int64_t index) const;
  void store(std::int64_t index, float value);

  DType dtype_;
  std::int64_t heads_, len_, dim_, head_stride_, row_stride_;
  std::vector<unsigned char> storage_;
};

// Absolute error allowed, per unit of max(1, max|V|) for outputs and per unit
// of max(1, |reference LSE|) for LSE. f32 (and f16, which the kernel widens)
// only pay for f32 accumulation and the polynomial exp; bf16 kernels also
// round the softmax probabilities to bf16 for P.V (2^-9 relative each, and the
// output is a convex combination of V rows). A bf16 / f16 output adds its own
// rounding.
struct Tolerance {
  double out = 0.0;
  double lse = 0.0;
};
Tolerance tolerance_for(DType input, DType output);

}  // namespace tilesplash::test
