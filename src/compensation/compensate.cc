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
  std::vector<float> score;           // per skipped tile
  float q[kernel_limits::kMaxHeadDim];
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

// One (head, q-block); false when it skips no pooled tile (rows untouched).
bool compensate_block(const Pass& p, std::int64_t h, std::int64_t qb, Scratch& s) {
  skipped_tiles(p.plan, qb, p.pooled, s.visited, s.skipped);
  if (s.skipped.empty()) return false;
  s.score.resize(s.skipped.size());
  const IndexRange rows = p.plan.q_range(qb);
  for (std::int64_t row = rows.begin; row < rows.end; ++row) {
    load_row(p.q, h, row, s.q);
    compensate_row(p.ops, s.q, p.pooled, h, s.skipped, p.scale, f32_row(p.out, h, row),
                   p.lse + h * p.q.len + row, s.score.data());
  }
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
