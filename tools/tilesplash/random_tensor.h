// Owned, contiguous [heads, len, dim] tensors of N(0, 1) samples in any of the
// kernel's input dtypes, for benchmarking on reproducible data.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "tilesplash/tensor.h"

namespace tilesplash::cli {

class RandomTensor {
 public:
  RandomTensor(DType dtype, std::int64_t heads, std::int64_t len, std::int64_t dim,
               std::mt19937_64& rng);

  TensorView view() const;

 private:
  DType dtype_;
  std::int64_t heads_;
  std::int64_t len_;
  std::int64_t dim_;
  std::vector<float> f32_;
  std::vector<std::uint16_t> bits16_;  // bf16 or f16
};

}  // namespace tilesplash::cli
