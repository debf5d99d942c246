"""BlockMask building on the CPU: from tilesplash's plans against create_block_mask.

    PYTHONPATH=build/python .venv/bin/python bench/flex_plans.py [--heads 40] [--tokens-geometry 21x45x80]

Wan 2.1 14B at 720p (21 x 45 x 80 = 75,600 tokens), blocks of 128:
1. one spatial band with the first-frame sink (25%): tilesplash.flex.block_mask
   (the plan built cold: plan cache and BlockMask caches cleared) against
   create_block_mask(mask_mod, _compile=True), warm (its second call);
2. a routed layer of `--heads` heads (40 by default), half spatial and half
   temporal on one band at 25% (Sparse VideoGen's masks in the original order,
   the sink in each), as one [1, H, ...] BlockMask;
3. the same layer under Sparse VideoGen 2's clusters: per head random cluster
   labels (300 query, 1,000 key clusters) and the kept pairs the native rule
   picks at 25% from random centroids; tilesplash's device pipeline
   (tilesplash._torch_video.clusters: cluster order, run order, tiles classified
   from prefix sums; warm: once on other clusters first) against
   create_block_mask on the same cluster mask_mod.
Each case checks that both give the same block lists, and prints JSON with
both times and their ratio (the floor the project holds to: >= 100x).
create_block_mask evaluates the mask on every pair: about 10 s a head here
warm, so the full run takes many minutes; --heads 4 is a quick look. Quote
the figures only from a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.nn.attention.flex_attention import create_block_mask

import tilesplash
import tilesplash.flex
from tilesplash._torch_video import clusters as device_clusters

from block_mask_compare import same_lists  # noqa: E402  (bench/, beside this script)


def warm_create(mask_mod, heads, n, block):
    build = lambda: create_block_mask(mask_mod, 1, heads, n, n, device="cpu",  # noqa: E731
                                      BLOCK_SIZE=block, _compile=True)
    start = time.perf_counter()
    build()
    first = time.perf_counter() - start
    start = time.perf_counter()
    bm = build()
    return bm, time.perf_counter() - start, first


def from_plans(masks, n, block):
    tilesplash.clear_plan_cache()
    tilesplash.flex.clear_caches()
    start = time.perf_counter()
    bm = tilesplash.flex.block_mask(masks, n, block_size=block)
    return bm, time.perf_counter() - start


def band_mask_mod(g, band, temporal_heads):
    frames, per_frame = g.frames, g.tokens_per_frame
    temporal = torch.tensor(temporal_heads)

    def mask_mod(b, h, q, k):
        qt = (q % per_frame) * frames + q // per_frame
        kt = (k % per_frame) * frames + k // per_frame
        distance = torch.where(temporal[h], (qt - kt).abs(), (q - k).abs())
        return (distance <= band) | (k < per_frame)

    return mask_mod


def record(name, theirs, ours, same, heads, first):
    return {"case": name, "heads": heads, "tilesplash_s": ours, "create_block_mask_s": theirs,
            "create_block_mask_first_s": first, "ratio": theirs / ours, "same_block_lists": same}


def svg2_plan(g, heads, block, density, seed):
    """Random clusters per head (seeded) and the native pair rule, planned by
    tilesplash's device pipeline. Returns (BlockMask, seconds, mask_mod)."""
    n = g.tokens
    gen = torch.Generator().manual_seed(seed)
    qc, kc, d = 300, 1000, 128
    labels_q = torch.randint(0, qc, (heads, n), generator=gen)
    labels_k = torch.randint(0, kc, (heads, n), generator=gen)
    sizes_q = torch.zeros(heads, qc, dtype=torch.int64).scatter_add_(
        1, labels_q, torch.ones_like(labels_q))
    sizes_k = torch.zeros(heads, kc, dtype=torch.int64).scatter_add_(
        1, labels_k, torch.ones_like(labels_k))
    cq, ck = torch.randn(heads, qc, d, generator=gen), torch.randn(heads, kc, d, generator=gen)
    kept = device_clusters.select_pairs(cq, ck, sizes_q, sizes_k, d ** -0.5, density,
                                        min(0.1, density / 2), n, 0)
    start = time.perf_counter()
    q_crank, k_crank = device_clusters.cluster_ranks(kept, sizes_q, sizes_k)
    compact = torch.zeros((heads, qc + 1, kc + 1), dtype=torch.uint8)
    rows = torch.where(q_crank >= 0, q_crank, torch.full_like(q_crank, qc))
    cols = torch.where(k_crank >= 0, k_crank, torch.full_like(k_crank, kc))
    compact[torch.arange(heads)[:, None, None], rows[:, :, None], cols[:, None, :]] = kept.to(
        torch.uint8)
    compact = compact[:, :qc, :kc].contiguous()
    _, q_rank = device_clusters.run_order(labels_q, q_crank, 0, n, (n, n))
    _, k_rank = device_clusters.run_order(labels_k, k_crank, 0, n, (n, n))
    full, partial = device_clusters.classify_tiles(q_rank, k_rank, compact.bool(), n, n, block,
                                                   block)
    partial_num, partial_idx = device_clusters.block_lists(partial)
    full_num, full_idx = device_clusters.block_lists(full)
    q_rank32, k_rank32 = q_rank.to(torch.int32), k_rank.to(torch.int32)

    def mask_mod(b, h, q, k):
        a, c = q_rank32[h, q], k_rank32[h, k]
        pair = compact[h, torch.clamp(a, min=0), torch.clamp(c, min=0)]
        return (a < 0) | (c < 0) | (pair != 0)

    ours = torch.nn.attention.flex_attention.BlockMask.from_kv_blocks(
        partial_num, partial_idx, full_num, full_idx, BLOCK_SIZE=block, mask_mod=mask_mod,
        seq_lengths=(n, n), compute_q_blocks=False)
    return ours, time.perf_counter() - start, mask_mod


