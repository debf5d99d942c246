#!/usr/bin/env python3
"""Compensation against dropping, same run: `tilesplash route --compare-dense` on smooth tails.

The workload is planted_band_options (tilesplash/workload.h): heads whose
attention falls off smoothly (random-Fourier positional features) over a
band of 3% to 40% of the keys, spatial and temporal alternating. At each
density (0.25 and 0.10 by default) two routed runs of the same heads on the
CPU kernel, Sparse VideoGen's spatial and temporal pair: without and with
--compensate. Per head, the relative L2 error of its output against dense
(`rel_l2_vs_dense`, the whole head, not the router's sample).

Printed per density: the heads whose drop-only error exceeds 0.01, the
geometric mean over them of drop-only error / compensated error (goal >= 2),
the largest compensated / drop-only ratio over every head (goal <= 1: no
head worse), and the cost: the compensation pass's time (pooling K and V,
the pass; `compensation_seconds`, timed inside the head) as a share of the
compensated run's sparse attention time (goal <= 0.10). Times are the CLI's
medians of --repeats runs after a warm-up run; the machine must be quiet
(docs/kernel.md):

    PYTHONPATH=build/python python bench/compensation.py                # 720p, 4 heads
    python bench/compensation.py --geometry frames=8,height=16,width=16 --heads 8
    python bench/compensation.py --tiny                                 # what the test runs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from route_cli import route_json

ERROR_FLOOR = 0.01  # heads whose drop-only error is below this are left out of the ratio


def run(cli, shape, heads, density, compensate, threads, repeats, blocks):
    extra = ["--compensate"] if compensate else []
    return route_json(cli, [*shape, "--bands", "--heads", str(heads), "--density", str(density),
                            "--compare-dense", "--repeats", str(repeats), "--block-q",
                            str(blocks[0]), "--block-kv", str(blocks[1]), *extra], threads)


def compare(dropped, compensated):
    """The figures of one density from its two runs (route --json records)."""
    pairs = [(a["rel_l2_vs_dense"], b["rel_l2_vs_dense"])
             for a, b in zip(dropped["heads"], compensated["heads"])]
    counted = [(a, b) for a, b in pairs if a > ERROR_FLOOR]
    gain = (math.exp(sum(math.log(a / max(b, 1e-300)) for a, b in counted) / len(counted))
            if counted else None)
    comp_seconds = sum(h["compensation_seconds"] for h in compensated["heads"])
    sparse_seconds = compensated["sparse_ms"] * 1e-3
    return {
        "drop_errors": [a for a, _ in pairs],
        "compensated_errors": [b for _, b in pairs],
        "heads_over_floor": len(counted),
        "error_gain_geomean": gain,
        "worst_ratio": max(b / a for a, b in pairs) if pairs else None,
        "compensation_share": comp_seconds / sparse_seconds if sparse_seconds > 0 else None,
        "sparse_ms": {"dropped": dropped["sparse_ms"], "compensated": compensated["sparse_ms"]},
        "compensated_heads": sum(bool(h["compensated"]) for h in compensated["heads"]),
    }


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cli", default=os.environ.get("TILESPLASH_CLI",
                                                        "build/tools/tilesplash/tilesplash"))
    parser.add_argument("--preset", default="wan2.1-14b-720p")
    parser.add_argument("--geometry", default=None, help="instead of --preset")
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--densities", default="0.25,0.1")
    parser.add_argument("--threads", type=int, default=0, help="0: every core")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--blocks", default="128,128", help="block_q,block_kv of the kernel")
    parser.add_argument("--tiny", action="store_true",
                        help="a 512-token geometry, 2 heads, 64 x 64 tiles: the end-to-end "
                             "check a test runs")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.tiny:
        args.geometry, args.heads, args.repeats = "frames=4,height=8,width=16", 2, 1
        args.blocks = "64,64"
    shape = ["--geometry", args.geometry] if args.geometry else ["--preset", args.preset]
    blocks = [int(x) for x in args.blocks.split(",")]
    result = {"shape": shape[1], "heads": args.heads, "blocks": blocks, "densities": {}}
    for density in (float(x) for x in args.densities.split(",")):
        dropped = run(args.cli, shape, args.heads, density, False, args.threads, args.repeats,
                      blocks)
        compensated = run(args.cli, shape, args.heads, density, True, args.threads, args.repeats,
                          blocks)
        result["densities"][str(density)] = compare(dropped, compensated)
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
        return result
    print(f"{result['shape']}, {args.heads} band heads (smooth tails), routed svg pair, "
          f"{blocks[0]} x {blocks[1]} tiles")
    for density, r in result["densities"].items():
        gain = r["error_gain_geomean"]
        print(f"density {density}: rel L2 vs dense, dropped "
              f"{', '.join(f'{x:.4f}' for x in r['drop_errors'])}")
        print(f"{'':>15}compensated "
              f"{', '.join(f'{x:.4f}' for x in r['compensated_errors'])}")
        print(f"{'':>15}gain (geo. mean over {r['heads_over_floor']} heads > {ERROR_FLOOR}): "
              f"{'-' if gain is None else f'{gain:.2f}x'} (goal >= 2), worst ratio "
              f"{r['worst_ratio']:.3f} (goal <= 1), cost {100 * r['compensation_share']:.1f}% "
              f"of the sparse attention (goal <= 10%)")
    return result


if __name__ == "__main__":
    main()
