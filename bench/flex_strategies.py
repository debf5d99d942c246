"""How the flex backend should run temporal and sta heads: rows permuted into their
order on the device, or per-head BlockMasks on the original order. CPU,
compiled FlexAttention (the inductor C++ template), same run.

    PYTHONPATH=build/python .venv/bin/python bench/flex_strategies.py [--frames 21 --height 24 --width 32]
    ... bench/flex_strategies.py --tiny    # a tiny eager dry run (CI: tests/python/test_flex_strategies_bench.py)

For one layer whose heads all run the same non-original-order candidate:
- per_head: one call, each head's mask (temporal | sink, or the sta window)
  planned on the original order, where it is scattered;
- permute: Q, K, V gathered into the candidate's order (index_select), one
  call on the run-order band plan, the sink segment as a second call, the
  LSE merge and the scatter back.
PyTorch's compiled CPU template has no LSE output, so the permute timing
runs both calls without it and adds the merge's cost measured on stand-in
LSEs: the same work as the real path. Prints JSON: tiles visited and
partial per strategy, and the median of `repeats` warm runs. Quote
timings only from a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

import tilesplash
from tilesplash._flex.kernel import run_flex
from tilesplash._flex.masks import block_mask_for
from tilesplash._flex.tables import plan_tables
from tilesplash._lse_merge import merge_lse


def timed(function, repeats):
    function()  # compile / warm
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def tiles(mask, q_len, kv_len, block):
    t = plan_tables(mask, q_len, kv_len, block, block)
    return {"visited": int((t.tiles != 0).sum()), "partial": int((t.tiles >= 2).sum())}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=21)
    parser.add_argument("--height", type=int, default=24)
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--dim", type=int, default=64)
    parser.add_argument("--density", type=float, default=0.25)
    parser.add_argument("--block", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--tiny", action="store_true",
                        help="a dry run: a 2 x 4 x 8 geometry, 2 heads, d 16, blocks of 16, one "
                             "eager repeat (checks the script runs; its times mean nothing)")
    args = parser.parse_args(argv)
    if args.tiny:
        args.frames, args.height, args.width, args.heads, args.dim = 2, 4, 8, 2, 16
        args.block, args.repeats = 16, 1
    compiled = not args.tiny
    g = tilesplash.VideoGeometry(args.frames, args.height, args.width)
    n, heads, block = g.tokens, args.heads, args.block
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, heads, n, args.dim) for _ in range(3))
    results = {"tokens": n, "heads": heads, "dim": args.dim, "block": block,
               "threads": torch.get_num_threads()}
    cases = [("temporal", "svg", dict(density=args.density, sink=True)),
             ("sta", "sta", dict(density=args.density))]
    with torch.no_grad():
        for label, method, options in cases:
            layer = tilesplash.VideoAttention(g, method=method, **options)
            name = layer.candidates[1][0] if method == "svg" else layer.candidates[0][0]
            run = layer.candidate_run(name)
            whole = run["mask"]
            bm_whole = block_mask_for([whole] * heads, n, n, block, block, "cpu")
            per_head = timed(lambda: run_flex(q, k, v, bm_whole, None, compile=compiled,
                                              return_lse=False), args.repeats)
            order = torch.as_tensor(run["order"])
            bm_run = block_mask_for([run["run_mask"]] * heads, n, n, block, block, "cpu")
            extra = run["extra"]
            if extra is not None:
                keys = torch.arange(extra["count"]) * extra["stride"] + extra["first"]
                bm_extra = block_mask_for([extra["mask"]] * heads, n, extra["count"], block,
                                          block, "cpu")
            stand_in = torch.randn(1, heads, n)

            def permuted():
                qr, kr, vr = (x.index_select(2, order) for x in (q, k, v))
                out, _ = run_flex(qr, kr, vr, bm_run, None, compile=compiled, return_lse=False)
                if extra is not None:
                    ks, vs = kr.index_select(2, keys), vr.index_select(2, keys)
                    out2, _ = run_flex(qr, ks, vs, bm_extra, None, compile=compiled,
                                       return_lse=False)
                    out, _ = merge_lse([out, out2], [stand_in, stand_in])
                return torch.empty_like(out).index_copy_(2, order, out)

            permute = timed(permuted, args.repeats)
            plan_run = tiles(run["run_mask"], n, n, block)
            if extra is not None:
                sink = tiles(extra["mask"], n, extra["count"], block)
                plan_run = {key: plan_run[key] + sink[key] for key in plan_run}
            results[label] = {
                "candidate": name,
                "per_head": {"seconds": per_head, **tiles(whole, n, n, block)},
                "permute": {"seconds": permute, **plan_run},
                "per_head_over_permute": per_head / permute,
            }
    print(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
