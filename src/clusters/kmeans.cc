// Lloyd's k-means (see clusters.h). Assignment is the costly part: points
// are split into fixed chunks over the threading context, each chunk against every
// centroid with the active SIMD target's loop (kernel/nearest_centroid-inl.h). The update sorts
// points by label (a counting sort, so members stay in index order) and sums each cluster in double
// in that order, so the result does not depend on the thread count.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "clusters/kmeans_internal.h"
#include "kernel/isa_dispatch.h"
#include "masks/mask_util.h"
#include "tilesplash/clusters.h"

namespace tilesplash {
namespace detail {
namespace {

constexpr std::int64_t kChunkPoints = 256;
constexpr std::int64_t kPanel = kernel::kCentroidPanel;

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("kmeans: " + message);
}

// Centroids packed into panels of kPanel (see kernel/target_ops.h), and their
// squared norms (+inf in the padding, so it is never the nearest).
void pack(const std::vector<float>& centroids, std::int64_t k, std::int64_t d,
          std::vector<float>& panels, std::vector<float>& norms) {
  const std::int64_t k_padded = (k + kPanel - 1) / kPanel * kPanel;
  panels.assign(static_cast<std::size_t>(d * k_padded), 0.0f);
  norms.assign(static_cast<std::size_t>(k_padded), std::numeric_limits<float>::infinity());
  for (std::int64_t c = 0; c < k; ++c) {
    float norm = 0.0f;
    float* panel = panels.data() + (c / kPanel) * d * kPanel + c % kPanel;
    for (std::int64_t t = 0; t < d; ++t) {
      const float value = centroids[static_cast<std::size_t>(c * d + t)];
      panel[t * kPanel] = value;
      norm += value * value;
    }
    norms[static_cast<std::size_t>(c)] = norm;
  }
}

// The arguments of run_kmeans checked; returns the number of points.
std::int64_t check_kmeans_args(std::span<const float> points, std::int64_t dim,
                               const KMeansOptions& options, std::span<const float> warm) {
  if (dim < 1) fail("dim must be >= 1, got " + std::to_string(dim));
  if (points.size() % static_cast<std::size_t>(dim) != 0) {
    fail("points.size() (" + std::to_string(points.size()) + ") must be a multiple of dim (" +
         std::to_string(dim) + ")");
  }
  const std::int64_t n = static_cast<std::int64_t>(points.size()) / dim;
  const std::int64_t k = options.clusters;
  if (n < 1) fail("needs at least one point");
  if (k < 1 || k > n) {
    fail("options.clusters must be in [1, " + std::to_string(n) + "] (the points), got " +
         std::to_string(k));
  }
  if (options.max_iterations < 1) {
    fail("options.max_iterations must be >= 1, got " + std::to_string(options.max_iterations));
  }
  if (!(options.tolerance >= 0.0 && std::isfinite(options.tolerance))) {
    fail("options.tolerance must be a finite number >= 0, got " +
         shortest_double(options.tolerance));
  }
  if (!warm.empty() && warm.size() != static_cast<std::size_t>(k * dim)) {
    fail("warm must hold clusters x dim = " + std::to_string(k * dim) + " floats, got " +
         std::to_string(warm.size()));
  }
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (!std::isfinite(points[i])) {
      fail("points must be finite; point " + std::to_string(i / static_cast<std::size_t>(dim)) +
           " is not");
    }
  }
  return n;
}

// The first centroids: `warm`, else the points kmeans_initial_indices() picks.
std::vector<float> initial_centroids(std::span<const float> points, std::int64_t n,
                                     std::int64_t dim, const KMeansOptions& options,
                                     std::span<const float> warm) {
  if (!warm.empty()) return {warm.begin(), warm.end()};
  const std::int64_t k = options.clusters;
  std::vector<float> centroids(static_cast<std::size_t>(k * dim));
  const std::vector<std::int64_t> first = kmeans_initial_indices(n, k, options.seed);
  for (std::int64_t c = 0; c < k; ++c) {
    std::copy_n(points.data() + first[static_cast<std::size_t>(c)] * dim, dim,
                centroids.data() + c * dim);
  }
  return centroids;
}

// Counting sort by label: sizes per cluster, and the members of cluster c at
// members[start[c], start[c + 1]), in index order.
void sort_by_label(const std::vector<std::int32_t>& labels, std::vector<std::int64_t>& sizes,
                   std::vector<std::int64_t>& start, std::vector<std::int64_t>& members) {
  const std::int64_t k = static_cast<std::int64_t>(sizes.size());
  std::fill(sizes.begin(), sizes.end(), 0);
  for (const std::int32_t label : labels) ++sizes[static_cast<std::size_t>(label)];
  start[0] = 0;
  for (std::int64_t c = 0; c < k; ++c) {
    start[static_cast<std::size_t>(c + 1)] =
        start[static_cast<std::size_t>(c)] + sizes[static_cast<std::size_t>(c)];
  }
  std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    members[static_cast<std::size_t>(fill[static_cast<std::size_t>(labels[i])]++)] =
        static_cast<std::int64_t>(i);
  }
}

}  // namespace