def svg2_case(g, heads, block, density):
    """The cluster plan from tilesplash's device pipeline against create_block_mask
    on the same cluster mask_mod. Both warm: the pipeline runs once on other
    clusters first (the torch ops' first-call setup is not a plan's cost; nothing
    is cached between the two), as create_block_mask's second call is timed."""
    svg2_plan(g, heads, block, density, seed=1)
    ours, ours_s, mask_mod = svg2_plan(g, heads, block, density, seed=0)
    n = g.tokens
    theirs, theirs_s, first = warm_create(mask_mod, heads, n, block)
    return record("svg2 clusters, routed layer", theirs_s, ours_s, same_lists(ours, theirs, n, n, block),
                  heads, first)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--heads", type=int, default=40)
    parser.add_argument("--geometry", default="21x45x80", help="frames x height x width")
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--density", type=float, default=0.25)
    parser.add_argument("--cases", default="band,svg,svg2")
    args = parser.parse_args()
    frames, height, width = (int(x) for x in args.geometry.split("x"))
    g = tilesplash.VideoGeometry(frames, height, width)
    n, block, heads = g.tokens, args.block, args.heads
    layer = tilesplash.VideoAttention(g, density=args.density, sink=True)
    results = {"tokens": n, "block": block, "threads": torch.get_num_threads(),
               "band": layer.band, "cases": []}
    cases = set(args.cases.split(","))
    if "band" in cases:
        mask = layer.mask("spatial")
        ours, ours_s = from_plans(mask, n, block)
        theirs, theirs_s, first = warm_create(band_mask_mod(g, layer.band, [False]), None, n,
                                              block)
        results["cases"].append(record("spatial band + sink", theirs_s, ours_s,
                                       same_lists(ours, theirs, n, n, block), 1, first))
    if "svg" in cases:
        temporal = [h % 2 == 1 for h in range(heads)]
        masks = [layer.mask("temporal" if t else "spatial") for t in temporal]
        ours, ours_s = from_plans(masks, n, block)
        theirs, theirs_s, first = warm_create(band_mask_mod(g, layer.band, temporal), heads, n,
                                              block)
        results["cases"].append(record("svg routed layer (spatial / temporal + sink)", theirs_s,
                                       ours_s, same_lists(ours, theirs, n, n, block), heads, first))
    if "svg2" in cases:
        results["cases"].append(svg2_case(g, heads, block, args.density))
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
