// k-means (the first step of Sparse VideoGen 2's clusters) against a plain
// reference written here and against the numpy reference
// (tests/python/kmeans_reference.py: same seed, same labels), with warm
// starts, the same result for any thread count and on every SIMD target, and
// errors that name the bad argument.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "family_check.h"
#include "kernel/isa_dispatch.h"
#include "support/random_data.h"
#include "support/reference.h"
#include "support/targets.h"
#include "tilesplash/clusters.h"
#include "tilesplash/routing.h"
#include "tilesplash/video.h"
#include "video_test_util.h"

namespace tilesplash {
namespace {

// ---- k-means ----------------------------------------------------------------

struct PlainKMeans {
  std::vector<float> centroids;
  std::vector<std::int32_t> labels;
  int iterations = 0;
  bool converged = false;
};

// Lloyd's rounds as clusters.h defines them, in double, one point at a time.
PlainKMeans plain_kmeans(const std::vector<float>& x, std::int64_t d, std::int64_t k,
                         int max_iterations, double tolerance, std::vector<float> start) {
  const std::int64_t n = static_cast<std::int64_t>(x.size()) / d;
  PlainKMeans r;
  r.centroids = std::move(start);
  r.labels.assign(static_cast<std::size_t>(n), 0);
  while (r.iterations < max_iterations) {
    for (std::int64_t i = 0; i < n; ++i) {
      double best = INFINITY;
      for (std::int64_t c = 0; c < k; ++c) {
        double distance = 0.0;
        for (std::int64_t t = 0; t < d; ++t) {
          const double diff = static_cast<double>(x[i * d + t]) - r.centroids[c * d + t];
          distance += diff * diff;
        }
        if (distance < best) {
          best = distance;
          r.labels[i] = static_cast<std::int32_t>(c);
        }
      }
    }
    ++r.iterations;
    double moved = 0.0;
    for (std::int64_t c = 0; c < k; ++c) {
      std::vector<double> sum(static_cast<std::size_t>(d), 0.0);
      std::int64_t count = 0;
      for (std::int64_t i = 0; i < n; ++i) {
        if (r.labels[i] != c) continue;
        ++count;
        for (std::int64_t t = 0; t < d; ++t) sum[t] += x[i * d + t];
      }
      if (count == 0) continue;
      double step = 0.0;
      for (std::int64_t t = 0; t < d; ++t) {
        const float mean = static_cast<float>(sum[t] / static_cast<double>(count));
        step += (static_cast<double>(mean) - r.centroids[c * d + t]) *
                (static_cast<double>(mean) - r.centroids[c * d + t]);
        r.centroids[c * d + t] = mean;
      }
      moved = std::max(moved, std::sqrt(step));
    }
    if (moved < tolerance) {
      r.converged = true;
      break;
    }
  }
  return r;
}

// Blobs: `groups` centres in [-4, 4]^d, points scattered around them by `spread`.
std::vector<float> blobs(std::int64_t n, std::int64_t d, std::int64_t groups, double spread,
                         std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::vector<double> centres(static_cast<std::size_t>(groups * d));
  for (double& c : centres) c = 4.0 * unit(rng);
  std::vector<float> x(static_cast<std::size_t>(n * d));
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t g = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(groups));
    for (std::int64_t t = 0; t < d; ++t) {
      x[i * d + t] = static_cast<float>(centres[g * d + t] + spread * unit(rng));
    }
  }
  return x;
}

std::vector<float> first_centroids(const std::vector<float>& x, std::int64_t d, std::int64_t k,
                                   std::uint64_t seed) {
  const std::int64_t n = static_cast<std::int64_t>(x.size()) / d;
  std::vector<float> c;
  for (const std::int64_t i : kmeans_initial_indices(n, k, seed)) {
    c.insert(c.end(), x.begin() + i * d, x.begin() + (i + 1) * d);
  }
  return c;
}

// Every SIMD target's assignment loop (kernel/nearest_centroid-inl.h), run
// by the target k-means dispatches to.
class KMeansPerTarget : public test::TargetTest {};

