// The compensation pass and the compensated kernel call; see compensation.h.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "compensation/compensation.h"
#include "compensation/rows.h"
#include "kernel/isa_dispatch.h"

namespace tilesplash::compensation {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Scratch {
  std::vector<std::uint8_t> visited;  // per kv tile of the plan
  std::vector<std::int32_t> skipped;  // pooled tiles the q-block skips, ascending
  std::vector<float> panels, bias;    // their mean keys in panels, log counts
  std::vector<float> rows, scores;    // the block's queries in f32; merge scratch
  // The bf16 dot-product merge's (kernel::PooledMergeDotArgs): queries, mean
  // keys and values in the kernel's bf16 pair layouts; weights; accumulators.
  std::vector<std::uint32_t> q_pairs, key_pairs, value_pairs, probs;
  std::vector<float> acc;
};

// The pooled means rounded to bf16 once per call, for the dot-product merge:
// keys as pairs of adjacent channels, [heads][tiles][d / 2]; values
// [heads][tiles][dv]. Per q-block the merge then only copies them into place.
struct Bf16Means {
  std::vector<std::uint32_t> key_pairs;
  std::vector<std::uint16_t> values;
};

struct Pass {
  const kernel::TargetOps& ops;
  const TilePlan& plan;
  const TensorView& q;
  const PooledTiles& pooled;
  float scale;
  const MutableTensorView& out;
  float* lse;
  const Bf16Means* means;  // not null: bf16 queries through ops.pooled_merge_dot
};

std::int64_t round_up(std::int64_t n, std::int64_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

Bf16Means round_means(ThreadingContext& context, int threads, const PooledTiles& pooled) {
  const std::int64_t pairs = pooled.d / 2, dv = pooled.dv, tiles = pooled.tiles;
  Bf16Means means;
  means.key_pairs.resize(static_cast<std::size_t>(pooled.heads * tiles * pairs));
  means.values.resize(static_cast<std::size_t>(pooled.heads * tiles * dv));
  context.run(threads, pooled.heads, [&](std::int64_t h, int) {
    const float* keys = pooled.keys.data() + h * tiles * pooled.d;
    std::uint32_t* key_pairs = means.key_pairs.data() + h * tiles * pairs;
    for (std::int64_t i = 0; i < tiles * pairs; ++i) {
      key_pairs[i] = static_cast<std::uint32_t>(float_to_bf16(keys[2 * i])) |
                     (static_cast<std::uint32_t>(float_to_bf16(keys[2 * i + 1])) << 16);
    }
    const float* values = pooled.values.data() + h * tiles * dv;
    std::uint16_t* rounded = means.values.data() + h * tiles * dv;
    for (std::int64_t i = 0; i < tiles * dv; ++i) rounded[i] = float_to_bf16(values[i]);
  });
  return means;
}

// The skipped tiles' mean keys and values of head h in the bf16 layouts of
// kernel::PooledMergeDotArgs, and their log counts (-inf for padding).
void gather_pairs(const PooledTiles& pooled, const Bf16Means& means, std::int64_t h, Scratch& s) {
  constexpr std::int64_t kPanel = kernel::kDotMergePanel;
  const std::int64_t pairs = pooled.d / 2, dv = pooled.dv;
  const std::int64_t n = static_cast<std::int64_t>(s.skipped.size());
  const std::int64_t padded = round_up(n, kPanel), dvp = round_up(dv, kPanel);
  const std::uint32_t* key_pairs = means.key_pairs.data() + h * pooled.tiles * pairs;
  const std::uint16_t* values = means.values.data() + h * pooled.tiles * dv;
  s.key_pairs.resize(static_cast<std::size_t>(padded * pairs));
  // Only the last panel has padding keys, and they must be zero.
  std::fill(s.key_pairs.begin() + (padded - kPanel) * pairs, s.key_pairs.end(), 0u);
  s.value_pairs.assign(static_cast<std::size_t>(padded / 2 * dvp), 0);
  s.bias.assign(static_cast<std::size_t>(padded), kNegInf);
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int64_t tile = s.skipped[static_cast<std::size_t>(j)];
    const std::uint32_t* key = key_pairs + tile * pairs;
    std::uint32_t* panel = s.key_pairs.data() + (j / kPanel) * kPanel * pairs + j % kPanel;
    for (std::int64_t c = 0; c < pairs; ++c) panel[c * kPanel] = key[c];
    s.bias[static_cast<std::size_t>(j)] = pooled.log_count[static_cast<std::size_t>(tile)];
  }
  for (std::int64_t j = 0; j < n; j += 2) {  // value pairs: tile j low, j + 1 high
    const std::uint16_t* low = values + s.skipped[static_cast<std::size_t>(j)] * dv;
    std::uint32_t* row = s.value_pairs.data() + (j / 2) * dvp;
    if (j + 1 < n) {
      const std::uint16_t* high = values + s.skipped[static_cast<std::size_t>(j + 1)] * dv;
      for (std::int64_t c = 0; c < dv; ++c) {
        row[c] = static_cast<std::uint32_t>(low[c]) | (static_cast<std::uint32_t>(high[c]) << 16);
      }
    } else {
      for (std::int64_t c = 0; c < dv; ++c) row[c] = low[c];
    }
  }
}

// compensate_block's merge on the bf16 dot product: the block's bf16 query
// rows as they are, the pooled means rounded to bf16.
void merge_block_dot(const Pass& p, std::int64_t h, IndexRange rows, Scratch& s) {
  gather_pairs(p.pooled, *p.means, h, s);
  const std::int64_t count = rows.end - rows.begin, pairs = p.pooled.d / 2;
  const auto padded = static_cast<std::int64_t>(s.bias.size());
  const std::int64_t dvp = round_up(p.pooled.dv, kernel::kDotMergePanel);
  s.q_pairs.resize(static_cast<std::size_t>(count * pairs));
  for (std::int64_t row = rows.begin; row < rows.end; ++row) {
    const auto* src =
        static_cast<const std::uint16_t*>(p.q.data) + h * p.q.head_stride + row * p.q.row_stride;
    std::memcpy(s.q_pairs.data() + (row - rows.begin) * pairs, src,
                static_cast<std::size_t>(pairs) * sizeof(std::uint32_t));
  }
  s.scores.resize(static_cast<std::size_t>(kernel::kMaxMergeRows * padded));
  s.probs.resize(static_cast<std::size_t>(kernel::kMaxMergeRows * padded / 2));
  s.acc.resize(static_cast<std::size_t>(kernel::kMaxMergeRows * dvp));
  kernel::PooledMergeDotArgs args;
  args.q = s.q_pairs.data();
  args.q_stride = pairs;
  args.rows = count;
  args.d = p.pooled.d;
  args.key_panels = s.key_pairs.data();
  args.bias = s.bias.data();
  args.n = static_cast<std::int64_t>(s.skipped.size());
  args.n_padded = padded;
  args.value_pairs = s.value_pairs.data();
  args.dv = p.pooled.dv;
  args.dvp = dvp;
  args.scale = p.scale;
  args.o = f32_row(p.out, h, rows.begin);
  args.o_stride = p.out.row_stride;
  args.lse = p.lse + h * p.q.len + rows.begin;
  args.scores = s.scores.data();
  args.probs = s.probs.data();
  args.acc = s.acc.data();
  p.ops.pooled_merge_dot(args);
}

// The skipped tiles' mean keys of head h in the panel layout of
// kernel::PooledMergeArgs, padded with zero keys of bias -inf.
void gather_panels(const PooledTiles& pooled, std::int64_t h, Scratch& s) {
  constexpr std::int64_t kPanel = kernel::kCentroidPanel;
  const std::int64_t d = pooled.d, n = static_cast<std::int64_t>(s.skipped.size());
  const std::int64_t padded = (n + kPanel - 1) / kPanel * kPanel;
  const float* keys = pooled.keys.data() + h * pooled.tiles * d;
  s.panels.assign(static_cast<std::size_t>(padded * d), 0.0f);
  s.bias.assign(static_cast<std::size_t>(padded), kNegInf);
  for (std::int64_t j = 0; j < n; ++j) {
    const std::int32_t tile = s.skipped[static_cast<std::size_t>(j)];
    const float* key = keys + static_cast<std::int64_t>(tile) * d;
    float* panel = s.panels.data() + (j / kPanel) * kPanel * d + j % kPanel;
    for (std::int64_t t = 0; t < d; ++t) panel[t * kPanel] = key[t];
    s.bias[static_cast<std::size_t>(j)] = pooled.log_count[static_cast<std::size_t>(tile)];
  }
}

// One (head, q-block); false when it skips no pooled tile (rows untouched).
bool compensate_block(const Pass& p, std::int64_t h, std::int64_t qb, Scratch& s) {
  skipped_tiles(p.plan, qb, p.pooled, s.visited, s.skipped);
  if (s.skipped.empty()) return false;
  const IndexRange rows = p.plan.q_range(qb);
  if (p.means != nullptr) {
    merge_block_dot(p, h, rows, s);
    return true;
  }
  gather_panels(p.pooled, h, s);
  const std::int64_t count = rows.end - rows.begin, d = p.pooled.d;
  s.rows.resize(static_cast<std::size_t>(count * d));
  for (std::int64_t row = rows.begin; row < rows.end; ++row) {
    load_row(p.q, h, row, s.rows.data() + (row - rows.begin) * d);
  }
  const auto padded = static_cast<std::int64_t>(s.bias.size());
  s.scores.resize(static_cast<std::size_t>(kernel::kMaxMergeRows * padded));
  kernel::PooledMergeArgs args;
  args.q = s.rows.data();
  args.rows = count;
  args.d = d;
  args.key_panels = s.panels.data();
  args.bias = s.bias.data();
  args.n = static_cast<std::int64_t>(s.skipped.size());
  args.n_padded = padded;
  args.values = p.pooled.values.data() + h * p.pooled.tiles * p.pooled.dv;
  args.index = s.skipped.data();
  args.dv = p.pooled.dv;
  args.scale = p.scale;
  args.o = f32_row(p.out, h, rows.begin);
  args.o_stride = p.out.row_stride;
  args.lse = p.lse + h * p.q.len + rows.begin;
  args.scores = s.scores.data();
  p.ops.pooled_merge(args);
  return true;
}

}  // namespace

