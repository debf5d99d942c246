// One head's Sparse VideoGen 2 mask: the clustering, the kept cluster pairs
// (top-p or a density), and the masks and orders that run them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "clusters/cluster_internal.h"
#include "clusters/cluster_nodes.h"
#include "clusters/kmeans_internal.h"
#include "masks/mask_util.h"

namespace tilesplash {
namespace detail {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("clusters: " + message);
}

// The video rows of one head as contiguous floats.
std::vector<float> video_rows(const VideoGeometry& g, const TensorView& view, std::int64_t head) {
  const IndexRange video = g.video_range();
  const std::int64_t d = view.dim;
  std::vector<float> rows(static_cast<std::size_t>(video.size() * d));
  for (std::int64_t r = 0; r < video.size(); ++r) {
    const std::int64_t offset = head * view.head_stride + (video.begin + r) * view.row_stride;
    float* out = rows.data() + r * d;
    switch (view.dtype) {
      case DType::kF32:
        std::copy_n(static_cast<const float*>(view.data) + offset, d, out);
        break;
      case DType::kBF16:
        for (std::int64_t c = 0; c < d; ++c) {
          out[c] = bf16_to_float(static_cast<const std::uint16_t*>(view.data)[offset + c]);
        }
        break;
      case DType::kF16:
        for (std::int64_t c = 0; c < d; ++c) {
          out[c] = f16_to_float(static_cast<const std::uint16_t*>(view.data)[offset + c]);
        }
        break;
    }
  }
  return rows;
}

void check_options(const ClusterOptions& o) {
  if (o.query_clusters < 1 || o.key_clusters < 1) {
    fail("query_clusters and key_clusters must be >= 1, got " + std::to_string(o.query_clusters) +
         " and " + std::to_string(o.key_clusters));
  }
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) {
    fail("top_p must be in (0, 1], got " + shortest_double(o.top_p));
  }
  if (!(o.min_kc_ratio >= 0.0 && o.min_kc_ratio <= 1.0)) {
    fail("min_kc_ratio must be in [0, 1], got " + shortest_double(o.min_kc_ratio));
  }
  if (o.density && !(*o.density > 0.0 && *o.density <= 1.0)) {
    fail("density must be in (0, 1], got " + shortest_double(*o.density));
  }
  if (o.blocks.block_q < 1 || o.blocks.block_kv < 1) {
    fail("blocks must be >= 1, got " + std::to_string(o.blocks.block_q) + " x " +
         std::to_string(o.blocks.block_kv));
  }
  if (o.first_iterations < 1 || o.warm_iterations < 1) {
    fail("first_iterations and warm_iterations must be >= 1, got " +
         std::to_string(o.first_iterations) + " and " + std::to_string(o.warm_iterations));
  }
}

// Per query cluster, the key clusters by falling weight and their cumulative
// weights (empty key clusters left out).
struct RankedPairs {
  std::vector<std::int32_t> order;  // qc x nonempty
  std::vector<double> cumulative;   // qc x nonempty
  std::int64_t width = 0;           // non-empty key clusters
  std::int64_t minimum = 1;         // kept per query cluster at least
};