KMeansResult run_kmeans(ThreadingContext& context, int threads, std::span<const float> points,
                        std::int64_t dim, const KMeansOptions& options,
                        std::span<const float> warm) {
  const std::int64_t n = check_kmeans_args(points, dim, options, warm);
  const std::int64_t k = options.clusters;
  KMeansResult result;
  result.clusters = k;
  result.dim = dim;
  result.centroids = initial_centroids(points, n, dim, options, warm);
  result.labels.assign(static_cast<std::size_t>(n), 0);
  result.sizes.assign(static_cast<std::size_t>(k), 0);

  // The active SIMD target's loop, as the attention kernel's (TILESPLASH_ISA, set_isa()).
  const kernel::NearestCentroidFn assign = kernel::active_target().nearest_centroid;
  const std::int64_t chunks = (n + kChunkPoints - 1) / kChunkPoints;
  const std::int64_t k_padded = (k + kPanel - 1) / kPanel * kPanel;
  std::vector<float> panels, norms;
  std::vector<std::int64_t> start(static_cast<std::size_t>(k + 1));
  std::vector<std::int64_t> members(static_cast<std::size_t>(n));
  std::vector<double> movement(static_cast<std::size_t>(k));
  while (result.iterations < options.max_iterations) {
    pack(result.centroids, k, dim, panels, norms);
    context.run(threads, chunks, [&](std::int64_t chunk, int) {
      const std::int64_t begin = chunk * kChunkPoints;
      const std::int64_t end = std::min(n, begin + kChunkPoints);
      assign(points.data(), dim, begin, end, panels.data(), norms.data(), k_padded,
             result.labels.data() + begin);
    });
    ++result.iterations;
    sort_by_label(result.labels, result.sizes, start, members);
    const std::int64_t cluster_chunks = (k + 15) / 16;
    context.run(threads, cluster_chunks, [&](std::int64_t chunk, int) {
      std::vector<double> sum(static_cast<std::size_t>(dim));
      for (std::int64_t c = chunk * 16; c < std::min(k, chunk * 16 + 16); ++c) {
        const std::int64_t m0 = start[static_cast<std::size_t>(c)];
        const std::int64_t m1 = start[static_cast<std::size_t>(c + 1)];
        movement[static_cast<std::size_t>(c)] = 0.0;
        if (m0 == m1) continue;  // an empty cluster keeps its centroid
        std::fill(sum.begin(), sum.end(), 0.0);
        for (std::int64_t m = m0; m < m1; ++m) {
          const float* x = points.data() + members[static_cast<std::size_t>(m)] * dim;
          for (std::int64_t t = 0; t < dim; ++t) sum[static_cast<std::size_t>(t)] += x[t];
        }
        float* centroid = result.centroids.data() + c * dim;
        double moved = 0.0;
        for (std::int64_t t = 0; t < dim; ++t) {
          const float mean =
              static_cast<float>(sum[static_cast<std::size_t>(t)] / static_cast<double>(m1 - m0));
          const double step = static_cast<double>(mean) - centroid[t];
          moved += step * step;
          centroid[t] = mean;
        }
        movement[static_cast<std::size_t>(c)] = std::sqrt(moved);
      }
    });
    const double largest = *std::max_element(movement.begin(), movement.end());
    if (largest < options.tolerance) {
      result.converged = true;
      break;
    }
  }
  return result;
}

}  // namespace detail

std::vector<std::int64_t> kmeans_initial_indices(std::int64_t n, std::int64_t clusters,
                                                 std::uint64_t seed) {
  if (n < 1 || clusters < 1 || clusters > n) {
    throw std::invalid_argument("kmeans_initial_indices: needs 1 <= clusters <= n, got clusters " +
                                std::to_string(clusters) + ", n " + std::to_string(n));
  }
  std::vector<std::int64_t> index(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) index[static_cast<std::size_t>(i)] = i;
  std::uint64_t state = seed;
  for (std::int64_t i = 0; i < clusters; ++i) {
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    const auto offset = static_cast<std::int64_t>(
        (static_cast<unsigned __int128>(z) * static_cast<std::uint64_t>(n - i)) >> 64);
    std::swap(index[static_cast<std::size_t>(i)], index[static_cast<std::size_t>(i + offset)]);
  }
  index.resize(static_cast<std::size_t>(clusters));
  return index;
}

KMeansResult kmeans(std::span<const float> points, std::int64_t dim, const KMeansOptions& options,
                    std::span<const float> warm, ThreadingContext* context) {
  if (options.threads < 0) {
    throw std::invalid_argument(
        "kmeans: options.threads must be >= 0 (0: the context's threads), got " +
        std::to_string(options.threads));
  }
  return detail::run_kmeans(context != nullptr ? *context : *default_threading_context(),
                            options.threads, points, dim, options, warm);
}

}  // namespace tilesplash