TEST_P(KMeansPerTarget, MatchesThePlainReference) {
  struct Case {
    std::int64_t n, d, groups, k;
    double spread;
    int max_iterations;
  };
  for (const Case& c : std::vector<Case>{{300, 8, 6, 6, 0.3, 50},
                                         {257, 13, 5, 9, 0.2, 50},   // more clusters than blobs
                                         {500, 32, 12, 12, 0.4, 3},  // stops at the cap
                                         {40, 3, 2, 40, 0.1, 50},    // a cluster per point
                                         {64, 5, 1, 1, 1.0, 50}}) {
    const std::vector<float> x = blobs(c.n, c.d, c.groups, c.spread, 1000 + c.n);
    KMeansOptions o;
    o.clusters = c.k;
    o.max_iterations = c.max_iterations;
    o.seed = 5;
    const KMeansResult got = kmeans(x, c.d, o);
    const PlainKMeans want = plain_kmeans(x, c.d, c.k, c.max_iterations, o.tolerance,
                                          first_centroids(x, c.d, c.k, o.seed));
    const std::string what = "n=" + std::to_string(c.n) + " k=" + std::to_string(c.k);
    EXPECT_EQ(got.labels, want.labels) << what;
    EXPECT_EQ(got.iterations, want.iterations) << what;
    EXPECT_EQ(got.converged, want.converged) << what;
    ASSERT_EQ(got.centroids.size(), want.centroids.size()) << what;
    for (std::size_t i = 0; i < got.centroids.size(); ++i) {
      ASSERT_NEAR(got.centroids[i], want.centroids[i], 1e-5) << what << " element " << i;
    }
    std::vector<std::int64_t> sizes(static_cast<std::size_t>(c.k), 0);
    for (const std::int32_t label : want.labels) ++sizes[static_cast<std::size_t>(label)];
    EXPECT_EQ(got.sizes, sizes) << what;
  }
}

TEST(KMeans, WarmStartContinuesFromTheGivenCentroids) {
  const std::int64_t d = 7, k = 8;
  const std::vector<float> x = blobs(400, d, 8, 0.3, 77);
  KMeansOptions o;
  o.clusters = k;
  o.max_iterations = 2;
  const KMeansResult first = kmeans(x, d, o);
  const KMeansResult warm = kmeans(x, d, o, first.centroids);
  const PlainKMeans want = plain_kmeans(x, d, k, 2, o.tolerance, first.centroids);
  EXPECT_EQ(warm.labels, want.labels);
  EXPECT_EQ(warm.iterations, want.iterations);
  // Fifty rounds from scratch equal two plus forty-eight warm ones.
  o.max_iterations = 50;
  const KMeansResult cold = kmeans(x, d, o);
  o.max_iterations = 48;
  const KMeansResult resumed = kmeans(x, d, o, first.centroids);
  EXPECT_EQ(cold.centroids, resumed.centroids);
  EXPECT_EQ(cold.labels, resumed.labels);
}

// The splitmix64 stream of kmeans_reference.py's test_points().
std::vector<float> numpy_test_points() {
  const std::int64_t n = 60, dim = 6, groups = 4;
  std::uint64_t state = 7;
  std::vector<double> u;
  for (std::int64_t i = 0; i < groups * dim + n * dim; ++i) {
    state += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    u.push_back(static_cast<double>(z >> 11) * 0x1.0p-53);
  }
  std::vector<float> x(static_cast<std::size_t>(n * dim));
  for (std::int64_t i = 0; i < n; ++i) {
    for (std::int64_t t = 0; t < dim; ++t) {
      const double centre = (u[(i % groups) * dim + t] * 2.0 - 1.0) * 4.0;
      x[i * dim + t] = static_cast<float>(centre + u[groups * dim + i * dim + t] - 0.5);
    }
  }
  return x;
}

TEST_P(KMeansPerTarget, MatchesTheNumpyReference) {
  // `python tests/python/kmeans_reference.py` prints these.
  EXPECT_EQ(kmeans_initial_indices(60, 4, 3), (std::vector<std::int64_t>{6, 42, 37, 7}));
  const std::vector<std::int32_t> labels = {
      3, 2, 1, 3, 3, 2, 1, 3, 3, 2, 1, 3, 3, 2, 0, 3, 3, 2, 1, 3, 3, 2, 1, 3, 3, 2, 0, 3, 3, 2,
      0, 3, 3, 2, 0, 3, 3, 2, 1, 3, 3, 2, 1, 3, 3, 2, 0, 3, 3, 2, 1, 3, 3, 2, 0, 3, 3, 2, 0, 3};
  const std::vector<float> centroid0 = {3.625242233276367f,  3.2552473545074463f,
                                        2.798617124557495f,  0.19947755336761475f,
                                        3.0672168731689453f, -1.4263091087341309f};
  KMeansOptions o;
  o.clusters = 4;
  o.seed = 3;
  const KMeansResult got = kmeans(numpy_test_points(), 6, o);
  EXPECT_EQ(got.labels, labels);
  EXPECT_EQ(got.iterations, 3);
  EXPECT_TRUE(got.converged);
  for (std::size_t t = 0; t < centroid0.size(); ++t) {
    EXPECT_NEAR(got.centroids[t], centroid0[t], 1e-6);
  }
}

