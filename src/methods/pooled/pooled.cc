// Pooled-score selection of key tiles per query tile (pooled.h).
#include "tilesplash/pooled.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "clusters/cluster_nodes.h"
#include "compensation/rows.h"
#include "methods/pooled/pooled_node.h"

namespace tilesplash {
namespace {

[[noreturn]] void fail(const std::string& message) { throw std::invalid_argument(message); }

std::int64_t tiles_of(std::int64_t n, std::int64_t block) { return (n + block - 1) / block; }

IndexRange tile_range(std::int64_t t, std::int64_t block, std::int64_t n) {
  return {t * block, std::min(n, (t + 1) * block)};
}

// Means of one head's rows per tile of run positions, in double ([tiles][d]).
std::vector<double> tile_means(ThreadingContext& context, int threads, const TensorView& t,
                               std::int64_t head, std::int64_t block, const RowOrder& order) {
  const std::int64_t n = t.len, d = t.dim, tiles = tiles_of(n, block);
  std::vector<double> means(static_cast<std::size_t>(tiles * d), 0.0);
  context.run(threads, tiles, [&](std::int64_t tile, int) {
    std::vector<float> row(static_cast<std::size_t>(d));
    double* mean = means.data() + tile * d;
    const IndexRange r = tile_range(tile, block, n);
    for (std::int64_t i = r.begin; i < r.end; ++i) {
      compensation::load_row(t, head, order.source(i), row.data());
      for (std::int64_t c = 0; c < d; ++c) mean[c] += row[static_cast<std::size_t>(c)];
    }
    for (std::int64_t c = 0; c < d; ++c) mean[c] /= static_cast<double>(r.size());
  });
  return means;
}

// Per key tile: mean over its keys of cos(k, k̄) (SpargeAttn's self-similarity);
// a zero vector is similar only to a zero mean.
std::vector<double> self_similarity(ThreadingContext& context, int threads, const TensorView& k,
                                    std::int64_t head, std::int64_t block,
                                    const std::vector<double>& means, const RowOrder& order) {
  const std::int64_t n = k.len, d = k.dim, tiles = tiles_of(n, block);
  std::vector<double> sim(static_cast<std::size_t>(tiles), 0.0);
  context.run(threads, tiles, [&](std::int64_t tile, int) {
    std::vector<float> row(static_cast<std::size_t>(d));
    const double* mean = means.data() + tile * d;
    double mean_norm = 0.0;
    for (std::int64_t c = 0; c < d; ++c) mean_norm += mean[c] * mean[c];
    mean_norm = std::sqrt(mean_norm);
    const IndexRange r = tile_range(tile, block, n);
    double sum = 0.0;
    for (std::int64_t i = r.begin; i < r.end; ++i) {
      compensation::load_row(k, head, order.source(i), row.data());
      double dot = 0.0, norm = 0.0;
      for (std::int64_t c = 0; c < d; ++c) {
        const double x = row[static_cast<std::size_t>(c)];
        dot += x * mean[c];
        norm += x * x;
      }
      norm = std::sqrt(norm);
      if (norm == 0.0 || mean_norm == 0.0) {
        sum += (norm == 0.0 && mean_norm == 0.0) ? 1.0 : 0.0;
      } else {
        sum += std::clamp(dot / (norm * mean_norm), -1.0, 1.0);
      }
    }
    sim[static_cast<std::size_t>(tile)] = sum / static_cast<double>(r.size());
  });
  return sim;
}

// One query tile's ranking: forced key tiles, then the others by falling
// mass, each with the mass kept before it (forced tiles first).
struct RowRanking {
  std::vector<std::int32_t> forced;  // ascending
  std::vector<std::int32_t> ranked;  // by falling mass, lower index on a tie
  std::vector<double> mass;          // of ranked[r]
  std::vector<double> before;        // mass of the forced tiles and ranked[0, r)
  double forced_mass = 0.0;
};

struct HeadTiles {
  std::int64_t n = 0, q_tiles = 0, kv_tiles = 0, d = 0;
  BlockSizes blocks;
  std::vector<double> q_means, k_means;
  std::vector<std::uint8_t> forced_cols;  // sink, text and gated key tiles
  std::vector<std::uint8_t> full_rows;    // query tiles over text rows (text_full)
};

void rank_row(const HeadTiles& h, std::int64_t i, double scale, RowRanking& out) {
  const std::int64_t kt = h.kv_tiles, d = h.d;
  std::vector<double> score(static_cast<std::size_t>(kt));
  const double* qm = h.q_means.data() + i * d;
  double top = -INFINITY;
  for (std::int64_t j = 0; j < kt; ++j) {
    const double* km = h.k_means.data() + j * d;
    double dot = 0.0;
    for (std::int64_t c = 0; c < d; ++c) dot += qm[c] * km[c];
    score[static_cast<std::size_t>(j)] = scale * dot;
    top = std::max(top, scale * dot);
  }
  double total = 0.0;
  for (std::int64_t j = 0; j < kt; ++j) {
    const double size = static_cast<double>(tile_range(j, h.blocks.block_kv, h.n).size());
    score[static_cast<std::size_t>(j)] = size * std::exp(score[static_cast<std::size_t>(j)] - top);
    total += score[static_cast<std::size_t>(j)];
  }
  const IndexRange rows = tile_range(i, h.blocks.block_q, h.n);
  double kept = 0.0;
  std::vector<std::int32_t> others;
  for (std::int64_t j = 0; j < kt; ++j) {
    const IndexRange cols = tile_range(j, h.blocks.block_kv, h.n);
    const bool diagonal = cols.begin < rows.end && rows.begin < cols.end;
    const double w = score[static_cast<std::size_t>(j)] / total;
    score[static_cast<std::size_t>(j)] = w;
    if (diagonal || h.full_rows[static_cast<std::size_t>(i)] != 0 ||
        h.forced_cols[static_cast<std::size_t>(j)] != 0) {
      out.forced.push_back(static_cast<std::int32_t>(j));
      kept += w;
    } else {
      others.push_back(static_cast<std::int32_t>(j));
    }
  }
  out.forced_mass = kept;
  std::stable_sort(others.begin(), others.end(), [&](std::int32_t a, std::int32_t b) {
    return score[static_cast<std::size_t>(a)] > score[static_cast<std::size_t>(b)];
  });
  for (const std::int32_t j : others) {
    out.ranked.push_back(j);
    out.mass.push_back(score[static_cast<std::size_t>(j)]);
    out.before.push_back(kept);
    kept += score[static_cast<std::size_t>(j)];
  }
}

// How many ranked tiles of `row` are kept at p with the floor.
std::size_t ranked_kept(const RowRanking& row, double p, std::int64_t floor) {
  std::size_t count = 0;
  for (; count < row.ranked.size(); ++count) {
    const auto total = static_cast<std::int64_t>(row.forced.size() + count);
    const bool mass = row.mass[count] > 0.0 && (p >= 1.0 || row.before[count] < p);
    if (!(total < floor || mass)) break;
  }
  return count;
}

}  // namespace

PooledOrder parse_pooled_order(std::string_view name) {
  if (name == "auto") return PooledOrder::kAuto;
  if (name == "frame") return PooledOrder::kFrame;
  if (name == "token") return PooledOrder::kToken;
  fail("order: expected auto, frame or token, got '" + std::string(name) + "'");
}

const char* pooled_order_name(PooledOrder order) {
  switch (order) {
    case PooledOrder::kFrame:
      return "frame";
    case PooledOrder::kToken:
      return "token";
    case PooledOrder::kAuto:
      break;
  }
  return "auto";
}

void check_pooled_options(const PooledOptions& o) {
  if (!(o.p > 0.0 && o.p <= 1.0))
    fail("p: expected a cumulative mass in (0, 1], got " + std::to_string(o.p));
  if (o.floor < 0)
    fail("floor: expected key tiles per query tile >= 0, got " + std::to_string(o.floor));
  if (!(o.gate >= -1.0 && o.gate <= 1.0)) {
    fail("gate: expected a cosine similarity in [-1, 1], got " + std::to_string(o.gate));
  }
  if (!(o.gate_share >= 0.0 && o.gate_share <= 1.0)) {
    fail("gate_share: expected a share of the density in [0, 1], got " +
         std::to_string(o.gate_share));
  }
  if (o.density && !(*o.density > 0.0 && *o.density <= 1.0)) {
    fail("density: expected a density in (0, 1], got " + std::to_string(*o.density));
  }
  if (o.blocks.block_q < 1 || o.blocks.block_kv < 1) {
    fail("blocks: expected block sizes >= 1, got " + std::to_string(o.blocks.block_q) + " x " +
         std::to_string(o.blocks.block_kv));
  }
}

namespace {

void check_inputs(const VideoGeometry& geometry, const TensorView& q, const TensorView& k,
                  std::int64_t head, double scale) {
  geometry.validate();
  const std::int64_t n = geometry.tokens();
  if (q.len != n || k.len != n) {
    fail("q, k: expected " + std::to_string(n) + " tokens (the geometry's), got " +
         std::to_string(q.len) + " and " + std::to_string(k.len));
  }
  if (q.dim != k.dim || q.dim < 1) {
    fail("q, k: expected one head dim >= 1, got " + std::to_string(q.dim) + " and " +
         std::to_string(k.dim));
  }
  if (head < 0 || head >= q.heads || head >= k.heads) {
    fail("head: expected an index below " + std::to_string(std::min(q.heads, k.heads)) + ", got " +
         std::to_string(head));
  }
  if (!(scale > 0.0) || !std::isfinite(scale)) {
    fail("scale: expected a finite softmax scale > 0, got " + std::to_string(scale));
  }
}

// The tiles (of `block` run positions) holding a row of original `range`
// set in `flags`.
void mark(std::vector<std::uint8_t>& flags, IndexRange range, std::int64_t block,
          const RowOrder& order) {
  for (std::int64_t row = range.begin; row < range.end; ++row) {
    flags[static_cast<std::size_t>(order.position(row) / block)] = 1;
  }
}

// The gate: key tiles of self-similarity below o.gate forced, by rising
// similarity (lower index on a tie); with a density target, only while
// their columns fit in o.gate_share of it.
void gate_columns(HeadTiles& h, const std::vector<double>& sim, const PooledOptions& o) {
  std::vector<std::int32_t> gated;
  for (std::int64_t j = 0; j < h.kv_tiles; ++j) {
    if (sim[static_cast<std::size_t>(j)] < o.gate) gated.push_back(static_cast<std::int32_t>(j));
  }
  std::stable_sort(gated.begin(), gated.end(), [&](std::int32_t a, std::int32_t b) {
    return sim[static_cast<std::size_t>(a)] < sim[static_cast<std::size_t>(b)];
  });
  const double budget = o.density ? o.gate_share * *o.density * double(h.n) * double(h.n) : 0.0;
  double area = 0.0;
  for (const std::int32_t j : gated) {
    area += static_cast<double>(tile_range(j, h.blocks.block_kv, h.n).size() * h.n);
    if (o.density && area > budget) break;
    h.forced_cols[static_cast<std::size_t>(j)] = 1;
  }
}

HeadTiles head_tiles(ThreadingContext& context, int threads, const VideoGeometry& geometry,
                     const TensorView& q, const TensorView& k, std::int64_t head,
                     const PooledOptions& o, const RowOrder& order) {
  HeadTiles h;
  h.n = geometry.tokens();
  h.d = q.dim;
  h.blocks = o.blocks;
  h.q_tiles = tiles_of(h.n, o.blocks.block_q);
  h.kv_tiles = tiles_of(h.n, o.blocks.block_kv);
  h.q_means = tile_means(context, threads, q, head, o.blocks.block_q, order);
  h.k_means = tile_means(context, threads, k, head, o.blocks.block_kv, order);
  h.forced_cols.assign(static_cast<std::size_t>(h.kv_tiles), 0);
  h.full_rows.assign(static_cast<std::size_t>(h.q_tiles), 0);
  if (o.sink) {
    const std::int64_t first = geometry.video_range().begin;
    mark(h.forced_cols, {first, first + geometry.tokens_per_frame()}, o.blocks.block_kv, order);
  }
  if (o.text_full) {
    mark(h.forced_cols, geometry.text_range(), o.blocks.block_kv, order);
    mark(h.full_rows, geometry.text_range(), o.blocks.block_q, order);
  }
  const std::vector<double> sim =
      self_similarity(context, threads, k, head, o.blocks.block_kv, h.k_means, order);
  gate_columns(h, sim, o);
  return h;
}

std::int64_t pair_area(const HeadTiles& h, std::int64_t i, std::int64_t j) {
  return tile_range(i, h.blocks.block_q, h.n).size() * tile_range(j, h.blocks.block_kv, h.n).size();
}

// The smallest p whose selection keeps at least `density` of the map (1 when
// none does): a ranked tile beyond the floor enters once p exceeds the mass
// kept before it, so the densities over p are a step function of those masses.
double p_for_density(const HeadTiles& h, const std::vector<RowRanking>& rows, double density,
                     std::int64_t floor) {
  const double target = density * static_cast<double>(h.n) * static_cast<double>(h.n);
  double base = 0.0;
  std::vector<std::pair<double, std::int64_t>> events;  // (mass before, pair area)
  for (std::int64_t i = 0; i < h.q_tiles; ++i) {
    const RowRanking& row = rows[static_cast<std::size_t>(i)];
    for (const std::int32_t j : row.forced) base += static_cast<double>(pair_area(h, i, j));
    for (std::size_t r = 0; r < row.ranked.size(); ++r) {
      const std::int64_t area = pair_area(h, i, row.ranked[r]);
      if (static_cast<std::int64_t>(row.forced.size() + r) < floor) {
        base += static_cast<double>(area);
      } else if (row.mass[r] > 0.0) {
        events.emplace_back(row.before[r], area);
      }
    }
  }
  std::sort(events.begin(), events.end());
  if (base >= target) {
    return events.empty() || events.front().first <= 0.0 ? std::nextafter(0.0, 1.0)
                                                         : std::min(1.0, events.front().first);
  }
  double kept = base;
  for (std::size_t e = 0; e < events.size(); ++e) {
    kept += static_cast<double>(events[e].second);
    const bool group_ends = e + 1 == events.size() || events[e + 1].first != events[e].first;
    if (group_ends && kept >= target) return std::min(1.0, std::nextafter(events[e].first, 2.0));
  }
  return 1.0;
}

}  // namespace

namespace {

// One head's tiles in one order, every query tile's key tiles ranked: what
// every p of that order cuts from.
struct Ranking {
  RowOrder order;
  HeadTiles h;
  std::vector<RowRanking> rows;
};

Ranking rank_in(ThreadingContext& ctx, int threads, const VideoGeometry& geometry,
                const TensorView& q, const TensorView& k, std::int64_t head, double scale,
                const PooledOptions& options, RowOrder order) {
  Ranking r{order, head_tiles(ctx, threads, geometry, q, k, head, options, order), {}};
  r.rows.resize(static_cast<std::size_t>(r.h.q_tiles));
  ctx.run(threads, r.h.q_tiles, [&](std::int64_t i, int) {
    rank_row(r.h, i, scale, r.rows[static_cast<std::size_t>(i)]);
  });
  return r;
}

// The selection of `ranking` at options' density, else at p.
PooledSelection cut(const Ranking& ranking, const PooledOptions& options, double p) {
  const HeadTiles& h = ranking.h;
  PooledSelection s;
  s.order = ranking.order;
  s.tokens = h.n;
  s.blocks = options.blocks;
  s.q_tiles = h.q_tiles;
  s.kv_tiles = h.kv_tiles;
  s.p = options.density ? p_for_density(h, ranking.rows, *options.density, options.floor) : p;
  s.row_offsets.assign(1, 0);
  double mass = 0.0;
  for (std::int64_t i = 0; i < h.q_tiles; ++i) {
    const RowRanking& row = ranking.rows[static_cast<std::size_t>(i)];
    const std::size_t count = ranked_kept(row, s.p, options.floor);
    std::vector<std::int32_t> kept = row.forced;
    kept.insert(kept.end(), row.ranked.begin(),
                row.ranked.begin() + static_cast<std::ptrdiff_t>(count));
    std::sort(kept.begin(), kept.end());
    for (const std::int32_t j : kept) s.kept_pairs += pair_area(h, i, j);
    s.kept.insert(s.kept.end(), kept.begin(), kept.end());
    s.row_offsets.push_back(static_cast<std::int64_t>(s.kept.size()));
    const double row_mass =
        count > 0 ? row.before[count - 1] + row.mass[count - 1] : row.forced_mass;
    mass += row_mass * static_cast<double>(tile_range(i, h.blocks.block_q, h.n).size());
  }
  s.density = static_cast<double>(s.kept_pairs) / (static_cast<double>(h.n) * double(h.n));
  s.mass = mass / static_cast<double>(h.n);
  return s;
}

PooledSelection select_in(ThreadingContext& ctx, int threads, const VideoGeometry& geometry,
                          const TensorView& q, const TensorView& k, std::int64_t head, double scale,
                          const PooledOptions& options, RowOrder order) {
  return cut(rank_in(ctx, threads, geometry, q, k, head, scale, options, std::move(order)), options,
             options.p);
}

// kAuto's rule (pooled.h): at a density, the selection keeping more pooled
// mass; at a p, the sparser one; frame-major on a tie.
bool token_is_cheaper(const PooledSelection& frame, const PooledSelection& token,
                      const PooledOptions& options) {
  if (options.density) return token.mass > frame.mass;
  return token.kept_pairs < frame.kept_pairs;
}

}  // namespace

PooledSelection pooled_select(const VideoGeometry& geometry, const TensorView& q,
                              const TensorView& k, std::int64_t head, double scale,
                              const PooledOptions& options, int threads,
                              ThreadingContext* context) {
  check_pooled_options(options);
  check_inputs(geometry, q, k, head, scale);
  ThreadingContext& ctx = context != nullptr ? *context : *default_threading_context();
  const auto in = [&](RowOrder order) {
    return select_in(ctx, threads, geometry, q, k, head, scale, options, std::move(order));
  };
  if (options.order == PooledOrder::kToken) return in(RowOrder::token_major(geometry));
  PooledSelection frame = in(RowOrder());
  // With one frame the orders agree; with the sink token-major keeps every
  // tile (pooled_order_selections() says the same).
  if (options.order == PooledOrder::kFrame || geometry.frames < 2 || options.sink) return frame;
  PooledSelection token = in(RowOrder::token_major(geometry));
  return token_is_cheaper(frame, token, options) ? token : frame;
}

std::vector<PooledSelection> pooled_select_ps(const VideoGeometry& geometry, const TensorView& q,
                                              const TensorView& k, std::int64_t head, double scale,
                                              const PooledOptions& options,
                                              std::span<const double> ps, int threads,
                                              ThreadingContext* context) {
  PooledOptions o = options;
  o.density.reset();
  for (const double p : ps) {
    o.p = p;
    check_pooled_options(o);
  }
  check_inputs(geometry, q, k, head, scale);
  if (options.order == PooledOrder::kAuto) {
    fail("order: pooled_select_ps needs kFrame or kToken, got kAuto");
  }
  ThreadingContext& ctx = context != nullptr ? *context : *default_threading_context();
  const Ranking ranking =
      rank_in(ctx, threads, geometry, q, k, head, scale, o,
              options.order == PooledOrder::kToken ? RowOrder::token_major(geometry) : RowOrder());
  std::vector<PooledSelection> selections;
  for (const double p : ps) selections.push_back(cut(ranking, o, p));
  return selections;
}

Mask pooled_mask(const PooledSelection& selection) {
  return Mask(std::make_shared<detail::PooledTilesNode>(selection));
}

Mask pooled_original_mask(const PooledSelection& selection) {
  const Mask run = pooled_mask(selection);
  if (selection.order.is_identity()) return run;
  return Mask(std::make_shared<detail::RunOrderNode>(run, selection.order, selection.order,
                                                     selection.tokens));
}

TilePlan pooled_plan(const PooledSelection& selection) {
  return TilePlan::build(pooled_mask(selection), selection.tokens, selection.tokens,
                         selection.blocks);
}

}  // namespace tilesplash
