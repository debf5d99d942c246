"""A plain numpy k-means that tilesplash's C++ kmeans() must agree with.

Written from the definition in include/tilesplash/clusters.h, for clarity not
speed: the first centroids are the points at kmeans_initial_indices(n, k, seed)
(a partial Fisher-Yates shuffle driven by splitmix64), then Lloyd rounds:
assign every point to its nearest centroid (squared Euclidean, lowest index
on a tie), move every centroid to the mean of its points (an empty cluster
keeps its centroid), stop after max_iterations rounds or once no centroid
moved by tolerance or more. Distances and means are computed in float64,
centroids stored as float32 like the library's. On data whose clusters are
separated by more than the float32 rounding of a distance, the same seed
gives the same labels as the C++ code.

Run as a script it prints the labels of the fixed test case that
tests/kmeans_test.cc (KMeans.MatchesTheNumpyReference) hard-codes.
"""

import numpy as np

MASK64 = (1 << 64) - 1


def splitmix64(state):
    """One splitmix64 step: (new state, output), both Python ints < 2**64."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def initial_indices(n, clusters, seed):
    """kmeans_initial_indices: entry i swapped with i + below(n - i)."""
    if not 1 <= clusters <= n:
        raise ValueError(f"needs 1 <= clusters <= n, got clusters {clusters}, n {n}")
    index = list(range(n))
    state = seed & MASK64
    for i in range(clusters):
        state, z = splitmix64(state)
        offset = (z * (n - i)) >> 64
        index[i], index[i + offset] = index[i + offset], index[i]
    return index[:clusters]


def kmeans(points, clusters, max_iterations=50, tolerance=1e-4, seed=0, warm=None):
    """Returns (centroids float32 [k, d], labels int32 [n], iterations, converged)."""
    points = np.asarray(points, dtype=np.float32)
    n = points.shape[0]
    if warm is not None:
        centroids = np.array(warm, dtype=np.float32).reshape(clusters, -1)
    else:
        centroids = points[initial_indices(n, clusters, seed)].copy()
    x = points.astype(np.float64)
    labels = np.zeros(n, dtype=np.int32)
    for iteration in range(1, max_iterations + 1):
        c = centroids.astype(np.float64)
        distances = ((x[:, None, :] - c[None, :, :]) ** 2).sum(axis=2)
        labels = distances.argmin(axis=1).astype(np.int32)  # the first minimum on a tie
        moved = 0.0
        for j in range(clusters):
            members = x[labels == j]
            if len(members) == 0:
                continue
            mean = members.mean(axis=0).astype(np.float32)
            moved = max(moved, float(np.sqrt(((mean.astype(np.float64) - c[j]) ** 2).sum())))
            centroids[j] = mean
        if moved < tolerance:
            return centroids, labels, iteration, True
    return centroids, labels, max_iterations, False


def test_points(n=60, dim=6, groups=4, seed=7):
    """The fixed case: `groups` centres in [-4, 4]^dim, point i near centre i % groups
    (offsets in [-0.5, 0.5]), all from one splitmix64 stream, as float32."""
    state = seed
    values = []
    for _ in range(groups * dim + n * dim):
        state, z = splitmix64(state)
        values.append((z >> 11) * 2.0**-53)
    u = np.array(values)
    centres = (u[: groups * dim].reshape(groups, dim) * 2.0 - 1.0) * 4.0
    offsets = u[groups * dim :].reshape(n, dim) - 0.5
    return (centres[np.arange(n) % groups] + offsets).astype(np.float32)


if __name__ == "__main__":
    centroids, labels, iterations, converged = kmeans(test_points(), 4, seed=3)
    print("initial", initial_indices(60, 4, 3))
    print("labels", ", ".join(str(v) for v in labels))
    print("iterations", iterations, "converged", converged)
    print("centroid0", centroids[0].tolist())
