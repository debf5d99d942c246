#include "support/random_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

namespace tilesplash::test {

HostTensor::HostTensor(DType dtype, std::int64_t heads, std::int64_t len, std::int64_t dim)
    : HostTensor(dtype, heads, len, dim, len * dim, dim) {}

HostTensor::HostTensor(DType dtype, std::int64_t heads, std::int64_t len, std::int64_t dim,
                       std::int64_t head_stride, std::int64_t row_stride)
    : dtype_(dtype),
      heads_(heads),
      len_(len),
      dim_(dim),
      head_stride_(head_stride),
      row_stride_(row_stride) {
  // One past the last element; zero-sized tensors (bad-argument tests) keep one element so
  // that data() is never null.
  const std::int64_t elements =
      std::max<std::int64_t>(1, (heads - 1) * head_stride + (len - 1) * row_stride + dim);
  storage_.assign(static_cast<std::size_t>(elements * size_of(dtype)), 0);
}

TensorView HostTensor::view() const {
  return {storage_.data(), dtype_, heads_, len_, dim_, head_stride_, row_stride_};
}

MutableTensorView HostTensor::mutable_view() {
  return {storage_.data(), dtype_, heads_, len_, dim_, head_stride_, row_stride_};
}

float HostTensor::load(std::int64_t index) const {
  const unsigned char* p = storage_.data() + index * size_of(dtype_);
  if (dtype_ == DType::kF32) {
    float value;
    std::memcpy(&value, p, sizeof value);
    return value;
  }
  std::uint16_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return dtype_ == DType::kBF16 ? bf16_to_float(bits) : f16_to_float(bits);
}

void HostTensor::store(std::int64_t index, float value) {
  unsigned char* p = storage_.data() + index * size_of(dtype_);
  if (dtype_ == DType::kF32) {
    std::memcpy(p, &value, sizeof value);
    return;
  }
  const std::uint16_t bits = dtype_ == DType::kBF16 ? float_to_bf16(value) : float_to_f16(value);
  std::memcpy(p, &bits, sizeof bits);
}

float HostTensor::get(std::int64_t h, std::int64_t r, std::int64_t c) const {
  return load(offset(h, r, c));
}

void HostTensor::set(std::int64_t h, std::int64_t r, std::int64_t c, float value) {
  store(offset(h, r, c), value);
}

void HostTensor::fill_normal(std::uint64_t seed) {
  // The engine's output sequence is fixed by the standard; libstdc++'s normal
  // distribution is deterministic too, which is all reproducibility here needs.
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::int64_t h = 0; h < heads_; ++h) {
    for (std::int64_t r = 0; r < len_; ++r) {
      for (std::int64_t c = 0; c < dim_; ++c) set(h, r, c, normal(engine));
    }
  }
}

void HostTensor::fill_storage(float value) {
  const auto elements = static_cast<std::int64_t>(storage_.size()) / size_of(dtype_);
  for (std::int64_t i = 0; i < elements; ++i) store(i, value);
}

HostTensor HostTensor::relayout(std::int64_t head_stride, std::int64_t row_stride) const {
  HostTensor copy(dtype_, heads_, len_, dim_, head_stride, row_stride);
  for (std::int64_t h = 0; h < heads_; ++h) {
    for (std::int64_t r = 0; r < len_; ++r) {
      for (std::int64_t c = 0; c < dim_; ++c) copy.set(h, r, c, get(h, r, c));
    }
  }
  return copy;
}

double HostTensor::max_abs() const {
  double result = 0.0;
  for (std::int64_t h = 0; h < heads_; ++h) {
    for (std::int64_t r = 0; r < len_; ++r) {
      for (std::int64_t c = 0; c < dim_; ++c) {
        result = std::max(result, std::fabs(static_cast<double>(get(h, r, c))));
      }
    }
  }
  return result;
}

Tolerance tolerance_for(DType input, DType output) {
  Tolerance tol;
  switch (input) {
    case DType::kF32:
      tol = {2e-5, 2e-5};
      break;
    case DType::kBF16:
      tol = {4e-3, 4e-3};
      break;
    case DType::kF16:
      tol = {3e-3, 3e-3};
      break;
  }
  if (output == DType::kBF16) tol.out += std::ldexp(1.0, -8);
  if (output == DType::kF16) tol.out += std::ldexp(1.0, -11);
  return tol;
}

}  // namespace tilesplash::test