RankedPairs rank_pairs(const HeadClusters& c, double scale, const ClusterOptions& o) {
  const std::int64_t qc = c.query.clusters, kc = c.key.clusters, d = c.query.dim;
  std::vector<std::int32_t> nonempty;
  for (std::int64_t b = 0; b < kc; ++b) {
    if (c.key.sizes[static_cast<std::size_t>(b)] > 0)
      nonempty.push_back(static_cast<std::int32_t>(b));
  }
  RankedPairs ranked;
  ranked.width = static_cast<std::int64_t>(nonempty.size());
  ranked.minimum = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(std::ceil(o.min_kc_ratio * static_cast<double>(kc) - 1e-9)), 1,
      ranked.width);
  ranked.order.resize(static_cast<std::size_t>(qc * ranked.width));
  ranked.cumulative.resize(ranked.order.size());
  std::vector<double> logit(static_cast<std::size_t>(ranked.width));
  for (std::int64_t a = 0; a < qc; ++a) {
    const float* qa = c.query.centroids.data() + a * d;
    double top = -std::numeric_limits<double>::infinity();
    for (std::int64_t i = 0; i < ranked.width; ++i) {
      const std::int64_t b = nonempty[static_cast<std::size_t>(i)];
      const float* kb = c.key.centroids.data() + b * d;
      double dot = 0.0;
      for (std::int64_t t = 0; t < d; ++t) dot += static_cast<double>(qa[t]) * kb[t];
      // P_ab = |K_b| exp(scale * dot), normalised over b: a softmax of these.
      logit[static_cast<std::size_t>(i)] =
          std::log(static_cast<double>(c.key.sizes[static_cast<std::size_t>(b)])) + scale * dot;
      top = std::max(top, logit[static_cast<std::size_t>(i)]);
    }
    double total = 0.0;
    for (double& value : logit) {
      value = std::exp(value - top);
      total += value;
    }
    std::int32_t* order = ranked.order.data() + a * ranked.width;
    std::iota(order, order + ranked.width, 0);
    std::stable_sort(order, order + ranked.width, [&](std::int32_t x, std::int32_t y) {
      return logit[static_cast<std::size_t>(x)] > logit[static_cast<std::size_t>(y)];
    });
    double running = 0.0;
    for (std::int64_t i = 0; i < ranked.width; ++i) {
      running += logit[static_cast<std::size_t>(order[i])] / total;
      ranked.cumulative[static_cast<std::size_t>(a * ranked.width + i)] = running;
      order[i] = nonempty[static_cast<std::size_t>(order[i])];
    }
  }
  return ranked;
}

// Key clusters kept by query cluster a at top_p: the shortest prefix whose
// cumulative weight reaches p (all of them when rounding never lets it),
// at least the minimum.
std::int64_t prefix_length(const RankedPairs& ranked, std::int64_t a, double p) {
  const double* cumulative = ranked.cumulative.data() + a * ranked.width;
  const std::int64_t reach =
      std::lower_bound(cumulative, cumulative + ranked.width, p) - cumulative + 1;
  return std::clamp(reach, ranked.minimum, ranked.width);
}

}  // namespace

