// Sparse VideoGen 2's semantic clusters (Yang et al., "Sparse VideoGen2:
// Accelerate Video Generation with Sparse Attention via Semantic-Aware
// Permutation", NeurIPS 2025): a mask built per head from the head's own data.
//
// Per head: k-means of the video query rows (qc clusters) and of the video
// key rows (kc clusters), Euclidean, centroids warm-started from the previous
// step of the same layer (50 iterations the first time, 2 after; stop once no
// centroid moves by 1e-4). Cluster pair weight P_ab = |K_b| * exp(c^Q_a .
// c^K_b * scale), normalised over b; per query cluster the shortest prefix of
// key clusters by falling weight whose cumulative weight reaches top_p is
// kept, and at least ceil(min_kc_ratio * kc) of them. Query token i attends
// key token j when (cluster of i, cluster of j) is kept; text rows and
// columns are kept whole (text is not clustered).
//
// It runs permuted: Q rows sorted by query cluster, K and V rows by key
// cluster (text after the video), so that clusters are contiguous. A tile of
// that order covers a rectangle of cluster pairs, and a 2-D prefix sum of the
// kept pairs says in O(1) whether all, none or some of them are kept: no
// element is scanned to classify it. The plan is built per head and step.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "tilesplash/candidates.h"
#include "tilesplash/mask.h"
#include "tilesplash/plan.h"
#include "tilesplash/tensor.h"
#include "tilesplash/threading.h"
#include "tilesplash/video.h"

namespace tilesplash {

struct KMeansOptions {
  std::int64_t clusters = 0;  // k, in [1, points]
  int max_iterations = 50;    // >= 1
  double tolerance = 1e-4;    // stop once no centroid moved this far (Euclidean)
  std::uint64_t seed = 0;     // the initial centroids without a warm start
  int threads = 0;            // 0: the context's threads() (all hardware threads by default)
};

struct KMeansResult {
  std::int64_t clusters = 0;
  std::int64_t dim = 0;
  std::vector<float> centroids;      // clusters x dim: the means of the labels' clusters
  std::vector<std::int32_t> labels;  // per point, from the last assignment
  std::vector<std::int64_t> sizes;   // points per cluster
  int iterations = 0;                // assignment + update rounds run
  bool converged = false;            // stopped by the tolerance
};

// Lloyd's k-means of the rows of `points` (n x dim floats). Starts from
// `warm` (clusters x dim) when it is given, else from the points at
// kmeans_initial_indices(n, clusters, seed). Each round assigns every point
// to its nearest centroid (squared Euclidean; the lowest index on a tie) and
// moves every centroid to the mean of its points (an empty cluster keeps its
// centroid); it stops after max_iterations rounds or once no centroid moved
// by tolerance or more. Runs on `context` (null: default_threading_context()).
// Same inputs give the same result for any thread count and context. Throws
// std::invalid_argument naming a bad argument.
KMeansResult kmeans(std::span<const float> points, std::int64_t dim, const KMeansOptions& options,
                    std::span<const float> warm = {}, ThreadingContext* context = nullptr);

// The first `clusters` entries of a partial Fisher-Yates shuffle of [0, n):
// for i in [0, clusters): swap entry i with entry i + below(n - i), where
// below(m) = (splitmix64() * m) >> 64 and splitmix64 steps a state that
// starts at `seed` (tests/python/kmeans_reference.py does the same in numpy).
std::vector<std::int64_t> kmeans_initial_indices(std::int64_t n, std::int64_t clusters,
                                                 std::uint64_t seed);

struct ClusterOptions {
  std::int64_t query_clusters = 200;  // qc: Wan 200 at 480p, 300 at 720p
  std::int64_t key_clusters = 1000;   // kc
  double top_p = 0.9;                 // in (0, 1]
  double min_kc_ratio = 0.1;          // in [0, 1]
  // Meet this density (of the whole tokens x tokens map) per head instead of
  // top_p: the smallest top_p whose mask keeps at least it.
  std::optional<double> density;
  int first_iterations = 50;  // k-means rounds without a warm start
  int warm_iterations = 2;    // rounds from the previous step's centroids
  double tolerance = 1e-4;
  std::uint64_t seed = 0;
  // Tiles of the per-head plans. Cluster boundaries fall anywhere inside a
  // tile, so smaller tiles than the band masks' waste less: at 10% density
  // on Wan 480p, 64 x 64 tiles visit 0.21 of the map where 128 x 128 visit 0.32.
  BlockSizes blocks{64, 64};
};

// Wan's settings in Sparse VideoGen 2: qc 300 at 720p and above (3,600 or
// more tokens per frame), 200 below; kc 1000; top_p 0.9.
ClusterOptions default_cluster_options(const VideoGeometry& geometry);

// The k-means run of one side of a head's clustering (keys: K's video rows,
// else Q's): clusters cut to the video tokens, the options' tolerance, seed
// hash_combine(options.seed, 1 for Q, 2 for K), and warm_iterations rounds
// from a warm start, else first_iterations. Every front door (the native
// one, the flex backend's k-means on the device) runs these, read from here.
KMeansOptions cluster_kmeans_options(const VideoGeometry& geometry, const ClusterOptions& options,
                                     bool keys, bool warm);

// One head's clustering: of its video query rows and its video key rows.
// More clusters than video tokens are cut to one per token.
struct HeadClusters {
  KMeansResult query;
  KMeansResult key;
};

// Clusters head `head` of q and k ([heads, tokens, d], original order, any
// dtype and strides), warm-started from `warm` when it has the same shape, on
// `threads` threads (0: the context's) of `context` (null:
// default_threading_context()).
HeadClusters cluster_head(const VideoGeometry& geometry, const TensorView& q, const TensorView& k,
                          std::int64_t head, const ClusterOptions& options,
                          const HeadClusters* warm = nullptr, int threads = 0,
                          ThreadingContext* context = nullptr);

// The kept cluster pairs, qc x kc bytes (row a: query cluster a), by top-p or,
// with options.density, by the density it asks for. `scale` is the softmax
// scale (1 / sqrt(d) by default).
std::vector<std::uint8_t> select_cluster_pairs(const VideoGeometry& geometry,
                                               const HeadClusters& clusters, double scale,
                                               const ClusterOptions& options);

struct ClusterMasks {
  Mask mask;                    // on the original order; classifies by scanning (for checks)
  MaskRun run;                  // Q by query cluster, K and V by key cluster (kv_order), text last
  std::int64_t kept_pairs = 0;  // exact, over tokens x tokens
  double density = 0.0;
};
ClusterMasks cluster_masks(const VideoGeometry& geometry, const HeadClusters& clusters,
                           std::span<const std::uint8_t> kept);

}  // namespace tilesplash
