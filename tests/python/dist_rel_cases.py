"""Rank-side code of test_distributed_rejected.py: one rank (the last, "odd")
passes a call argument VideoAttention(group=) rejects. Every rank must raise a
ValueError naming the argument at once, long before the group's timeout."""

from __future__ import annotations

import time

import torch

import tilesplash

GEOMETRY = dict(frames=4, height=4, width=4, text=8, text_at="after")  # 72 tokens
TOKENS = 72
TIMEOUT = 30.0  # seconds: a rank left waiting would take this long


def _qkv(rank, world):
    gen = torch.Generator().manual_seed(0)
    return [torch.tensor_split(torch.randn(1, TOKENS, 2, 16, generator=gen), world, dim=1)[rank]
            for _ in range(3)]


# name: (the odd rank's call arguments, every other rank's)
CASES = {
    "key_lengths out of range": (dict(key_lengths=[TOKENS + 5]), dict(key_lengths=[TOKENS - 3])),
    "key_lengths of another type": (dict(key_lengths="70"), dict(key_lengths=[70])),
    "key_lengths longer than the batch": (dict(key_lengths=[TOKENS] * 3),
                                          dict(key_lengths=[TOKENS] * 3)),
    "layer negative": (dict(layer=-1), dict(layer=0)),
}


def rejected(rank, world, names):
    import torch.distributed as dist

    odd = rank == world - 1
    out = {}
    for name in names:
        bad, good = CASES[name]
        attention = tilesplash.VideoAttention(tilesplash.VideoGeometry(**GEOMETRY), threads=1,
                                              group=dist.group.WORLD, timeout=TIMEOUT)
        start = time.monotonic()
        try:
            attention(*_qkv(rank, world), **(bad if odd else good))
            out[name] = (None, "", time.monotonic() - start)
        except Exception as error:  # noqa: BLE001 - what the test checks
            out[name] = (type(error).__name__, str(error), time.monotonic() - start)
    return out
