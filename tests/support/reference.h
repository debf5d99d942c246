// The yardstick every kernel test compares against: dense masked softmax
// attention for one head, in double precision, written for obviousness rather
// than speed. It reads the inputs in their stored dtype, so the only error left
// between it and the kernel is the kernel's own arithmetic.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tilesplash/mask.h"
#include "tilesplash/tensor.h"

namespace tilesplash::test {

struct ReferenceHead {
  std::vector<double> out;  // q_len x dv, row-major
  std::vector<double> lse;  // q_len; -inf for a row with no kept key
};

// One element of a view, widened exactly to double.
double load_element(const TensorView& t, std::int64_t head, std::int64_t row, std::int64_t col);

// Attention of head `head` of q, k, v under `mask`; scale defaults to
// 1 / sqrt(q.dim). Costs O(q_len * kv_len * (d + dv)) time and O(kv_len * (d + dv))
// memory: the score matrix is never stored, one row at a time.
ReferenceHead reference_attention(const Mask& mask, const TensorView& q, const TensorView& k,
                                  const TensorView& v, std::int64_t head,
                                  std::optional<double> scale = std::nullopt);

}  // namespace tilesplash::test
