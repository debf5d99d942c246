// The pooled key tiles (mean key and value per block_kv keys); see
// compensation.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "compensation/compensation.h"
#include "compensation/rows.h"

namespace tilesplash::compensation {

bool KeyFilter::excluded(std::int64_t key) const {
  if (limit >= 0 && key >= limit) return true;
  if (count == 0 || key < first || (key - first) % stride != 0) return false;
  return (key - first) / stride < count;
}

void pool_tiles(ThreadingContext& context, int threads, const TensorView& k, const TensorView& v,
                std::int64_t block_kv, const KeyFilter& filter, PooledTiles& pooled,
                std::span<const std::int64_t> sources) {
  const std::int64_t heads = k.heads, kv_len = k.len, d = k.dim, dv = v.dim;
  const std::int64_t tiles = (kv_len + block_kv - 1) / block_kv;
  pooled.heads = heads;
  pooled.tiles = tiles;
  pooled.d = d;
  pooled.dv = dv;
  pooled.keys.assign(static_cast<std::size_t>(heads * tiles * d), 0.0f);
  pooled.values.assign(static_cast<std::size_t>(heads * tiles * dv), 0.0f);
  pooled.keep.clear();
  pooled.log_count.assign(static_cast<std::size_t>(tiles), 0.0f);
  std::vector<std::int64_t> counts(static_cast<std::size_t>(tiles), 0);
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t end = std::min(kv_len, (t + 1) * block_kv);
    for (std::int64_t key = t * block_kv; key < end; ++key) {
      counts[static_cast<std::size_t>(t)] += filter.excluded(key) ? 0 : 1;
    }
    const std::int64_t n = counts[static_cast<std::size_t>(t)];
    if (n == 0) continue;
    pooled.keep.push_back(static_cast<std::int32_t>(t));
    pooled.log_count[static_cast<std::size_t>(t)] = std::log(static_cast<float>(n));
  }
  const std::int64_t kept = static_cast<std::int64_t>(pooled.keep.size());
  // One item per (head, kept tile), each summing its keys in order.
  context.run(threads, heads * kept, [&](std::int64_t item, int) {
    const std::int64_t h = item / kept;
    const std::int64_t t = pooled.keep[static_cast<std::size_t>(item % kept)];
    double key_sum[kernel_limits::kMaxHeadDim] = {};
    double value_sum[kernel_limits::kMaxHeadDim] = {};
    float row[kernel_limits::kMaxHeadDim];
    const std::int64_t end = std::min(kv_len, (t + 1) * block_kv);
    for (std::int64_t key = t * block_kv; key < end; ++key) {
      if (filter.excluded(key)) continue;
      const std::int64_t source = sources.empty() ? key : sources[static_cast<std::size_t>(key)];
      load_row(k, h, source, row);
      for (std::int64_t c = 0; c < d; ++c) key_sum[c] += row[c];
      load_row(v, h, source, row);
      for (std::int64_t c = 0; c < dv; ++c) value_sum[c] += row[c];
    }
    const double inv = 1.0 / static_cast<double>(counts[static_cast<std::size_t>(t)]);
    float* key_mean = pooled.keys.data() + (h * tiles + t) * d;
    float* value_mean = pooled.values.data() + (h * tiles + t) * dv;
    for (std::int64_t c = 0; c < d; ++c) key_mean[c] = static_cast<float>(key_sum[c] * inv);
    for (std::int64_t c = 0; c < dv; ++c) value_mean[c] = static_cast<float>(value_sum[c] * inv);
  });
}

}  // namespace tilesplash::compensation