std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> cluster_sequences(
    const HeadClusters& c, std::span<const std::uint8_t> kept) {
  const std::int64_t qc = c.query.clusters, kc = c.key.clusters, d = c.query.dim;
  // A nearest-neighbour chain through the query centroids, from cluster 0.
  std::vector<double> q_position(static_cast<std::size_t>(qc), 0.0);
  std::vector<bool> visited(static_cast<std::size_t>(qc), false);
  std::int64_t current = 0;
  for (std::int64_t step = 0; step < qc; ++step) {
    visited[static_cast<std::size_t>(current)] = true;
    q_position[static_cast<std::size_t>(current)] = static_cast<double>(step);
    const float* x = c.query.centroids.data() + current * d;
    double best = std::numeric_limits<double>::infinity();
    std::int64_t next = -1;
    for (std::int64_t a = 0; a < qc; ++a) {
      if (visited[static_cast<std::size_t>(a)]) continue;
      const float* y = c.query.centroids.data() + a * d;
      double distance = 0.0;
      for (std::int64_t t = 0; t < d; ++t) {
        const double diff = static_cast<double>(x[t]) - y[t];
        distance += diff * diff;
      }
      if (distance < best) {
        best = distance;
        next = a;
      }
    }
    if (next < 0) break;
    current = next;
  }
  // Barycentre sweeps: each key cluster moves to the mean place of the query
  // clusters that keep it, each query cluster to the mean place of the key
  // clusters it keeps (weighted by cluster size), so that the kept pairs
  // gather into blocks along the diagonal. Key clusters nobody keeps go last.
  std::vector<double> k_position(static_cast<std::size_t>(kc), 0.0);
  const auto rank_of = [](std::vector<double>& position) {
    std::vector<std::int64_t> sequence(position.size());
    std::iota(sequence.begin(), sequence.end(), 0);
    std::stable_sort(sequence.begin(), sequence.end(), [&](std::int64_t x, std::int64_t y) {
      return position[static_cast<std::size_t>(x)] < position[static_cast<std::size_t>(y)];
    });
    for (std::size_t i = 0; i < sequence.size(); ++i) {
      position[static_cast<std::size_t>(sequence[i])] = static_cast<double>(i);
    }
    return sequence;
  };
  std::vector<std::int64_t> q_sequence = rank_of(q_position), k_sequence;
  constexpr int kSweeps = 4;
  for (int sweep = 0; sweep < kSweeps; ++sweep) {
    for (std::int64_t b = 0; b < kc; ++b) {
      double sum = 0.0, weight = 0.0;
      for (std::int64_t a = 0; a < qc; ++a) {
        if (kept[static_cast<std::size_t>(a * kc + b)] == 0) continue;
        const double w = static_cast<double>(c.query.sizes[static_cast<std::size_t>(a)]) + 1e-3;
        sum += w * q_position[static_cast<std::size_t>(a)];
        weight += w;
      }
      k_position[static_cast<std::size_t>(b)] =
          weight > 0.0 ? sum / weight : static_cast<double>(qc) + static_cast<double>(b);
    }
    k_sequence = rank_of(k_position);
    if (sweep + 1 == kSweeps) break;
    for (std::int64_t a = 0; a < qc; ++a) {
      double sum = 0.0, weight = 0.0;
      for (std::int64_t b = 0; b < kc; ++b) {
        if (kept[static_cast<std::size_t>(a * kc + b)] == 0) continue;
        const double w = static_cast<double>(c.key.sizes[static_cast<std::size_t>(b)]) + 1e-3;
        sum += w * k_position[static_cast<std::size_t>(b)];
        weight += w;
      }
      if (weight > 0.0) q_position[static_cast<std::size_t>(a)] = sum / weight;
    }
    q_sequence = rank_of(q_position);
  }
  return {q_sequence, k_sequence};
}

void check_cluster_options(const ClusterOptions& options) { check_options(options); }

HeadClusters cluster_head_on(ThreadingContext& context, int threads, const VideoGeometry& geometry,
                             const TensorView& q, const TensorView& k, std::int64_t head,
                             const ClusterOptions& options, const HeadClusters* warm) {
  geometry.validate();
  check_options(options);
  if (q.len != geometry.tokens() || k.len != geometry.tokens() || q.dim != k.dim || q.dim < 1 ||
      head < 0 || head >= q.heads || head >= k.heads || q.data == nullptr || k.data == nullptr) {
    fail("q and k must be non-null [heads, " + std::to_string(geometry.tokens()) +
         ", d] views with the same d holding head " + std::to_string(head));
  }
  const std::int64_t d = q.dim;
  HeadClusters result;
  const auto run = [&](const TensorView& view, bool keys, const KMeansResult* start) {
    const std::int64_t count = cluster_kmeans_options(geometry, options, keys, false).clusters;
    const bool use_warm = start != nullptr && start->clusters == count && start->dim == d;
    const KMeansOptions o = cluster_kmeans_options(geometry, options, keys, use_warm);
    const std::vector<float> rows = video_rows(geometry, view, head);
    return run_kmeans(
        context, threads, rows, d, o,
        use_warm ? std::span<const float>(start->centroids) : std::span<const float>());
  };
  result.query = run(q, false, warm ? &warm->query : nullptr);
  result.key = run(k, true, warm ? &warm->key : nullptr);
  return result;
}

}  // namespace detail

HeadClusters cluster_head(const VideoGeometry& geometry, const TensorView& q, const TensorView& k,
                          std::int64_t head, const ClusterOptions& options,
                          const HeadClusters* warm, int threads, ThreadingContext* context) {
  if (threads < 0) {
    throw std::invalid_argument("clusters: threads must be >= 0 (0: the context's threads), got " +
                                std::to_string(threads));
  }
  return detail::cluster_head_on(context != nullptr ? *context : *default_threading_context(),
                                 threads, geometry, q, k, head, options, warm);
}

