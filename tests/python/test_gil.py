"""The GIL is released while the kernel runs: a second Python thread keeps
running all through a long call."""

from __future__ import annotations

import random
import threading
import time

import numpy as np

import tilesplash
from tilesplash import VideoAttention, VideoGeometry


def coverage(call, slices=10):
    """Fraction of `slices` equal parts of call() in which another Python thread ran.

    Inside a C call that holds the GIL the interpreter cannot switch threads,
    so the other thread runs only while the caller waits to take the GIL back
    (a few switch intervals of 5 ms at the start): a small fraction of a long
    call. A call that releases the GIL leaves the other thread running
    throughout.
    """
    stamps = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    spinner = threading.Thread(target=spin)
    spinner.start()
    time.sleep(0.02)  # the spinner is running
    start = time.perf_counter()
    call()
    end = time.perf_counter()
    stop.set()
    spinner.join()
    width = (end - start) / slices
    seen = {int((t - start) / width) for t in stamps if start <= t < end}
    return len(seen) / slices, end - start


def test_attention_releases_the_gil():
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, 2, 4096, 64)).astype(np.float32) for _ in range(3))
    share, seconds = coverage(lambda: tilesplash.attention(q, k, v, threads=1))
    assert share >= 0.8, (share, seconds)


def test_video_attention_releases_the_gil():
    g = VideoGeometry(16, 16, 16)  # 4096 tokens
    rng = np.random.default_rng(1)
    q, k, v = (rng.standard_normal((1, g.tokens, 2, 64)).astype(np.float32) for _ in range(3))
    layer = VideoAttention(g, force="dense", threads=1)
    share, seconds = coverage(lambda: layer(q, k, v))
    assert share >= 0.8, (share, seconds)


def test_the_measure_sees_a_call_that_holds_the_gil():
    values = [random.random() for _ in range(1_500_000)]
    share, seconds = coverage(lambda: sorted(values))  # one C call: holds the GIL
    assert share <= 0.4, (share, seconds)
