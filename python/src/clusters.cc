// tilesplash._core.kmeans and kmeans_initial_indices: the k-means behind
// Sparse VideoGen 2's clusters (clusters.h) on float32 NumPy arrays, so that
// it can be checked against other implementations and used on its own, on the
// caller's threading context or the process's default one.
#include "tilesplash/clusters.h"

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <utility>
#include <vector>

#include "bindings.h"
#include "threading_context.h"

namespace tilesplash::python {
namespace {

using Points = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// A NumPy array that owns `values` (moved), of the given shape.
template <typename T>
nb::ndarray<nb::numpy, T> owned_array(std::vector<T>&& values, std::vector<std::size_t> shape) {
  auto* owned = new std::vector<T>(std::move(values));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T>(owned->data(), shape.size(), shape.data(), owner);
}

std::span<const float> values(const Points& array) {
  return {array.data(), array.shape(0) * array.shape(1)};
}

using Labels = nb::ndarray<const std::int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Sizes = nb::ndarray<const std::int64_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using Kept = nb::ndarray<const std::uint8_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// One side's k-means result as cluster_masks() reads it.
KMeansResult clustering(const Points& centroids, const Labels& labels, const Sizes& sizes) {
  KMeansResult r;
  r.clusters = static_cast<std::int64_t>(centroids.shape(0));
  r.dim = static_cast<std::int64_t>(centroids.shape(1));
  if (static_cast<std::int64_t>(sizes.shape(0)) != r.clusters) {
    throw std::invalid_argument("cluster_mask: sizes must hold one count per centroid");
  }
  const auto v = values(centroids);
  r.centroids.assign(v.begin(), v.end());
  r.labels.assign(labels.data(), labels.data() + labels.shape(0));
  for (const std::int32_t label : r.labels) {
    if (label < 0 || label >= r.clusters) {
      throw std::invalid_argument("cluster_mask: labels must be in [0, clusters)");
    }
  }
  r.sizes.assign(sizes.data(), sizes.data() + sizes.shape(0));
  return r;
}

}  // namespace

void bind_clusters(nb::module_& m) {
  using namespace nb::literals;
  m.def(
      "kmeans",
      [](const Points& points, std::int64_t clusters, int max_iterations, double tolerance,
         std::uint64_t seed, int threads, std::optional<Points> warm, PyThreadingContext* context) {
        KMeansOptions options;
        options.clusters = clusters;
        options.max_iterations = max_iterations;
        options.tolerance = tolerance;
        options.seed = seed;
        options.threads = threads;
        const std::int64_t dim = static_cast<std::int64_t>(points.shape(1));
        KMeansResult result;
        {
          nb::gil_scoped_release release;
          result =
              kmeans(values(points), dim, options, warm ? values(*warm) : std::span<const float>{},
                     context != nullptr ? context->context().get() : nullptr);
        }
        const auto k = static_cast<std::size_t>(result.clusters);
        const std::size_t n = result.labels.size();
        return nb::make_tuple(
            owned_array(std::move(result.centroids), {k, static_cast<std::size_t>(dim)}),
            owned_array(std::move(result.labels), {n}), owned_array(std::move(result.sizes), {k}),
            result.iterations, result.converged);
      },
      "points"_a, "clusters"_a, "max_iterations"_a, "tolerance"_a, "seed"_a, "threads"_a,
      "warm"_a.none(), "context"_a.none());
  // The mask on the original order of clusters computed elsewhere (the flex
  // backend's device k-means), for VideoAttention.head_mask().
  m.def(
      "cluster_mask",
      [](const VideoGeometry& geometry, const Points& q_centroids, const Labels& q_labels,
         const Sizes& q_sizes, const Points& k_centroids, const Labels& k_labels,
         const Sizes& k_sizes, const Kept& kept) {
        HeadClusters clusters{clustering(q_centroids, q_labels, q_sizes),
                              clustering(k_centroids, k_labels, k_sizes)};
        const std::span<const std::uint8_t> pairs(kept.data(), kept.shape(0) * kept.shape(1));
        return cluster_masks(geometry, clusters, pairs).mask;
      },
      "geometry"_a, "q_centroids"_a, "q_labels"_a, "q_sizes"_a, "k_centroids"_a, "k_labels"_a,
      "k_sizes"_a, "kept"_a);
  m.def("kmeans_initial_indices", &kmeans_initial_indices, "n"_a, "clusters"_a, "seed"_a);
}

}  // namespace tilesplash::python