void skipped_tiles(const TilePlan& plan, std::int64_t qb, const PooledTiles& pooled,
                   std::vector<std::uint8_t>& visited, std::vector<std::int32_t>& skipped) {
  visited.assign(static_cast<std::size_t>(plan.num_kv_blocks()), 0);
  for (const PlanTile& tile : plan.tiles(qb)) visited[static_cast<std::size_t>(tile.kv_block)] = 1;
  skipped.clear();
  for (const std::int32_t t : pooled.keep) {
    if (visited[static_cast<std::size_t>(t)] == 0) skipped.push_back(t);
  }
}

// The merge e^{lse - top} O + sum_t n_t e^{s_t - top} v̄_t over e^{lse - top}
// + sum_t n_t e^{s_t - top}, top the largest of lse and every s_t + log n_t.
void compensate_row(const kernel::TargetOps& ops, const float* q, const PooledTiles& pooled,
                    std::int64_t h, std::span<const std::int32_t> skipped, float scale, float* o,
                    float* lse, float* scores) {
  const std::int64_t d = pooled.d, dv = pooled.dv;
  const std::int64_t n = static_cast<std::int64_t>(skipped.size());
  if (n == 0) return;  // nothing to add (and no 0 / 0 for a row with no kept key)
  const float* keys = pooled.keys.data() + h * pooled.tiles * d;
  const float* values = pooled.values.data() + h * pooled.tiles * dv;
  ops.gather_dot(q, keys, d, skipped.data(), n, scale, scores);
  float top = *lse;
  for (std::int64_t i = 0; i < n; ++i) {
    scores[i] += pooled.log_count[static_cast<std::size_t>(skipped[i])];
    top = std::max(top, scores[i]);
  }
  const float exact = *lse == kNegInf ? 0.0f : std::exp(*lse - top);
  float sum = exact;
  for (std::int64_t i = 0; i < n; ++i) {
    scores[i] = std::exp(scores[i] - top);
    sum += scores[i];
  }
  float acc[kernel_limits::kMaxHeadDim];
  std::copy(o, o + dv, acc);
  ops.gather_axpy(scores, values, dv, skipped.data(), n, exact, acc);
  const float inv = 1.0f / sum;
  for (std::int64_t c = 0; c < dv; ++c) o[c] = acc[c] * inv;
  *lse = top + std::log(sum);
}

