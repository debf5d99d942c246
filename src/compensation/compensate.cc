// The compensation pass and the compensated kernel call; see compensation.h.
#include <algorithm>
#include <cmath>
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
};

struct Pass {
  const kernel::TargetOps& ops;
  const TilePlan& plan;
  const TensorView& q;
  const PooledTiles& pooled;
  float scale;
  const MutableTensorView& out;
  float* lse;
};

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
  gather_panels(p.pooled, h, s);
  const IndexRange rows = p.plan.q_range(qb);
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
                             const MutableTensorView& out, float* lse) {
  const std::int64_t heads = q.heads, blocks = plan.num_q_blocks();
  const Pass pass{kernel::active_target(), plan, q, pooled, scale, out, lse};
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
  compensate(context, p.threads, *p.plan, p.q, workspace.pooled, p.scale, p.out, p.lse);
  if (!own_out) return;
  context.run(p.threads, heads, [&](std::int64_t h, int) {
    for (std::int64_t row = 0; row < q_len; ++row) {
      store_row(params.out, h, row, f32_row(p.out, h, row));
    }
  });
}

}  // namespace tilesplash::compensation
