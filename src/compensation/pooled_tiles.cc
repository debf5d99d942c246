// The pooled key tiles (mean key and value per block_kv keys); see
// compensation.h.
#include <algorithm>
#include <cmath>
#include <vector>

#include "compensation/compensation.h"
#include "kernel/isa_dispatch.h"
#include "tilesplash/kernel_limits.h"

namespace tilesplash::compensation {
namespace {

// Rows handed to TargetOps::sum_rows at once: whole groups of its f32 sums,
// so a tile's keys are grouped from its first whatever its size.
constexpr std::int64_t kRowChunk = 128;
static_assert(kRowChunk % kernel::kSumGroup == 0);

}  // namespace

void prepare_pooled(const TensorView& k, const TensorView& v, std::int64_t block_kv,
                    const KeyFilter& filter, PooledTiles& pooled,
                    std::span<const std::int64_t> sources) {
  const std::int64_t heads = k.heads, kv_len = k.len;
  const std::int64_t tiles = (kv_len + block_kv - 1) / block_kv;
  pooled.heads = heads;
  pooled.tiles = tiles;
  pooled.d = k.dim;
  pooled.dv = v.dim;
  pooled.keys.assign(static_cast<std::size_t>(heads * tiles * k.dim), 0.0f);
  pooled.values.assign(static_cast<std::size_t>(heads * tiles * v.dim), 0.0f);
  pooled.keep.clear();
  pooled.block_kv = block_kv;
  pooled.log_count.assign(static_cast<std::size_t>(tiles), 0.0f);
  pooled.rows.clear();
  pooled.row_start.assign(1, 0);
  for (std::int64_t t = 0; t < tiles; ++t) {
    const std::int64_t end = std::min(kv_len, (t + 1) * block_kv);
    for (std::int64_t key = t * block_kv; key < end; ++key) {
      if (!filter.excluded(key)) {
        pooled.rows.push_back(sources.empty() ? key : sources[static_cast<std::size_t>(key)]);
      }
    }
    pooled.row_start.push_back(static_cast<std::int64_t>(pooled.rows.size()));
    const std::int64_t n = pooled.row_start[static_cast<std::size_t>(t) + 1] -
                           pooled.row_start[static_cast<std::size_t>(t)];
    if (n == 0) continue;
    pooled.keep.push_back(static_cast<std::int32_t>(t));
    pooled.log_count[static_cast<std::size_t>(t)] = std::log(static_cast<float>(n));
  }
}

namespace {

// The means of tile t of head h from its double sums.
void store_means(PooledTiles& pooled, std::int64_t h, std::int64_t t, std::int64_t count,
                 const double* key_sum, const double* value_sum) {
  const double inv = 1.0 / static_cast<double>(count);
  float* key_mean = pooled.keys.data() + (h * pooled.tiles + t) * pooled.d;
  float* value_mean = pooled.values.data() + (h * pooled.tiles + t) * pooled.dv;
  for (std::int64_t c = 0; c < pooled.d; ++c) key_mean[c] = static_cast<float>(key_sum[c] * inv);
  for (std::int64_t c = 0; c < pooled.dv; ++c) {
    value_mean[c] = static_cast<float>(value_sum[c] * inv);
  }
}

// Tile t of head h: its keys summed in order on the target's vector lanes
// (the channels; the order per channel is fixed), then its means.
void pool_tile(const kernel::TargetOps& ops, const TensorView& k, const TensorView& v,
               std::int64_t h, std::int64_t t, PooledTiles& pooled) {
  double key_sum[kernel_limits::kMaxHeadDim] = {};
  double value_sum[kernel_limits::kMaxHeadDim] = {};
  const std::int64_t begin = pooled.row_start[static_cast<std::size_t>(t)];
  const std::int64_t end = pooled.row_start[static_cast<std::size_t>(t) + 1];
  for (std::int64_t i = begin; i < end; i += kRowChunk) {
    const std::int64_t* rows = pooled.rows.data() + i;
    const std::int64_t n = std::min(kRowChunk, end - i);
    ops.sum_rows(k, h, rows, n, key_sum);
    ops.sum_rows(v, h, rows, n, value_sum);
  }
  store_means(pooled, h, t, end - begin, key_sum, value_sum);
}

}  // namespace

bool KeyFilter::excluded(std::int64_t key) const {
  if (limit >= 0 && key >= limit) return true;
  if (count == 0 || key < first || (key - first) % stride != 0) return false;
  return (key - first) / stride < count;
}

void pool_head(const TensorView& k, const TensorView& v, std::int64_t h, PooledTiles& pooled) {
  const kernel::TargetOps& ops = kernel::active_target();
  for (const std::int32_t t : pooled.keep) pool_tile(ops, k, v, h, t, pooled);
}

void pool_tiles(ThreadingContext& context, int threads, const TensorView& k, const TensorView& v,
                std::int64_t block_kv, const KeyFilter& filter, PooledTiles& pooled,
                std::span<const std::int64_t> sources) {
  prepare_pooled(k, v, block_kv, filter, pooled, sources);
  const std::int64_t kept = static_cast<std::int64_t>(pooled.keep.size());
  // One item per (head, kept tile).
  const kernel::TargetOps& ops = kernel::active_target();
  context.run(threads, k.heads * kept, [&](std::int64_t item, int) {
    pool_tile(ops, k, v, item / kept, pooled.keep[static_cast<std::size_t>(item % kept)], pooled);
  });
}

}  // namespace tilesplash::compensation