KMeansOptions cluster_kmeans_options(const VideoGeometry& geometry, const ClusterOptions& options,
                                     bool keys, bool warm) {
  KMeansOptions o;
  o.clusters =
      std::min(keys ? options.key_clusters : options.query_clusters, geometry.video_tokens());
  o.tolerance = options.tolerance;
  o.seed = detail::hash_combine(options.seed, keys ? 2 : 1);
  o.max_iterations = warm ? options.warm_iterations : options.first_iterations;
  return o;
}

ClusterOptions default_cluster_options(const VideoGeometry& geometry) {
  geometry.validate();
  ClusterOptions options;
  options.query_clusters = geometry.tokens_per_frame() >= 3600 ? 300 : 200;
  return options;
}

std::vector<std::uint8_t> select_cluster_pairs(const VideoGeometry& geometry,
                                               const HeadClusters& clusters, double scale,
                                               const ClusterOptions& options) {
  detail::check_options(options);
  const std::int64_t qc = clusters.query.clusters, kc = clusters.key.clusters;
  if (qc < 1 || kc < 1 || clusters.query.dim != clusters.key.dim ||
      static_cast<std::int64_t>(clusters.query.sizes.size()) != qc ||
      static_cast<std::int64_t>(clusters.key.sizes.size()) != kc) {
    throw std::invalid_argument("select_cluster_pairs: clusters are not a clustering of one head");
  }
  if (!(scale > 0.0 && std::isfinite(scale))) {
    throw std::invalid_argument("select_cluster_pairs: scale must be a finite number > 0, got " +
                                detail::shortest_double(scale));
  }
  const detail::RankedPairs ranked = detail::rank_pairs(clusters, scale, options);
  double p = options.top_p;
  if (options.density) {
    // Kept video pairs at a given p; text rows and columns are always kept.
    const double n = static_cast<double>(geometry.tokens());
    const double t = static_cast<double>(geometry.text_tokens());
    const auto density = [&](double top_p) {
      double kept = 2.0 * t * n - t * t;
      for (std::int64_t a = 0; a < qc; ++a) {
        const std::int64_t m = detail::prefix_length(ranked, a, top_p);
        double keys = 0.0;
        for (std::int64_t i = 0; i < m; ++i) {
          keys += static_cast<double>(
              clusters.key.sizes[static_cast<std::size_t>(ranked.order[a * ranked.width + i])]);
        }
        kept += static_cast<double>(clusters.query.sizes[static_cast<std::size_t>(a)]) * keys;
      }
      return kept / (n * n);
    };
    double lo = 0.0, hi = 1.0;
    for (int step = 0; step < 50; ++step) {
      const double mid = 0.5 * (lo + hi);
      (density(mid) < *options.density ? lo : hi) = mid;
    }
    p = *options.density - density(lo) <= density(hi) - *options.density ? lo : hi;
  }
  std::vector<std::uint8_t> kept(static_cast<std::size_t>(qc * kc), 0);
  for (std::int64_t a = 0; a < qc; ++a) {
    const std::int64_t m = detail::prefix_length(ranked, a, p);
    for (std::int64_t i = 0; i < m; ++i) {
      kept[static_cast<std::size_t>(a * kc + ranked.order[a * ranked.width + i])] = 1;
    }
  }
  return kept;
}

