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
  std::vector<float> scores;
};

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
  for (std::int64_t x = 0; x < dv; ++x) o[x] = (a * o[x] + b * term[x]) / (a + b);
  exact_lse = top + std::log(a + b);
}

CompensationTerms compensation_terms(ThreadingContext& context, int threads, const TensorView& q,
                                     const TensorView& k, const TensorView& v,
                                     std::span<const CompensatedRun> runs,
                                     std::span<const std::int64_t> rows, float scale) {
  const std::int64_t heads = q.heads, d = q.dim, dv = v.dim;
  const std::int64_t r = static_cast<std::int64_t>(rows.size());
  const std::int64_t n = static_cast<std::int64_t>(runs.size());
  CompensationTerms terms;
  terms.rows = r;
  terms.candidates = n;
  terms.dv = dv;
  terms.out.assign(static_cast<std::size_t>(heads * r * n * dv), 0.0f);
  terms.lse.assign(static_cast<std::size_t>(heads * r * n), kNegInf);
  // The pooled tiles of each distinct (key order, filter, block_kv).
  std::vector<compensation::PooledTiles> pools;
  std::vector<std::size_t> pool_of(static_cast<std::size_t>(n));
  for (std::size_t c = 0; c < runs.size(); ++c) {
    std::size_t p = 0;
    while (p < c && !same_pool(runs[p], runs[c])) ++p;
    if (p < c) {
      pool_of[c] = pool_of[p];
      continue;
    }
    pool_of[c] = pools.size();
    pools.emplace_back();
    compensation::pool_tiles(context, threads, k, v, runs[c].plan->blocks().block_kv,
                             runs[c].filter, pools.back(), runs[c].kv_order.sources());
  }
  std::vector<float> queries(static_cast<std::size_t>(heads * r * d));
  for (std::int64_t h = 0; h < heads; ++h) {
    for (std::int64_t j = 0; j < r; ++j) {
      compensation::load_row(q, h, rows[static_cast<std::size_t>(j)],
                             queries.data() + (h * r + j) * d);
    }
  }
  const kernel::TargetOps& ops = kernel::active_target();
  std::vector<Scratch> scratch(static_cast<std::size_t>(context.resolve(threads)));
  // One item per (head, candidate), writing its own slots.
  context.run(threads, heads * n, [&](std::int64_t item, int worker) {
    Scratch& s = scratch[static_cast<std::size_t>(worker)];
    const std::int64_t h = item / n, c = item % n;
    const CompensatedRun& run = runs[static_cast<std::size_t>(c)];
    const compensation::PooledTiles& pooled = pools[pool_of[static_cast<std::size_t>(c)]];
    const std::int64_t block_q = run.plan->blocks().block_q;
    for (std::int64_t j = 0; j < r; ++j) {
      const std::int64_t row = rows[static_cast<std::size_t>(j)];
      const std::int64_t position = run.order.is_identity() ? row : run.order.position(row);
      compensation::skipped_tiles(*run.plan, position / block_q, pooled, s.visited, s.skipped);
      s.scores.resize(s.skipped.size());
      const std::size_t at = terms.at(h, j, c);
      compensation::compensate_row(ops, queries.data() + (h * r + j) * d, pooled, h, s.skipped,
                                   scale, terms.out.data() + at * static_cast<std::size_t>(dv),
                                   terms.lse.data() + at, s.scores.data());
    }
  });
  return terms;
}

}  // namespace tilesplash::detail
