#include "random_tensor.h"

#include <cstddef>

namespace tilesplash::cli {

RandomTensor::RandomTensor(DType dtype, std::int64_t heads, std::int64_t len, std::int64_t dim,
                           std::mt19937_64& rng)
    : dtype_(dtype), heads_(heads), len_(len), dim_(dim) {
  const auto count = static_cast<std::size_t>(heads * len * dim);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  switch (dtype) {
    case DType::kF32:
      f32_.resize(count);
      for (float& x : f32_) x = normal(rng);
      break;
    case DType::kBF16:
      bits16_.resize(count);
      for (std::uint16_t& x : bits16_) x = float_to_bf16(normal(rng));
      break;
    case DType::kF16:
      bits16_.resize(count);
      for (std::uint16_t& x : bits16_) x = float_to_f16(normal(rng));
      break;
  }
}

TensorView RandomTensor::view() const {
  const void* data = dtype_ == DType::kF32 ? static_cast<const void*>(f32_.data()) : bits16_.data();
  return TensorView::contiguous(data, dtype_, heads_, len_, dim_);
}

}  // namespace tilesplash::cli