ClusterMasks cluster_masks(const VideoGeometry& geometry, const HeadClusters& clusters,
                           std::span<const std::uint8_t> kept) {
  geometry.validate();
  const IndexRange video = geometry.video_range(), text = geometry.text_range();
  const std::int64_t qc = clusters.query.clusters, kc = clusters.key.clusters;
  const std::int64_t l = video.size(), n = geometry.tokens();
  if (static_cast<std::int64_t>(clusters.query.labels.size()) != l ||
      static_cast<std::int64_t>(clusters.key.labels.size()) != l ||
      static_cast<std::int64_t>(kept.size()) != qc * kc) {
    throw std::invalid_argument(
        "cluster_masks: labels must cover the " + std::to_string(l) +
        " video tokens and kept must hold qc x kc = " + std::to_string(qc * kc) + " entries");
  }
  // Sorted by cluster (a counting sort keeps each cluster in token order),
  // empty clusters dropped so that every cluster of a range is present.
  struct Sorted {
    std::vector<std::int64_t> source;  // run position -> original index
    std::vector<std::int64_t> start;   // per non-empty cluster, and the end
    std::vector<std::int64_t> rank;    // cluster -> index among non-empty, -1 if empty
  };
  const auto sort = [&](const KMeansResult& r, const std::vector<std::int64_t>& sequence) {
    Sorted s;
    s.rank.assign(static_cast<std::size_t>(r.clusters), -1);
    std::vector<std::int64_t> count(static_cast<std::size_t>(r.clusters), 0);
    for (const std::int32_t label : r.labels) ++count[static_cast<std::size_t>(label)];
    std::vector<std::int64_t> next(static_cast<std::size_t>(r.clusters));
    std::int64_t position = 0;
    for (const std::int64_t c : sequence) {
      next[static_cast<std::size_t>(c)] = position;
      if (count[static_cast<std::size_t>(c)] == 0) continue;
      s.rank[static_cast<std::size_t>(c)] = static_cast<std::int64_t>(s.start.size());
      s.start.push_back(position);
      position += count[static_cast<std::size_t>(c)];
    }
    s.start.push_back(position);
    s.source.resize(static_cast<std::size_t>(n));
    for (std::int64_t u = 0; u < l; ++u) {
      s.source[static_cast<std::size_t>(next[static_cast<std::size_t>(r.labels[u])]++)] =
          video.begin + u;
    }
    for (std::int64_t t = text.begin; t < text.end; ++t) {
      s.source[static_cast<std::size_t>(l + t - text.begin)] = t;
    }
    return s;
  };
  const auto [q_sequence, k_sequence] = detail::cluster_sequences(clusters, kept);
  Sorted q = sort(clusters.query, q_sequence), k = sort(clusters.key, k_sequence);
  const std::int64_t qn = static_cast<std::int64_t>(q.start.size()) - 1;
  const std::int64_t kn = static_cast<std::int64_t>(k.start.size()) - 1;
  std::vector<std::uint8_t> compact(static_cast<std::size_t>(qn * kn), 0);
  std::int64_t kept_pairs = 0;
  for (std::int64_t a = 0; a < qc; ++a) {
    const std::int64_t ra = q.rank[static_cast<std::size_t>(a)];
    if (ra < 0) continue;
    for (std::int64_t b = 0; b < kc; ++b) {
      const std::int64_t rb = k.rank[static_cast<std::size_t>(b)];
      if (rb < 0 || kept[static_cast<std::size_t>(a * kc + b)] == 0) continue;
      compact[static_cast<std::size_t>(ra * kn + rb)] = 1;
      kept_pairs += clusters.query.sizes[static_cast<std::size_t>(a)] *
                    clusters.key.sizes[static_cast<std::size_t>(b)];
    }
  }
  const std::int64_t t = geometry.text_tokens();
  kept_pairs += 2 * t * n - t * t;
  const Mask original(std::make_shared<detail::ClusterMaskNode>(
      video, n, clusters.query.labels, clusters.key.labels,
      std::vector<std::uint8_t>(kept.begin(), kept.end()), kc));
  const Mask run(std::make_shared<detail::ClusterRunNode>(std::move(q.start), std::move(k.start),
                                                          std::move(compact), n));
  ClusterMasks masks{
      original,
      MaskRun{RowOrder(std::move(q.source), "query clusters"), run, std::nullopt,
              RowOrder(std::move(k.source), "key clusters")},
      kept_pairs,
      static_cast<double>(kept_pairs) / (static_cast<double>(n) * static_cast<double>(n))};
  return masks;
}

}  // namespace tilesplash
