"""tilesplash.kmeans: the k-means of Sparse VideoGen 2's clusters, on its own."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from . import _core
from ._threading import check_context, core_of
from ._checks import INT32_MAX, MAX_THREADS, check_float, check_int


class KMeansResult(NamedTuple):
    centroids: np.ndarray  # float32 [clusters, dim]: the means of the labels' clusters
    labels: np.ndarray  # int32 [points]: each point's cluster, from the last assignment
    sizes: np.ndarray  # int64 [clusters]: points per cluster
    iterations: int  # assignment + update rounds run
    converged: bool  # stopped because no centroid moved by `tolerance`


def kmeans(points, clusters: int, *, seed: int = 0, max_iterations: int = 50,
           tolerance: float = 1e-4, warm=None, threads: int = 0,
           context=None) -> KMeansResult:
    """Lloyd's k-means of the rows of `points` ([n, dim], converted to float32).

    Starts from `warm` ([clusters, dim]) when given, else from the points a seeded
    partial Fisher-Yates shuffle picks (the same for the same seed everywhere; see
    docs/masks.md). Each round assigns every point to its nearest centroid (squared
    Euclidean, the lowest index on a tie) and moves every centroid to the mean of
    its points (an empty cluster keeps its centroid); it stops after
    `max_iterations` rounds or once no centroid moved by `tolerance` or more. The
    result is the same for any thread count. This is what VideoAttention(method=
    "svg2") runs on each head's Q and K (50 rounds cold, 2 warm-started).
    threads: 0 uses the context's thread count (every core by default).
    context: a tilesplash.ThreadingContext to run on; None: the process's
    default one, which concurrent calls share (they take turns on it).
    """
    points = _matrix(points, "points")
    clusters = check_int(clusters, "clusters", 1)
    if warm is not None:
        warm = _matrix(warm, "warm")
        if warm.shape != (clusters, points.shape[1]):
            raise ValueError(f"warm: expected shape ({clusters}, {points.shape[1]}) "
                             f"(clusters, dim), got {warm.shape}")
    centroids, labels, sizes, iterations, converged = _core.kmeans(
        points, clusters, check_int(max_iterations, "max_iterations", 1, maximum=INT32_MAX),
        check_float(tolerance, "tolerance", "a finite float >= 0"),
        check_int(seed, "seed", 0, maximum=2**64 - 1),
        check_int(threads, "threads", 0, maximum=MAX_THREADS), warm,
        core_of(check_context(context)))
    return KMeansResult(centroids, labels, sizes, iterations, converged)


def _matrix(value, name):
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"{name}: expected a 2-D array of numbers, got {type(value).__name__}")
    try:
        array = np.asarray(value)
    except (TypeError, ValueError, RuntimeError) as error:
        raise TypeError(f"{name}: expected a 2-D array of numbers ({error})") from None
    if array.dtype.kind not in "iuf" and array.dtype.name != "bfloat16":
        raise TypeError(f"{name}: expected a 2-D array of numbers, got dtype {array.dtype}")
    if array.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array [n, dim], got shape {array.shape}")
    return np.ascontiguousarray(array, dtype=np.float32)
