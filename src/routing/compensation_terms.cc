// The router's compensation terms; see compensation_terms.h.
#include "routing/compensation_terms.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "compensation/rows.h"
#include "kernel/isa_dispatch.h"

namespace tilesplash::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Runs whose tiles pool the same keys: one pooling serves them all. Orders
// are compared by content: every rung of a ladder builds its own copy of its
// family's order (5 temporal rungs, 5 token-major copies), and pooling K and V
// once per copy was most of the compensated router's cost at small sizes.
bool same_pool(const CompensatedRun& a, const CompensatedRun& b) {
  const compensation::KeyFilter &x = a.filter, &y = b.filter;
  const std::span<const std::int64_t> p = a.kv_order.sources(), q = b.kv_order.sources();
  return (p.data() == q.data() || std::ranges::equal(p, q)) &&
         a.plan->blocks().block_kv == b.plan->blocks().block_kv && x.limit == y.limit &&
         x.first == y.first && x.count == y.count && x.stride == y.stride;
}

struct Scratch {
  std::vector<std::uint8_t> visited;
  std::vector<std::int32_t> skipped;
  std::vector<float> scores, weights;
  std::vector<std::vector<float>> by_tile;  // per pool: each tile's weight
  std::vector<float> top;                   // per pool: the weights' reference
};

// Row q (f32) against every kept tile of `pooled` (head h): each tile's
// weight n_t e^(scale q . k̄_t - top) into by_tile[t], top the largest of
// scale q . k̄_t + log n_t; returns top. One reference for every candidate's
// subset of the tiles: a subset whose weights all underflow against it is
// e^-87 of a tile the candidate keeps (its exact part holds at least that
// tile's pooled weight), so dropping it changes nothing in f32.
float tile_weights(const kernel::TargetOps& ops, const float* q,
                   const compensation::PooledTiles& pooled, std::int64_t h, float scale, Scratch& s,
                   std::vector<float>& by_tile) {
  const std::int64_t n = static_cast<std::int64_t>(pooled.keep.size());
  s.scores.resize(static_cast<std::size_t>(n));
  ops.gather_dot(q, pooled.keys.data() + h * pooled.tiles * pooled.d, pooled.d, pooled.keep.data(),
                 n, scale, s.scores.data());
  float top = kNegInf;
  for (std::int64_t i = 0; i < n; ++i) {
    s.scores[static_cast<std::size_t>(i)] +=
        pooled.log_count[static_cast<std::size_t>(pooled.keep[static_cast<std::size_t>(i)])];
    top = std::max(top, s.scores[static_cast<std::size_t>(i)]);
  }
  if (n > 0) ops.exp_weights(s.scores.data(), n, top);
  by_tile.assign(static_cast<std::size_t>(pooled.tiles), 0.0f);
  for (std::int64_t i = 0; i < n; ++i) {
    by_tile[static_cast<std::size_t>(pooled.keep[static_cast<std::size_t>(i)])] =
        s.scores[static_cast<std::size_t>(i)];
  }
  return top;
}

}  // namespace

void CompensationTerms::merge(std::int64_t h, std::int64_t j, std::int64_t c, double* o,
                              double& exact_lse) const {
  const std::size_t i = at(h, j, c);
  const double term_lse = lse[i];
  if (term_lse == -std::numeric_limits<double>::infinity()) return;
  const double top = std::max(exact_lse, term_lse);
  const double a =
      exact_lse == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(exact_lse - top);
  const double b = std::exp(term_lse - top);
  const float* term = out.data() + i * static_cast<std::size_t>(dv);
  const double inv = 1.0 / (a + b);
  for (std::int64_t x = 0; x < dv; ++x) o[x] = (a * o[x] + b * term[x]) * inv;
  exact_lse = top + std::log(a + b);
}

struct CompensationTerms::Inputs {
  ThreadingContext* context = nullptr;
  int threads = 0;
  TensorView q, k, v;
  std::vector<CompensatedRun> runs;
  std::vector<std::int64_t> rows;
  float scale = 1.0f;
  // The pooled tiles of each distinct (key order, filter, block_kv), and
  // each run's.
  std::vector<compensation::PooledTiles> pools;
  std::vector<std::size_t> pool_of;
  std::vector<std::uint8_t> filled;  // per head
};

