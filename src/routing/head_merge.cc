// Exact LSE merge of two attention segments over disjoint key sets, fused with
// the inverse permutation and the output conversion (one pass over the rows).
#include "routing/head_merge.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "tilesplash/kernel_limits.h"

namespace tilesplash::detail {
namespace {

constexpr std::int64_t kChunkRows = 1024;

void store_row(const MutableTensorView& out, std::int64_t row, const float* values) {
  const std::int64_t offset = row * out.row_stride;
  switch (out.dtype) {
    case DType::kF32: {
      float* dst = static_cast<float*>(out.data) + offset;
      std::copy(values, values + out.dim, dst);
      break;
    }
    case DType::kBF16: {
      auto* dst = static_cast<std::uint16_t*>(out.data) + offset;
      for (std::int64_t c = 0; c < out.dim; ++c) dst[c] = float_to_bf16(values[c]);
      break;
    }
    case DType::kF16: {
      auto* dst = static_cast<std::uint16_t*>(out.data) + offset;
      for (std::int64_t c = 0; c < out.dim; ++c) dst[c] = float_to_f16(values[c]);
      break;
    }
  }
}

}  // namespace

void finish_head(runtime::ThreadPool& pool, int threads, std::int64_t tokens, const RowOrder& order,
                 PartialResult band, PartialResult sink, std::int64_t dv,
                 const MutableTensorView& out, float* lse) {
  const std::int64_t n = tokens;
  const std::int64_t* positions = order.is_identity() ? nullptr : order.positions().data();
  const std::int64_t chunks = (n + kChunkRows - 1) / kChunkRows;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  pool.run(threads, chunks, [&](std::int64_t chunk, int) {
    float merged[kernel_limits::kMaxHeadDim];  // dv is a valid head dim
    const std::int64_t end = std::min(n, (chunk + 1) * kChunkRows);
    for (std::int64_t row = chunk * kChunkRows; row < end; ++row) {
      const std::int64_t r = positions != nullptr ? positions[row] : row;
      const float* o1 = band.out + r * dv;
      float row_lse = band.lse[r];
      if (sink.out == nullptr) {
        store_row(out, row, o1);
      } else {
        const float* o2 = sink.out + r * dv;
        const float a = band.lse[r], b = sink.lse[r];
        const float m = std::max(a, b);
        if (m == kNegInf) {
          std::fill(merged, merged + dv, 0.0f);
        } else {
          const float w1 = std::exp(a - m), w2 = std::exp(b - m);
          const float inv = 1.0f / (w1 + w2);
          const float c1 = w1 * inv, c2 = w2 * inv;
          for (std::int64_t c = 0; c < dv; ++c) merged[c] = c1 * o1[c] + c2 * o2[c];
          row_lse = m + std::log(w1 + w2);
        }
        store_row(out, row, merged);
      }
      if (lse != nullptr) lse[row] = row_lse;
    }
  });
}

}  // namespace tilesplash::detail