std::vector<bool> compensate(ThreadingContext& context, int threads, const TilePlan& plan,
                             const TensorView& q, const PooledTiles& pooled, float scale,
                             const MutableTensorView& out, float* lse, bool bf16_dot) {
  const std::int64_t heads = q.heads, blocks = plan.num_q_blocks();
  const kernel::TargetOps& ops = kernel::active_target();
  const bool dot = bf16_dot && q.dtype == DType::kBF16 && ops.pooled_merge_dot != nullptr;
  Bf16Means means;
  if (dot) means = round_means(context, threads, pooled);
  const Pass pass{ops, plan, q, pooled, scale, out, lse, dot ? &means : nullptr};
  std::vector<std::uint8_t> changed(static_cast<std::size_t>(heads * blocks), 0);
  std::vector<Scratch> scratch(static_cast<std::size_t>(context.resolve(threads)));
  if (!pooled.keep.empty()) {
    context.run(threads, heads * blocks, [&](std::int64_t item, int worker) {
      changed[static_cast<std::size_t>(item)] = compensate_block(
          pass, item / blocks, item % blocks, scratch[static_cast<std::size_t>(worker)]);
    });
  }
  std::vector<bool> any(static_cast<std::size_t>(heads), false);
  for (std::int64_t item = 0; item < heads * blocks; ++item) {
    if (changed[static_cast<std::size_t>(item)] != 0)
      any[static_cast<std::size_t>(item / blocks)] = true;
  }
  return any;
}