void CompensationTerms::fill_head(std::int64_t h) {
  Inputs& in = *inputs;
  if (in.filled[static_cast<std::size_t>(h)] != 0) return;
  for (compensation::PooledTiles& pooled : in.pools) compensation::pool_head(in.k, in.v, h, pooled);
  const std::int64_t d = in.q.dim;
  std::vector<float> query(static_cast<std::size_t>(d));
  Scratch s;
  s.by_tile.resize(in.pools.size());
  s.top.resize(in.pools.size());
  const kernel::TargetOps& ops = kernel::active_target();
  // Per row, the tiles' weights once per pool (not per candidate: the ten
  // rungs of two ladders share two pools), then each candidate's skipped
  // tiles summed: the weighted mean of their values and its LSE.
  for (std::int64_t j = 0; j < rows; ++j) {
    const std::int64_t row = in.rows[static_cast<std::size_t>(j)];
    compensation::load_row(in.q, h, row, query.data());
    for (std::size_t p = 0; p < in.pools.size(); ++p) {
      s.top[p] = tile_weights(ops, query.data(), in.pools[p], h, in.scale, s, s.by_tile[p]);
    }
    for (std::int64_t c = 0; c < candidates; ++c) {
      const CompensatedRun& run = in.runs[static_cast<std::size_t>(c)];
      const std::size_t p = in.pool_of[static_cast<std::size_t>(c)];
      const compensation::PooledTiles& pooled = in.pools[p];
      const std::int64_t position = run.order.is_identity() ? row : run.order.position(row);
      compensation::skipped_tiles(*run.plan, position / run.plan->blocks().block_q, pooled,
                                  s.visited, s.skipped);
      const std::int64_t n = static_cast<std::int64_t>(s.skipped.size());
      s.weights.resize(static_cast<std::size_t>(n));
      float sum = 0.0f;
      for (std::int64_t t = 0; t < n; ++t) {
        s.weights[static_cast<std::size_t>(t)] =
            s.by_tile[p][static_cast<std::size_t>(s.skipped[static_cast<std::size_t>(t)])];
        sum += s.weights[static_cast<std::size_t>(t)];
      }
      if (!(sum > 0.0f)) continue;  // nothing skipped (or negligible): no term
      const std::size_t i = at(h, j, c);
      float* o = out.data() + i * static_cast<std::size_t>(dv);  // zero until now
      ops.gather_axpy(s.weights.data(), pooled.values.data() + h * pooled.tiles * dv, dv,
                      s.skipped.data(), n, 1.0f, o);
      const float inv = 1.0f / sum;
      for (std::int64_t x = 0; x < dv; ++x) o[x] *= inv;
      lse[i] = s.top[p] + std::log(sum);
    }
  }
  in.filled[static_cast<std::size_t>(h)] = 1;
}

void CompensationTerms::fill() {
  inputs->context->run(inputs->threads, inputs->q.heads,
                       [&](std::int64_t h, int) { fill_head(h); });
}

CompensationTerms compensation_terms(ThreadingContext& context, int threads, const TensorView& q,
                                     const TensorView& k, const TensorView& v,
                                     std::span<const CompensatedRun> runs,
                                     std::span<const std::int64_t> rows, float scale) {
  const std::int64_t heads = q.heads, dv = v.dim;
  const std::int64_t r = static_cast<std::int64_t>(rows.size());
  const std::int64_t n = static_cast<std::int64_t>(runs.size());
  CompensationTerms terms;
  terms.rows = r;
  terms.candidates = n;
  terms.dv = dv;
  terms.out.assign(static_cast<std::size_t>(heads * r * n * dv), 0.0f);
  terms.lse.assign(static_cast<std::size_t>(heads * r * n), kNegInf);
  auto in = std::make_shared<CompensationTerms::Inputs>();
  *in = {&context, threads, q,  k, v, {runs.begin(), runs.end()}, {rows.begin(), rows.end()},
         scale,    {},      {}, {}};
  in->pool_of.resize(static_cast<std::size_t>(n));
  for (std::size_t c = 0; c < runs.size(); ++c) {
    std::size_t p = 0;
    while (p < c && !same_pool(runs[p], runs[c])) ++p;
    if (p < c) {
      in->pool_of[c] = in->pool_of[p];
      continue;
    }
    in->pool_of[c] = in->pools.size();
    in->pools.emplace_back();
    compensation::prepare_pooled(k, v, runs[c].plan->blocks().block_kv, runs[c].filter,
                                 in->pools.back(), runs[c].kv_order.sources());
  }
  in->filled.assign(static_cast<std::size_t>(heads), 0);
  terms.inputs = std::move(in);
  return terms;
}

}  // namespace tilesplash::detail
