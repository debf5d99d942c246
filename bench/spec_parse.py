#!/usr/bin/env python3
"""Mask SPEC parsing time against the number of terms: linear up to 200k terms.

Parses SPECs of n terms, n doubling from 1/32 of --max-terms (200,000 by
default) up to it, in four shapes: an OR chain of distinct terms
("causal:offset=-i|..."), an AND chain, an OR of two-term ANDs, and ORs of
16 terms in brackets ORed together (flattened into one OR); and
Mask.any_of over n masks. For each: the median seconds of --rounds runs,
microseconds per term, and the per-term time at n over the per-term time
at the smallest n. A linear parser keeps that ratio near 1 (it drifts up a
little as the data leaves the caches); the parser that folded terms
pairwise (a | b, then | c, ...) doubled it with every doubling of n (issue
21 measured 0.2 s at 8k terms, 4.7 s at 32k, minutes at 200k). Last, a SPEC
one term past the limit (2^20 terms) is timed to its refusal. Timed: the
parser itself (tilesplash._core.Mask.parse) and Mask.parse, which adds the
canonical str() the Python Mask keeps (its cache cleared before each run).

Usage (a quiet machine; one thread is used):

    PYTHONPATH=build/python .venv/bin/python bench/spec_parse.py
    PYTHONPATH=build/python .venv/bin/python bench/spec_parse.py --rounds 7 --max-terms 400000
"""

from __future__ import annotations

import argparse
import statistics
import time

import tilesplash
from tilesplash import Mask, _core, _mask

LIMIT = 2**20  # kMaxMaskTerms (include/tilesplash/mask.h)


def or_chain(n):
    return "|".join(f"causal:offset={-i}" for i in range(n))


def and_chain(n):
    return "&".join(f"causal:offset={i}" for i in range(n))


def or_of_ands(n):
    return "|".join(f"causal:offset={-i}&local:left={i}" for i in range(n // 2))


def bracketed_ors(n):
    groups = ("(" + "|".join(f"causal:offset={-g * 16 - j}" for j in range(16)) + ")"
              for g in range(n // 16))
    return "|".join(groups)


SHAPES = {"or chain": or_chain, "and chain": and_chain, "or of ands": or_of_ands,
          "bracketed ors": bracketed_ors}


def median_seconds(run, rounds):
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def mask_parse(spec):
    _mask._parse.cache_clear()
    return Mask.parse(spec)


def sizes(max_terms):
    """max_terms halved five times: below a few thousand terms a parse takes
    well under a millisecond and the timer's noise would swamp the ratio."""
    return sorted(max_terms >> i for i in range(6) if max_terms >> i >= 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--max-terms", type=int, default=200_000,
                        help="the largest SPEC's terms, at least 512 (the smallest of the six "
                             "sizes, 1/32 of it, must hold one bracketed group of 16)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    if args.max_terms < 512:
        parser.error("--max-terms must be >= 512")
    print(f"tilesplash {tilesplash.__version__}, {args.rounds} rounds, median seconds")
    print(f"{'shape':<14} {'what':<11} {'terms':>8} {'seconds':>9} {'us/term':>8} {'ratio':>6}")
    for shape, make in SHAPES.items():
        for what, run in (("parser", _core.Mask.parse), ("Mask.parse", mask_parse)):
            first = None
            for n in sizes(args.max_terms):
                spec = make(n)
                seconds = median_seconds(lambda: run(spec), args.rounds)
                per_term = seconds / n
                first = first or per_term
                print(f"{shape:<14} {what:<11} {n:>8} {seconds:>9.4f} {1e6 * per_term:>8.3f} "
                      f"{per_term / first:>6.2f}")
    first = None
    for n in sizes(args.max_terms):
        masks = [Mask.causal(-i) for i in range(n)]
        seconds = median_seconds(lambda: Mask.any_of(masks), args.rounds)
        first = first or seconds / n
        print(f"{'any_of':<14} {'Mask':<11} {n:>8} {seconds:>9.4f} {1e6 * seconds / n:>8.3f} "
              f"{seconds / n / first:>6.2f}")
    spec = "|".join(["dense"] * (LIMIT + 1))
    start = time.perf_counter()
    try:
        _core.Mask.parse(spec)
        outcome = "accepted (expected a refusal)"
    except ValueError as error:
        outcome = str(error)[:60]
    print(f"{LIMIT + 1} terms: {time.perf_counter() - start:.3f} s to: {outcome}")


if __name__ == "__main__":
    main()