void compensated_forward(const kernel::ForwardParams& params, kernel::ForwardFn forward,
                         kernel::Workspace& kernel_workspace, Workspace& workspace,
                         ThreadingContext& context) {
  const std::int64_t heads = params.q.heads, q_len = params.q.len, dv = params.v.dim;
  kernel::ForwardParams p = params;
  // The kernel's f32 rows and LSEs: the caller's own when they are that.
  const bool own_out = params.out.dtype != DType::kF32;
  if (own_out) {
    workspace.out.resize(static_cast<std::size_t>(heads * q_len * dv));
    p.out = MutableTensorView::contiguous(workspace.out.data(), DType::kF32, heads, q_len, dv);
  }
  if (params.lse == nullptr) {
    workspace.lse.resize(static_cast<std::size_t>(heads * q_len));
    p.lse = workspace.lse.data();
  }
  forward(p, kernel_workspace, context);
  pool_tiles(context, p.threads, p.k, p.v, p.plan->blocks().block_kv, {}, workspace.pooled);
  compensate(context, p.threads, *p.plan, p.q, workspace.pooled, p.scale, p.out, p.lse, p.bf16_dot);
  if (!own_out) return;
  context.run(p.threads, heads, [&](std::int64_t h, int) {
    for (std::int64_t row = 0; row < q_len; ++row) {
      store_row(params.out, h, row, f32_row(p.out, h, row));
    }
  });
}

}  // namespace tilesplash::compensation
