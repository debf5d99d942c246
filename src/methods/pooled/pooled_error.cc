// The pooled method's error-target rungs and their sampled errors (pooled.h).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "compensation/rows.h"
#include "tilesplash/pooled.h"
#include "tilesplash/routing.h"

namespace tilesplash {

std::span<const double> pooled_p_ladder() {
  static const std::vector<double> ladder = {0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 1.0};
  return ladder;
}

namespace {

std::vector<PooledOrder> allowed_orders(const VideoGeometry& geometry, const PooledOptions& o) {
  if (o.order != PooledOrder::kAuto) return {o.order};
  // With one frame the orders agree; with the sink token-major keeps every tile.
  if (geometry.frames < 2 || o.sink) return {PooledOrder::kFrame};
  return {PooledOrder::kFrame, PooledOrder::kToken};
}

}  // namespace

std::vector<PooledSelection> pooled_order_selections(const VideoGeometry& geometry,
                                                     const TensorView& q, const TensorView& k,
                                                     std::int64_t head, double scale,
                                                     const PooledOptions& options, int threads,
                                                     ThreadingContext* context) {
  PooledOptions o = options;
  std::vector<PooledSelection> selections;
  for (const PooledOrder order : allowed_orders(geometry, options)) {
    o.order = order;
    selections.push_back(pooled_select(geometry, q, k, head, scale, o, threads, context));
  }
  return selections;
}

std::vector<PooledSelection> pooled_ladder_selections(const VideoGeometry& geometry,
                                                      const TensorView& q, const TensorView& k,
                                                      std::int64_t head, double scale,
                                                      const PooledOptions& options, int threads,
                                                      ThreadingContext* context) {
  PooledOptions o = options;
  std::vector<PooledSelection> rungs;
  for (const PooledOrder order : allowed_orders(geometry, options)) {
    o.order = order;
    std::vector<PooledSelection> ladder =
        pooled_select_ps(geometry, q, k, head, scale, o, pooled_p_ladder(), threads, context);
    for (PooledSelection& rung : ladder) rungs.push_back(std::move(rung));
  }
  return rungs;
}

namespace {

// Row q's attention over the keys keep(j) says, into out (dv doubles), from
// its scores (one per key, -inf where padded) and values ([keys][dv]).
template <typename Keep>
void attend(const std::vector<double>& scores, const std::vector<double>& values, Keep keep,
            std::vector<double>& out) {
  const std::size_t dv = out.size();
  double top = -INFINITY;
  for (std::size_t j = 0; j < scores.size(); ++j) {
    if (keep(j)) top = std::max(top, scores[j]);
  }
  std::fill(out.begin(), out.end(), 0.0);
  if (top == -INFINITY) return;
  double sum = 0.0;
  for (std::size_t j = 0; j < scores.size(); ++j) {
    if (!keep(j) || scores[j] == -INFINITY) continue;
    const double w = std::exp(scores[j] - top);
    sum += w;
    const double* value = values.data() + j * dv;
    for (std::size_t c = 0; c < dv; ++c) out[c] += w * value[c];
  }
  for (double& x : out) x /= sum;
}

// Which key tiles (of the selection's run order) row r's query tile keeps,
// one flag per tile, so that a key's test is one lookup.
void kept_tiles(const PooledSelection& sel, std::int64_t r, std::vector<std::uint8_t>& kept) {
  const std::int64_t a = sel.order.position(r) / sel.blocks.block_q;
  kept.assign(static_cast<std::size_t>(sel.kv_tiles), 0);
  for (std::int64_t i = sel.row_offsets[static_cast<std::size_t>(a)];
       i < sel.row_offsets[static_cast<std::size_t>(a) + 1]; ++i) {
    kept[static_cast<std::size_t>(sel.kept[static_cast<std::size_t>(i)])] = 1;
  }
}

}  // namespace

std::vector<double> pooled_sampled_errors(const TensorView& q, const TensorView& k,
                                          const TensorView& v, std::int64_t head, double scale,
                                          std::span<const std::int64_t> rows,
                                          std::span<const PooledSelection> selections,
                                          std::int64_t key_limit) {
  const std::int64_t n = k.len, limit = key_limit < 0 ? n : std::min(key_limit, n);
  const auto dv = static_cast<std::size_t>(v.dim);
  std::vector<double> values(static_cast<std::size_t>(n) * dv);
  std::vector<float> row(static_cast<std::size_t>(std::max(q.dim, v.dim)));
  for (std::int64_t j = 0; j < n; ++j) {
    compensation::load_row(v, head, j, row.data());
    std::copy(row.begin(), row.begin() + v.dim,
              values.begin() + static_cast<std::ptrdiff_t>(j * v.dim));
  }
  std::vector<std::uint8_t> kept;
  std::vector<double> diff(selections.size(), 0.0), scores(static_cast<std::size_t>(n));
  std::vector<double> reference(dv), out(dv), keyrow(static_cast<std::size_t>(k.dim));
  double power = 0.0;
  for (const std::int64_t r : rows) {
    std::vector<float> qrow(static_cast<std::size_t>(q.dim));
    compensation::load_row(q, head, r, qrow.data());
    for (std::int64_t j = 0; j < n; ++j) {
      compensation::load_row(k, head, j, row.data());
      double dot = 0.0;
      for (std::int64_t c = 0; c < q.dim; ++c) dot += double(qrow[c]) * row[c];
      scores[static_cast<std::size_t>(j)] = j < limit ? scale * dot : -INFINITY;
    }
    attend(
        scores, values, [](std::size_t) { return true; }, reference);
    for (const double x : reference) power += x * x;
    for (std::size_t s = 0; s < selections.size(); ++s) {
      const PooledSelection& sel = selections[s];
      // Tiles are over run positions: the row's and each key's, in the selection's order.
      kept_tiles(sel, r, kept);
      const auto keep = [&](std::size_t j) {
        const std::int64_t key = sel.order.position(static_cast<std::int64_t>(j));
        return kept[static_cast<std::size_t>(key / sel.blocks.block_kv)] != 0;
      };
      attend(scores, values, keep, out);
      for (std::size_t c = 0; c < dv; ++c)
        diff[s] += (out[c] - reference[c]) * (out[c] - reference[c]);
    }
  }
  std::vector<double> errors;
  const double count = static_cast<double>(rows.size()) * static_cast<double>(dv);
  for (const double d : diff) errors.push_back(sampled_error(d / count, power / count));
  return errors;
}

}  // namespace tilesplash
