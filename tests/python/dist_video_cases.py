"""Rank-side code of the VideoAttention(group=) and diffusers process_group tests.

Every rank and the test process build the same full inputs from a seed; each
rank keeps its shard (the split given per world size), runs the group path,
and returns its output shard and the (global) report; the test compares them
against one process computing every head.
"""

from __future__ import annotations

import time

import numpy as np
import torch

import tilesplash

# A geometry with text, 8 x 4 x 6 video tokens + 5 text = 197 tokens; 5 heads,
# so 2 and 3 ranks get uneven head counts.
GEOMETRY = (8, 4, 6, 5, "before")
HEADS, DIM = 5, 32
# name: (VideoAttention keyword arguments, [(layer, step), ...] calls, splits by world)
VIDEO_CASES = {
    "svg_routed": (dict(method="svg", density=0.3, samples=16, dense_layers=1, sink=True),
                   [(0, 0), (1, 0), (2, 1)], {2: [99, 98], 3: [66, 66, 65]}),
    "mix_uneven": (dict(method="mix", density=0.3, samples=16, density_budget=0.4),
                   [(1, 2)], {2: [150, 47], 3: [20, 0, 177]}),
    "svg2_warm": (dict(method="svg2", density=0.3, dense_steps=1),
                  [(0, 0), (0, 1), (0, 2)], {2: [100, 97], 3: [70, 60, 67]}),
    # FlexAttention (on the CPU here; CUDA tensors over NCCL on a GPU machine)
    "svg_flex": (dict(method="svg", density=0.3, samples=16, dense_layers=1, sink=True,
                      backend="flex", block_q=64, block_kv=64),
                 [(1, 0), (2, 1)], {2: [120, 77], 3: [66, 0, 131]}),
}
# Batch entries of a case's inputs (1 unless named): batch entries and heads both
# travel through the exchange.
BATCH = {"mix_uneven": 2}
# Fields of a head's report that must match one process bit for bit (not timings).
DECISION_FIELDS = ("batch", "head", "choice", "routed", "mse_spatial", "mse_temporal", "mse",
                   "density", "tiles_visited")


def geometry():
    frames, height, width, text, text_at = GEOMETRY
    return tilesplash.VideoGeometry(frames, height, width, text=text, text_at=text_at)


def video_inputs(name, call):
    """q, k, v [batch, tokens, HEADS, DIM]; odd heads get a shared per-patch vector in q
    and k (the same patch in every frame attracts: temporal), so that the
    router's choices differ between heads."""
    gen = torch.Generator().manual_seed(sum(map(ord, name)) * 31 + call)
    g = geometry()
    n = g.tokens
    batch = BATCH.get(name, 1)
    q, k, v = (torch.randn(batch, n, HEADS, DIM, generator=gen) for _ in range(3))
    frames, height, width, text, _ = GEOMETRY
    patch = torch.randn(height * width, DIM, generator=gen).repeat(frames, 1)
    for h in range(1, HEADS, 2):
        q[:, text:, h] += 2 * patch
        k[:, text:, h] += 2 * patch
    return q, k, v


def keep_matrix(mask, tokens):
    """A mask as a bool [tokens, tokens] array (cluster masks do not pickle)."""
    return np.array([[mask.keeps(i, j) for j in range(tokens)] for i in range(tokens)])


def head_masks(layer_attention, heads):
    """svg2: {head: keep matrix} for the heads given; None for a head head_mask refuses."""
    out = {}
    for h in heads:
        try:
            out[h] = keep_matrix(layer_attention.head_mask(h), geometry().tokens)
        except ValueError:
            out[h] = None
    return out


def decisions(report):
    return [{key: head[key] for key in DECISION_FIELDS} for head in report["heads"]]


def run_video_cases(rank, world, names):
    """{name: [(out shard, lse shard, head decisions, group info) per call]}."""
    import torch.distributed as dist

    results = {}
    for name in names:
        kwargs, calls, splits = VIDEO_CASES[name]
        sizes = splits[world]
        begin = sum(sizes[:rank])
        layer_attention = tilesplash.VideoAttention(geometry(), threads=1, group=dist.group.WORLD,
                                                    timeout=60, **kwargs)
        runs = []
        for i, (layer, step) in enumerate(calls):
            q, k, v = (x.narrow(1, begin, sizes[rank]) for x in video_inputs(name, i))
            out, lse, report = layer_attention(q, k, v, layer=layer, step=step, return_lse=True)
            runs.append((out.numpy(), lse.numpy(), decisions(report), report["group"]))
        if kwargs["method"] == "svg2":  # the clusters of the last call, by global head
            runs.append(head_masks(layer_attention, range(HEADS)))
        results[name] = runs
    return results


def video_rank_raises(rank, world, what):
    """The last rank passes a NaN ("nan") or raises while running its heads
    ("heads"): every rank raises promptly with an error that names that rank."""
    import torch.distributed as dist

    sizes = VIDEO_CASES["svg_routed"][2][world]
    begin = sum(sizes[:rank])
    q, k, v = (x.narrow(1, begin, sizes[rank]).clone() for x in video_inputs("svg_routed", 0))
    layer_attention = tilesplash.VideoAttention(geometry(), threads=1, group=dist.group.WORLD,
                                                timeout=20, samples=16)
    if rank == world - 1 and what == "nan":
        q[0, 0, 0, 0] = float("nan")
    if rank == world - 1 and what == "heads":
        def broken(*args, **kwargs):
            raise RuntimeError("the last rank's heads failed")
        layer_attention._forward_local = broken
    start = time.monotonic()
    try:
        layer_attention(q, k, v)
    except Exception as error:
        return type(error).__name__, str(error), time.monotonic() - start
    return None, "no error", time.monotonic() - start


def video_rank_exits(rank, world):
    """Rank 1 never calls (it exits): the other ranks raise a TimeoutError."""
    import torch.distributed as dist

    # Every rank finishes gloo's connection set-up first: a rank leaving while
    # the others still connect makes their init fail instead (seen under load).
    dist.barrier()
    if rank == 1:
        raise RuntimeError("rank 1 exits before the call")
    sizes = VIDEO_CASES["svg_routed"][2][world]
    begin = sum(sizes[:rank])
    q, k, v = (x.narrow(1, begin, sizes[rank]) for x in video_inputs("svg_routed", 0))
    layer_attention = tilesplash.VideoAttention(geometry(), threads=1, group=dist.group.WORLD,
                                                timeout=2, samples=16)
    start = time.monotonic()
    try:
        layer_attention(q, k, v)
    except Exception as error:
        return type(error).__name__, str(error), time.monotonic() - start
    return None, "no error", time.monotonic() - start