// The assignment loop alone, at shapes around its register tiles (1 to 8
// points, panels of 16 centroids) and beyond its blocks of 256 points, on
// small integers so that every distance is exact in float and the expected
// labels, ties to the lowest index included, are exact too.
TEST_P(KMeansPerTarget, AssignmentLoopMatchesBruteForce) {
  const kernel::NearestCentroidFn assign = kernel::active_target().nearest_centroid;
  ASSERT_NE(assign, nullptr);
  constexpr std::int64_t kPanel = kernel::kCentroidPanel;
  std::mt19937_64 rng(17);
  std::uniform_int_distribution<int> coordinate(-3, 3);
  for (const std::int64_t d : {1, 3, 16, 37}) {
    for (const std::int64_t k : {1, 15, 16, 17, 40}) {
      for (const std::int64_t n : {1, 5, 7, 8, 9, 300, 517}) {
        const std::int64_t begin = n > 8 ? 3 : 0;  // a range that starts inside the points
        std::vector<float> points(static_cast<std::size_t>((begin + n) * d));
        for (float& x : points) x = static_cast<float>(coordinate(rng));
        std::vector<float> centroids(static_cast<std::size_t>(k * d));
        for (float& x : centroids) x = static_cast<float>(coordinate(rng));
        // Duplicates, so ties occur and must go to the lower index.
        if (k > 16) std::copy_n(centroids.begin(), d, centroids.begin() + 16 * d);
        const std::int64_t k_padded = (k + kPanel - 1) / kPanel * kPanel;
        std::vector<float> panels(static_cast<std::size_t>(k_padded * d), 0.0f);
        std::vector<float> norms(static_cast<std::size_t>(k_padded), INFINITY);
        for (std::int64_t c = 0; c < k; ++c) {
          norms[c] = 0.0f;
          for (std::int64_t t = 0; t < d; ++t) {
            const float x = centroids[c * d + t];
            panels[(c / kPanel) * d * kPanel + t * kPanel + c % kPanel] = x;
            norms[c] += x * x;
          }
        }
        std::vector<std::int32_t> labels(static_cast<std::size_t>(n), -1);
        assign(points.data(), d, begin, begin + n, panels.data(), norms.data(), k_padded,
               labels.data());
        for (std::int64_t i = 0; i < n; ++i) {
          std::int32_t want = 0;
          double best = INFINITY;
          for (std::int64_t c = 0; c < k; ++c) {
            double distance = 0.0;
            for (std::int64_t t = 0; t < d; ++t) {
              const double diff = points[(begin + i) * d + t] - centroids[c * d + t];
              distance += diff * diff;
            }
            if (distance < best) {
              best = distance;
              want = static_cast<std::int32_t>(c);
            }
          }
          ASSERT_EQ(labels[i], want) << "d=" << d << " k=" << k << " n=" << n << " point " << i;
        }
      }
    }
  }
}

TILESPLASH_INSTANTIATE_FOR_TARGETS(KMeansPerTarget);

TEST(KMeans, SameResultForAnyThreadCount) {
  // Overlapping blobs: many points change cluster every round.
  const std::int64_t d = 24;
  const std::vector<float> x = blobs(3001, d, 40, 3.0, 9);
  KMeansOptions o;
  o.clusters = 57;
  o.max_iterations = 12;
  o.threads = 1;
  const KMeansResult one = kmeans(x, d, o);
  for (const int threads : {2, 3, 8}) {
    o.threads = threads;
    const KMeansResult many = kmeans(x, d, o);
    EXPECT_EQ(many.centroids, one.centroids) << threads;
    EXPECT_EQ(many.labels, one.labels) << threads;
    EXPECT_EQ(many.iterations, one.iterations) << threads;
  }
}

TEST(KMeans, RejectsBadArguments) {
  const std::vector<float> x(12, 1.0f);
  const auto expect = [&](const std::vector<float>& points, std::int64_t dim, KMeansOptions o,
                          const std::vector<float>& warm, const std::string& message) {
    try {
      kmeans(points, dim, o, warm);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  };
  KMeansOptions o;
  o.clusters = 2;
  expect(x, 0, o, {}, "dim must be >= 1");
  expect(x, 5, o, {}, "must be a multiple of dim");
  expect({}, 3, o, {}, "at least one point");
  o.clusters = 5;
  expect(x, 3, o, {}, "options.clusters must be in [1, 4]");
  o.clusters = 2;
  o.max_iterations = 0;
  expect(x, 3, o, {}, "options.max_iterations must be >= 1");
  o.max_iterations = 5;
  o.tolerance = -1.0;
  expect(x, 3, o, {}, "options.tolerance must be a finite number >= 0");
  o.tolerance = 1e-4;
  expect(x, 3, o, std::vector<float>(5), "warm must hold clusters x dim = 6 floats");
  std::vector<float> bad = x;
  bad[7] = NAN;
  expect(bad, 3, o, {}, "point 2 is not");
  o.threads = -1;
  expect(x, 3, o, {}, "options.threads must be >= 0");
}

}  // namespace
}  // namespace tilesplash
