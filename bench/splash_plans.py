#!/usr/bin/env python3
"""Splash's process_mask against tilesplash.jax.mask_info, in the same run.

Splash (JAX's Pallas Splash Attention) turns a mask into its plan, a MaskInfo,
in process_mask, which walks every block in Python and evaluates the mask on
it. tilesplash.jax.mask_info builds the same MaskInfo from tilesplash plans.
This times both on the same masks, each in a child process of this one (so
one side's memory and caches never help the other), checks that both found
the same plan (block kinds and next-block indices equal, same number of
distinct partial blocks), and prints a markdown table:

- a local band keeping 25% of the map (Splash's computable LocalMask; the
  issue's table) at 8,192 / 32,768 / 65,536 tokens and at Wan 2.1's 720p and
  1440p lengths, 75,600 and 302,400 tokens;
- a routed 40-head layer of Wan 2.1 14B at 720p: Sparse VideoGen's spatial
  and temporal masks with the first-frame sink at 25% density, 13 spatial and
  27 temporal heads (per-head masks; Splash gets them as a MultiHeadMask of
  masks that evaluate the same predicates on each block);
- what tilesplash.jax.VideoSplashAttention builds once for such a layer (both
  candidates in their run orders, the sink as a key segment, block 512).

process_mask needs block sizes that divide the lengths: 75,600 = 2^4 3^3 5^2 7
and 302,400 = 2^6 3^3 5^2 7 are not multiples of 128 (Splash's TPU kernel
tiles), so the comparison uses 432 (175 blocks) and 576 (525 blocks) there;
mask_info also accepts ragged lengths (512 for the runner: the MaskInfo of the
mask zero-padded to whole blocks, which the kernel then runs on padded q, k, v).
A process_mask child that exceeds --timeout is stopped and reported as "> T s".

Usage (quiet machine; process_mask alone takes minutes at 302,400 tokens and
on the routed layer):

    PYTHONPATH=build/python .venv/bin/python bench/splash_plans.py --timeout 3600
    PYTHONPATH=build/python .venv/bin/python bench/splash_plans.py --cases band-8192,band-32768
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

BAND_CASES = {  # name: (tokens, block)
    "band-8192": (8192, 256),
    "band-32768": (32768, 256),
    "band-65536": (65536, 512),
    "band-75600": (75600, 432),
    "band-302400": (302400, 576),
}
ROUTED_CASES = {  # name: (frames, height, width, block, heads)
    "routed-720p": (21, 45, 80, 432, 40),
}
RUNNER_CASES = {"runner-720p": (21, 45, 80, 512, 40), "runner-1440p": (21, 90, 160, 512, 40)}
SPATIAL_SHARE = 13 / 40  # Sparse VideoGen's ~30% spatial / ~70% temporal heads


def band_half_width(n: int, density: float) -> int:
    """The W whose band |q - k| <= W over n x n keeps the share closest to density."""
    def share(w):
        return (n * (2 * w + 1) - w * (w + 1)) / (n * n)
    lo, hi = 0, n
    while lo < hi:
        mid = (lo + hi) // 2
        if share(mid) < density:
            lo = mid + 1
        else:
            hi = mid
    return min((lo, max(lo - 1, 0)), key=lambda w: (abs(share(w) - density), w))


def spatial_heads(heads: int) -> int:
    return round(heads * SPATIAL_SHARE)


def head_pattern(heads: int) -> list[str]:
    """spatial_heads(heads) spatial heads spread over the layer, the rest temporal."""
    count = spatial_heads(heads)
    return ["spatial" if (h * count) % heads < count else "temporal" for h in range(heads)]


# ---------------------------------------------------------------- children


def _splash_modules():
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_mask as mask_lib,
        splash_attention_mask_info as info_lib,
    )
    return mask_lib, info_lib


def _video_predicate_mask(mask_lib):
    import numpy as np

    class VideoMask(mask_lib.Mask):
        """Sparse VideoGen's mask with the sink, no text, for Splash: evaluated
        on each block process_mask asks for (as tilesplash defines it)."""

        def __init__(self, kind, frames, per_frame, band):
            self.kind, self.frames, self.per_frame, self.band = kind, frames, per_frame, band
            self.n = frames * per_frame

        @property
        def shape(self):
            return (self.n, self.n)

        def __getitem__(self, idx):
            rows, cols = idx
            q = np.arange(rows.start or 0, self.n if rows.stop is None else rows.stop)[:, None]
            k = np.arange(cols.start or 0, self.n if cols.stop is None else cols.stop)[None, :]
            if self.kind == "temporal":  # token-major positions
                qq = (q % self.per_frame) * self.frames + q // self.per_frame
                kk = (k % self.per_frame) * self.frames + k // self.per_frame
            else:
                qq, kk = q, k
            return (np.abs(qq - kk) <= self.band) | (k < self.per_frame)

        def _key(self):
            return (self.kind, self.frames, self.per_frame, self.band)

        def __eq__(self, other):
            return isinstance(other, VideoMask) and self._key() == other._key()

        def __hash__(self):
            return hash(self._key())

    return VideoMask


def _summary(info) -> dict:
    import numpy as np

    block_mask = np.asarray(info.block_mask).astype(np.int32)
    digest = hashlib.sha256()
    for array in (info.block_mask, info.data_next):
        digest.update(np.ascontiguousarray(np.asarray(array).astype(np.int32)).tobytes())
    partial = info.partial_mask_blocks
    return {"full": int((block_mask == 2).sum()), "partial": int((block_mask == 1).sum()),
            "distinct_partial": None if partial is None else int(len(partial)),
            "plan": digest.hexdigest()[:16], "grid": list(block_mask.shape)}


def _routed_band(frames, height, width):
    import tilesplash

    g = tilesplash.VideoGeometry(frames, height, width)
    return g, tilesplash.VideoAttention(g, density=0.25, sink=True).band


def child(side: str, case: str, reps: int) -> dict:
    """One side of one case, in this (child) process."""
    if side == "process_mask":
        mask_lib, info_lib = _splash_modules()
        if case in BAND_CASES:
            n, block = BAND_CASES[case]
            w = band_half_width(n, 0.25)
            masks = [mask_lib.LocalMask((n, n), (w, w), 0)]
        else:
            frames, height, width, block, heads = ROUTED_CASES[case]
            _, band = _routed_band(frames, height, width)
            video_mask = _video_predicate_mask(mask_lib)
            masks = [video_mask(kind, frames, height * width, band) for kind in head_pattern(heads)]
        start = time.perf_counter()
        info, _ = info_lib.process_mask(mask_lib.MultiHeadMask(masks), (block, block))
        seconds = time.perf_counter() - start
        summary = _summary(info)
        if summary["distinct_partial"] is None:  # computable mask: blocks not materialised
            summary.pop("distinct_partial")
        return {"seconds": [seconds], **summary}

    import tilesplash
    import tilesplash.jax as tsj
    from tilesplash.jax import _kernel, _plans

    if case in RUNNER_CASES:
        frames, height, width, block, heads = RUNNER_CASES[case]
        g = tilesplash.VideoGeometry(frames, height, width)
        times = []
        for _ in range(reps):
            tilesplash.clear_plan_cache()
            _plans.mask_tiles.cache_clear()
            layer = tsj.VideoSplashAttention(g, density=0.25, sink=True, block_q=block,
                                             block_kv=block)
            start = time.perf_counter()
            arrays, _ = layer._build()
            times.append(time.perf_counter() - start)
        return {"seconds": times, "grid": [len(layer.candidates), *arrays["block_mask"].shape[1:]],
                "distinct_partial": 0 if arrays["partial"] is None else
                int(arrays["partial"].shape[0])}
    if case in BAND_CASES:
        n, block = BAND_CASES[case]
        w = band_half_width(n, 0.25)
        masks = tilesplash.Mask.local(w, w)
    else:
        frames, height, width, block, heads = ROUTED_CASES[case]
        g, band = _routed_band(frames, height, width)
        make = {"spatial": tilesplash.Mask.spatial, "temporal": tilesplash.Mask.temporal}
        masks = [make[kind](g, band, sink=True) for kind in head_pattern(heads)]
        n = g.tokens
    times = []
    for _ in range(reps):  # cold: no plan or MaskInfo cached
        tilesplash.clear_plan_cache()
        _plans.mask_tiles.cache_clear()
        _kernel._mask_info.cache_clear()
        start = time.perf_counter()
        info = tsj.mask_info(masks, n, block_q=block, block_kv=block)
        times.append(time.perf_counter() - start)
    summary = _summary(info)
    if case in BAND_CASES:
        summary.pop("distinct_partial")
    return {"seconds": times, **summary}


# ---------------------------------------------------------------- parent


def run_child(side: str, case: str, reps: int, timeout: float) -> dict:
    command = [sys.executable, os.path.abspath(__file__), "--child", side, case, str(reps)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if done.returncode != 0:
        raise RuntimeError(f"{side} {case} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def describe(case: str) -> tuple[str, int, str]:
    if case in BAND_CASES:
        n, block = BAND_CASES[case]
        return "local band, 25%", n, str(block)
    if case in ROUTED_CASES:
        frames, height, width, block, heads = ROUTED_CASES[case]
        return (f"routed {heads}-head layer, Wan SVG + sink, 25% "
                f"({spatial_heads(heads)} spatial / {heads - spatial_heads(heads)} temporal)",
                frames * height * width, str(block))
    frames, height, width, block, heads = RUNNER_CASES[case]
    return ("VideoSplashAttention plans (spatial + temporal runs, sink segment)",
            frames * height * width, f"{block} (ragged)")


def seconds_text(result: dict) -> str:
    if "timeout" in result:
        return f"> {result['timeout']:.0f} s (stopped)"
    value = statistics.median(result["seconds"])
    return f"{value:.3g} s" if value >= 0.1 else f"{value * 1e3:.3g} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    every = list(BAND_CASES) + list(ROUTED_CASES) + list(RUNNER_CASES)
    parser.add_argument("--cases", default=",".join(every),
                        help=f"comma-separated, of {', '.join(every)} (default: all)")
    parser.add_argument("--reps", type=int, default=5, help="mask_info runs per case (median)")
    parser.add_argument("--timeout", type=float, default=1800.0,
                        help="seconds a process_mask child may run (default 1800)")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        side, case, reps = args.child
        print(json.dumps(child(side, case, int(reps))))
        return 0

    import jax
    import tilesplash

    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in every]
    if unknown:
        parser.error(f"--cases: unknown {', '.join(unknown)}; expected some of {', '.join(every)}")
    print(f"tilesplash {tilesplash.__version__}, JAX {jax.__version__}, Python "
          f"{sys.version.split()[0]}; each side in its own child process\n")
    print("| mask | tokens | block | Splash `process_mask` | `tilesplash.jax.mask_info` | "
          "speed-up | tiles full / partial (distinct) | same plan |")
    print("|---|---|---|---|---|---|---|---|")
    results = {}
    for case in cases:
        name, tokens, block = describe(case)
        ours = run_child("mask_info", case, args.reps, args.timeout)
        theirs = (run_child("process_mask", case, 1, args.timeout) if case not in RUNNER_CASES
                  else None)
        results[case] = {"mask_info": ours, "process_mask": theirs}
        tiles = (f"{ours['full']:,} / {ours['partial']:,}" if "full" in ours else
                 f"grid {ours['grid']}")
        if ours.get("distinct_partial") is not None:
            tiles += f" ({ours['distinct_partial']})"
        if theirs is None:
            row = ["-", seconds_text(ours), "-", tiles, "-"]
        elif "timeout" in theirs:
            low = theirs["timeout"] / statistics.median(ours["seconds"])
            row = [seconds_text(theirs), seconds_text(ours), f"> {low:,.0f}x", tiles, "not known"]
        else:
            ratio = statistics.median(theirs["seconds"]) / statistics.median(ours["seconds"])
            same = all(theirs.get(key) == ours.get(key)
                       for key in ("plan", "full", "partial", "distinct_partial", "grid"))
            row = [seconds_text(theirs), seconds_text(ours), f"{ratio:,.0f}x", tiles,
                   "yes" if same else "NO"]
        print(f"| {name} | {tokens:,} | {block} | " + " | ".join(row) + " |", flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
