"""The numpy k-means reference (kmeans_reference.py) on the case that
tests/kmeans_test.cc hard-codes, so the two languages stay tied; and the
library's tilesplash.kmeans against it: same seed, same labels."""

import numpy as np
import pytest

import kmeans_reference as ref
import tilesplash

LABELS = [
    3, 2, 1, 3, 3, 2, 1, 3, 3, 2, 1, 3, 3, 2, 0, 3, 3, 2, 1, 3, 3, 2, 1, 3, 3, 2, 0, 3, 3, 2,
    0, 3, 3, 2, 0, 3, 3, 2, 1, 3, 3, 2, 1, 3, 3, 2, 0, 3, 3, 2, 1, 3, 3, 2, 0, 3, 3, 2, 0, 3,
]


def test_fixed_case_matches_the_cpp_test():
    assert ref.initial_indices(60, 4, 3) == [6, 42, 37, 7]
    _, labels, iterations, converged = ref.kmeans(ref.test_points(), 4, seed=3)
    assert labels.tolist() == LABELS
    assert (iterations, converged) == (3, True)


def test_library_matches_the_reference():
    rng = np.random.default_rng(0)
    centres = rng.uniform(-4, 4, size=(8, 16))
    points = (centres[rng.integers(0, 8, 500)] + rng.uniform(-0.3, 0.3, (500, 16))).astype(
        np.float32)
    for seed in (11, 12, 13):
        centroids, labels, iterations, converged = ref.kmeans(points, 8, seed=seed)
        got = tilesplash.kmeans(points, 8, seed=seed)
        assert np.array_equal(got.labels, labels)
        assert (got.iterations, got.converged) == (iterations, converged)
        np.testing.assert_allclose(got.centroids, centroids, rtol=0, atol=1e-5)
        assert got.sizes.tolist() == np.bincount(labels, minlength=8).tolist()


def test_library_matches_the_fixed_case_and_initial_indices():
    from tilesplash import _core

    assert _core.kmeans_initial_indices(60, 4, 3) == ref.initial_indices(60, 4, 3)
    assert _core.kmeans_initial_indices(1000, 50, 2**64 - 1) == ref.initial_indices(1000, 50, 2**64 - 1)
    got = tilesplash.kmeans(ref.test_points(), 4, seed=3)
    assert got.labels.tolist() == LABELS and (got.iterations, got.converged) == (3, True)
    assert got.labels.dtype == np.int32 and got.centroids.dtype == np.float32


def test_warm_start_and_iteration_cap_match_the_reference():
    rng = np.random.default_rng(5)
    points = rng.standard_normal((300, 8)).astype(np.float32)  # no clusters: many rounds
    warm = points[:6] + 0.5
    for rounds in (1, 2, 7):
        centroids, labels, iterations, converged = ref.kmeans(points, 6, max_iterations=rounds,
                                                              warm=warm)
        got = tilesplash.kmeans(points, 6, max_iterations=rounds, warm=warm)
        assert np.array_equal(got.labels, labels) and got.iterations == iterations == rounds
        assert got.converged == converged
        np.testing.assert_allclose(got.centroids, centroids, rtol=0, atol=1e-5)


def test_same_result_for_any_thread_count():
    points = np.random.default_rng(6).standard_normal((2000, 32)).astype(np.float32)
    one = tilesplash.kmeans(points, 40, seed=2, threads=1)
    for threads in (2, 3, 0):
        other = tilesplash.kmeans(points, 40, seed=2, threads=threads)
        assert np.array_equal(one.labels, other.labels)
        assert np.array_equal(one.centroids, other.centroids)
        assert one.iterations == other.iterations


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (("points", 2), {}, TypeError, "points"),
        ((np.zeros((4, 2, 1)), 2), {}, ValueError, "points"),
        ((np.zeros((4, 2)), 0), {}, ValueError, "clusters"),
        ((np.zeros((4, 2)), 5), {}, ValueError, "clusters"),
        ((np.zeros((4, 2)), 2.0), {}, TypeError, "clusters"),
        ((np.array([[0.0, np.nan], [1, 1]]), 1), {}, ValueError, "finite"),
        ((np.zeros((4, 2)), 2), {"max_iterations": 0}, ValueError, "max_iterations"),
        ((np.zeros((4, 2)), 2), {"tolerance": -1.0}, ValueError, "tolerance"),
        ((np.zeros((4, 2)), 2), {"warm": np.zeros((3, 2))}, ValueError, "warm"),
        ((np.zeros((4, 2)), 2), {"seed": -1}, ValueError, "seed"),
    ],
)
def test_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        tilesplash.kmeans(*args, **kwargs)
