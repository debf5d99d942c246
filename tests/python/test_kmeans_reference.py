"""The numpy k-means reference (kmeans_reference.py) on the case that
tests/kmeans_test.cc hard-codes, so the two languages stay tied; and, once
the bindings expose tilesplash.kmeans, the library against it on random blobs."""

import numpy as np
import pytest

import kmeans_reference as ref

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
    tilesplash = pytest.importorskip("tilesplash")
    if not hasattr(tilesplash, "kmeans"):
        pytest.skip("tilesplash.kmeans is not bound yet")
    rng = np.random.default_rng(0)
    centres = rng.uniform(-4, 4, size=(8, 16))
    points = (centres[rng.integers(0, 8, 500)] + rng.uniform(-0.3, 0.3, (500, 16))).astype(
        np.float32)
    _, labels, iterations, _ = ref.kmeans(points, 8, seed=11)
    got = tilesplash.kmeans(points, 8, seed=11)
    assert np.array_equal(np.asarray(got.labels), labels)
    assert got.iterations == iterations
