"""Every int and float argument of the public Python API at the ends of its range.

ARGUMENTS lists each (function, argument, range) once; docs/python.md's
"Argument ranges" table lists the same, and test_the_docs_table_matches
keeps the two equal. For every end of every range the call is made at the
end, just inside it and just outside it (integers: the next value, or the
next multiple for block_kv; floats: the next float, math.nextafter):
inside the range the call must complete, outside it must raise ValueError
naming the argument, at once, not somewhere later. NaN is refused for every
float.

Each call is tiny (8 tokens, one or two heads), so the whole table runs in
seconds.
"""

from __future__ import annotations

import math
import pathlib
import re
import sys
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import pytest

import tilesplash
import tilesplash.distributed
from tilesplash import Mask, VideoAttention, VideoGeometry

I64 = 2**63 - 1
U64 = 2**64 - 1
I32 = 2**31 - 1
FMAX = sys.float_info.max
MAX_SCALE = 2.3586574359122396e38
MIN_SCALE = 2.0**-150
THREADS = tilesplash._core.MAX_THREADS
MAX_TIMEOUT = tilesplash.distributed.MAX_TIMEOUT  # 365 days

G = VideoGeometry(2, 2, 2)  # 8 tokens


def qkv(n=8, heads=1, layout="bhnd", seed=0):
    rng = np.random.default_rng(seed)
    shape = (1, heads, n, 8) if layout == "bhnd" else (1, n, heads, 8)
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(3)]


Q, K, V = qkv()
QV, KV, VV = qkv(G.tokens, 2, "bnhd")


def attention(**kwargs):
    return tilesplash.attention(Q, K, V, **kwargs)


def video(**kwargs):
    call = kwargs.pop("call", {})
    layer = VideoAttention(G, **kwargs)
    return layer(QV, KV, VV, **call)


def band_or_density(make, band, density):
    """One of the two given: the other defaults so that a None probe is a valid call."""
    if band is None and density is None:
        band = 2
    return make(G, band, density=density)


def head_mask(head):
    layer = VideoAttention(G, method="svg2", density=0.5)
    layer(QV, KV, VV)
    return layer.head_mask(head)


POINTS = np.random.default_rng(1).standard_normal((6, 4)).astype(np.float32)


def cache_capacity(value):
    try:
        tilesplash.set_plan_cache_capacity(value)
    finally:
        tilesplash.set_plan_cache_capacity(64)


@dataclass(frozen=True)
class Arg:
    where: str  # the function, as docs/python.md names it
    name: str
    kind: str  # "int" or "float"
    low: Any
    high: Any
    call: Callable[[Any], Any]
    low_open: bool = False  # floats only: the end itself is outside
    high_open: bool = False
    step: int = 1  # ints: the distance to the next valid value
    none: bool = False  # None is accepted (the default)
    test_high: bool = True  # False: only just past the top is run (see note)
    note: str = ""
    doc: str = ""  # the range in general, where this row's ends depend on the call

    def range_text(self) -> str:
        """The range as docs/python.md writes it."""
        if self.doc:
            return self.doc
        def shown(x):
            if self.kind == "float":
                return {FMAX: "max float", MAX_SCALE: "2.3586574e38", MIN_SCALE: "2^-150",
                        MAX_TIMEOUT: "31536000"}.get(x, f"{x:g}")
            return {I64: "2^63 - 1", U64: "2^64 - 1", I32: "2^31 - 1", -I64 - 1: "-2^63",
                    2**40 - 1: "2^40 - 1", 2**27: "2^27", 2**30: "2^30"}.get(x, str(x))
        text = (f"{'(' if self.low_open else '['}{shown(self.low)}, {shown(self.high)}"
                f"{')' if self.high_open else ']'}")
        if self.step > 1:
            text += f", multiple of {self.step}"
        return text + (" or None" if self.none else "")


ARGUMENTS = [
    # tilesplash.attention (q, k, v of 8 tokens)
    Arg("attention", "scale", "float", MIN_SCALE, MAX_SCALE, lambda x: attention(scale=x),
        low_open=True, none=True),
    Arg("attention", "block_q", "int", 1, 4096, lambda x: attention(block_q=x), none=True),
    Arg("attention", "block_kv", "int", 64, 1024, lambda x: attention(block_kv=x), step=64,
        none=True),
    Arg("attention", "threads", "int", 0, THREADS, lambda x: attention(threads=x)),
    Arg("attention", "q_offset", "int", 0, I64 - 8, lambda x: attention(q_offset=x),
        doc="[0, 2^63 - 1 - N_q]"),
    Arg("attention", "kv_offset", "int", 0, I64 - 8, lambda x: attention(kv_offset=x),
        doc="[0, 2^63 - 1 - N_kv]"),
    Arg("attention", "q_total", "int", 8, I64, lambda x: attention(q_total=x), none=True,
        doc="[q_offset + N_q, 2^63 - 1] or None"),
    Arg("attention", "kv_total", "int", 8, I64, lambda x: attention(kv_total=x), none=True,
        doc="[kv_offset + N_kv, 2^63 - 1] or None"),
    # tilesplash.plan
    Arg("plan", "q_len", "int", 1, I64, lambda x: tilesplash.plan("causal", x, 8),
        test_high=False, note="a plan indexes at most 2^32 blocks a side, memory permitting"),
    Arg("plan", "kv_len", "int", 1, I64, lambda x: tilesplash.plan("causal", 8, x), none=True,
        test_high=False, note="likewise"),
    Arg("plan", "block_q", "int", 1, 2**27, lambda x: tilesplash.plan("causal", 1, 1, x, 64),
        test_high=False,
        note="block_q * ceil(block_kv / 64) <= 2^27 (a 1 GiB tile bitmask); the top is tested "
             "just outside (at it a plan allocates 1 GiB)"),
    Arg("plan", "block_kv", "int", 1, 2**30, lambda x: tilesplash.plan("causal", 1, 1, 1, x),
        test_high=False, note="likewise, and block_kv <= 2^30"),
    Arg("set_plan_cache_capacity", "capacity", "int", 0, I64, cache_capacity),
    # tilesplash.Mask
    Arg("Mask.causal", "offset", "int", -I64 - 1, I64, lambda x: Mask.causal(x)),
    Arg("Mask.local", "left", "int", 0, I64, lambda x: Mask.local(x, 2), none=True),
    Arg("Mask.local", "right", "int", 0, I64, lambda x: Mask.local(2, x), none=True),
    Arg("Mask.local", "offset", "int", -I64 - 1, I64, lambda x: Mask.local(2, 2, x)),
    Arg("Mask.chunked", "size", "int", 1, I64, lambda x: Mask.chunked(x)),
    Arg("Mask.random", "density", "float", 0.0, 1.0, lambda x: Mask.random(x)),
    Arg("Mask.random", "seed", "int", 0, U64, lambda x: Mask.random(0.5, x)),
    Arg("Mask.spatial", "band", "int", 0, I64, lambda x: band_or_density(Mask.spatial, x, None),
        none=True, note="exactly one of band and density"),
    Arg("Mask.spatial", "density", "float", 0.0, 1.0,
        lambda x: band_or_density(Mask.spatial, None, x), low_open=True, none=True,
        note="likewise"),
    Arg("Mask.temporal", "band", "int", 0, I64,
        lambda x: band_or_density(Mask.temporal, x, None), none=True, note="likewise"),
    Arg("Mask.temporal", "density", "float", 0.0, 1.0,
        lambda x: band_or_density(Mask.temporal, None, x), low_open=True, none=True,
        note="likewise"),
    Arg("Mask.radial", "decay", "float", 0.0, FMAX,
        lambda x: Mask.radial(G, x, density=0.5 if x is None else None), none=True,
        note="exactly one of decay and density"),
    Arg("Mask.radial", "density", "float", 0.0, 1.0,
        lambda x: Mask.radial(G, 0.2 if x is None else None, density=x), low_open=True,
        none=True, note="likewise"),
    Arg("Mask.radial", "block", "int", 1, 2**40 - 1, lambda x: Mask.radial(G, 0.2, block=x)),
    Arg("Mask.sta", "window", "int", 1, I32, lambda x: Mask.sta(G, window=(x, 1, 1)),
        note="each of (t, h, w)"),
    Arg("Mask.sta", "tile", "int", 1, I32, lambda x: Mask.sta(G, tile=(1, x, 1)),
        note="each of (t, h, w)"),
    Arg("Mask.keeps", "q", "int", -I64 - 1, I64, lambda x: Mask.causal().keeps(x, 0)),
    Arg("Mask.keeps", "k", "int", -I64 - 1, I64, lambda x: Mask.causal().keeps(0, x)),
    Arg("Mask.classify", "rows", "int", 0, I64, lambda x: Mask.causal().classify((0, x), (0, 1)),
        doc="(begin, end), 0 <= begin <= end <= 2^63 - 1"),
    Arg("Mask.classify", "cols", "int", 0, I64, lambda x: Mask.causal().classify((0, 1), (x, x)),
        doc="(begin, end), 0 <= begin <= end <= 2^63 - 1"),
    # tilesplash.VideoGeometry
    Arg("VideoGeometry", "frames", "int", 1, I32, lambda x: VideoGeometry(x, 1, 1),
        note="frames * height * width + text < 2^40"),
    Arg("VideoGeometry", "height", "int", 1, I32, lambda x: VideoGeometry(1, x, 1)),
    Arg("VideoGeometry", "width", "int", 1, I32, lambda x: VideoGeometry(1, 1, x)),
    Arg("VideoGeometry", "text", "int", 0, I32,
        lambda x: VideoGeometry(1, 1, 1, text=x, text_at="after" if x else "none")),
    # tilesplash.VideoAttention (constructed and called once)
    Arg("VideoAttention", "density", "float", 0.0, 1.0, lambda x: video(density=x),
        low_open=True),
    Arg("VideoAttention", "band", "int", 0, I64, lambda x: video(band=x), none=True),
    Arg("VideoAttention", "density_budget", "float", 0.0, 1.0,
        lambda x: video(method="mix", density_budget=x), low_open=True, none=True),
    Arg("VideoAttention", "dense_layers", "int", 0, I64, lambda x: video(dense_layers=x)),
    Arg("VideoAttention", "dense_steps", "int", 0, I64, lambda x: video(dense_steps=x)),
    Arg("VideoAttention", "samples", "int", 0, I64, lambda x: video(samples=x)),
    Arg("VideoAttention", "seed", "int", 0, U64, lambda x: video(seed=x)),
    Arg("VideoAttention", "threads", "int", 0, THREADS, lambda x: video(threads=x)),
    Arg("VideoAttention", "block_q", "int", 1, 4096, lambda x: video(block_q=x), none=True),
    Arg("VideoAttention", "block_kv", "int", 64, 1024, lambda x: video(block_kv=x), step=64,
        none=True),
    Arg("VideoAttention", "scale", "float", MIN_SCALE, MAX_SCALE, lambda x: video(scale=x),
        low_open=True, none=True),
    Arg("VideoAttention", "timeout", "float", 0.0, MAX_TIMEOUT, lambda x: video(timeout=x),
        low_open=True, none=True,
        note="seconds or a timedelta, rounded up to whole milliseconds; checked with or without "
             "group"),
    Arg("VideoAttention.__call__", "layer", "int", 0, I64, lambda x: video(call={"layer": x})),
    Arg("VideoAttention.__call__", "step", "int", 0, I64, lambda x: video(call={"step": x})),
    Arg("VideoAttention.head_mask", "head", "int", 0, 1, head_mask,
        doc="[0, heads - 1]", note="a head of the last call (2 here)"),
    # tilesplash.kmeans (6 points)
    Arg("kmeans", "clusters", "int", 1, 6, lambda x: tilesplash.kmeans(POINTS, x),
        doc="[1, points]", note="6 points here"),
    Arg("kmeans", "seed", "int", 0, U64, lambda x: tilesplash.kmeans(POINTS, 2, seed=x)),
    Arg("kmeans", "max_iterations", "int", 1, I32,
        lambda x: tilesplash.kmeans(POINTS, 2, max_iterations=x)),
    Arg("kmeans", "tolerance", "float", 0.0, FMAX,
        lambda x: tilesplash.kmeans(POINTS, 2, tolerance=x)),
    Arg("kmeans", "threads", "int", 0, THREADS, lambda x: tilesplash.kmeans(POINTS, 2, threads=x)),
    # tilesplash.ThreadingContext
    Arg("ThreadingContext", "threads", "int", 0, THREADS, lambda x: tilesplash.ThreadingContext(x)),
    Arg("ThreadingContext", "first_cpu", "int", 0, I32,
        lambda x: tilesplash.ThreadingContext(1, pin=True, first_cpu=x)),
]


def _diffusers_rows():
    def enable(**options):
        from tilesplash.diffusers import enable as enable_fn

        handle = enable_fn(_tiny_wan(), **options)
        handle.remove()

    def set_step(step):
        from tilesplash.diffusers import enable as enable_fn

        handle = enable_fn(_tiny_wan())
        try:
            handle.set_step(step)
        finally:
            handle.remove()

    return [
        Arg("diffusers.enable", "density", "float", 0.0, 1.0, lambda x: enable(density=x),
            low_open=True),
        Arg("diffusers.enable", "density_budget", "float", 0.0, 1.0,
            lambda x: enable(density_budget=x), low_open=True, none=True),
        Arg("diffusers.enable", "dense_layers", "int", 0, I64, lambda x: enable(dense_layers=x)),
        Arg("diffusers.enable", "dense_steps", "int", 0, I64, lambda x: enable(dense_steps=x)),
        Arg("diffusers.enable", "samples", "int", 0, I64, lambda x: enable(samples=x)),
        Arg("diffusers.enable", "threads", "int", 0, THREADS, lambda x: enable(threads=x)),
        Arg("diffusers.enable", "timeout", "float", 0.0, MAX_TIMEOUT, lambda x: enable(timeout=x),
            low_open=True, none=True,
            note="seconds (365 days at most) or a timedelta, rounded up to whole milliseconds; "
                 "checked with or without process_group"),
        Arg("TilesplashHandle.set_step", "step", "int", 0, I64, set_step),
    ]


def waited(call, **kwargs):
    """call(**kwargs), where a TimeoutError means the timeout was taken and ran out:
    one millisecond (the shortest wait) can pass before even a one-rank gloo
    all_gather completes on a loaded machine."""
    try:
        call(**kwargs)
    except TimeoutError:
        pass


def _distributed_rows():
    def ulysses(**kwargs):
        from tilesplash import distributed

        torch = pytest.importorskip("torch")
        x = torch.ones(1, 8, 1, 8)
        return distributed.ulysses_attention(x, x, x, **kwargs)

    def ring(**kwargs):
        from tilesplash import distributed

        torch = pytest.importorskip("torch")
        x = torch.ones(1, 8, 1, 8)
        return distributed.ring_attention(x, x, x, **kwargs)

    def exchange(**kwargs):
        from tilesplash import distributed

        return distributed.ulysses_exchange(**{"local_len": 8, "heads": 2, **kwargs})

    def head_range(heads=4, rank=0, world=2):
        from tilesplash import distributed

        return distributed.head_range(heads, rank, world)

    rows = []
    for where, call in (("distributed.ulysses_attention", ulysses),
                        ("distributed.ring_attention", ring)):
        rows += [
            Arg(where, "scale", "float", MIN_SCALE, MAX_SCALE, lambda x, c=call: c(scale=x),
                low_open=True, none=True),
            Arg(where, "threads", "int", 0, THREADS, lambda x, c=call: c(threads=x)),
            Arg(where, "timeout", "float", 0.0, MAX_TIMEOUT,
                lambda x, c=call: waited(c, timeout=x),
                low_open=True, none=True,
                note="seconds or a timedelta, rounded up to whole milliseconds"),
        ]
    rows += [
        Arg("distributed.ulysses_exchange", "local_len", "int", 0, I64,
            lambda x: exchange(local_len=x)),
        Arg("distributed.ulysses_exchange", "heads", "int", 1, I64, lambda x: exchange(heads=x)),
        Arg("distributed.ulysses_exchange", "timeout", "float", 0.0, MAX_TIMEOUT,
            lambda x: waited(exchange, timeout=x), low_open=True, none=True,
            note="seconds or a timedelta, rounded up to whole milliseconds"),
        Arg("distributed.head_range", "heads", "int", 0, I64, lambda x: head_range(heads=x)),
        Arg("distributed.head_range", "rank", "int", 0, 1, lambda x: head_range(rank=x),
            doc="[0, world - 1]", note="world = 2 here"),
        Arg("distributed.head_range", "world", "int", 1, I64, lambda x: head_range(world=x)),
    ]
    return rows


_WAN = []


def _tiny_wan():
    if not _WAN:
        pytest.importorskip("diffusers")
        from diffusers_tiny import tiny_wan

        _WAN.append(tiny_wan())
    return _WAN[0]


ALL_ARGUMENTS = ARGUMENTS + _diffusers_rows() + _distributed_rows()


@pytest.fixture(scope="module")
def one_rank_group():
    """A one-process gloo group for the distributed rows, gone after this module."""
    torch = pytest.importorskip("torch")
    dist = torch.distributed
    if dist.is_initialized():
        yield
        return
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def probes(arg: Arg):
    """(value, accepted) at, just inside and just outside each end."""
    out = []
    for end, is_open, outward in ((arg.low, arg.low_open, -1), (arg.high, arg.high_open, +1)):
        if arg.kind == "int":
            if outward < 0 or arg.test_high:
                out += [(end, True), (end - outward * arg.step, True)]
            out.append((end + outward * arg.step, False))
        else:
            toward, away = (-math.inf, math.inf) if outward > 0 else (math.inf, -math.inf)
            if math.isinf(end):
                out.append((end, False))  # an open infinite end: inf itself is refused
                continue
            out += [(end, not is_open), (math.nextafter(end, toward), True)]
            out.append((math.nextafter(end, away), False))
    if arg.kind == "float":
        out.append((math.nan, False))
    if arg.none:
        out.append((None, True))
    return out


def case_id(arg):
    return f"{arg.where}-{arg.name}"


@pytest.mark.parametrize("arg", ALL_ARGUMENTS, ids=case_id)
def test_ends_of_the_range(arg, request):
    if arg.where.startswith("distributed."):
        request.getfixturevalue("one_rank_group")
    for value, accepted in probes(arg):
        if accepted:
            try:
                arg.call(value)
            except Exception as error:  # pragma: no cover - the failure message
                pytest.fail(f"{arg.where}({arg.name}={value!r}) is inside {arg.range_text()} "
                            f"but raised {type(error).__name__}: {error}")
        else:
            with pytest.raises(ValueError) as caught:
                arg.call(value)
            assert re.search(rf"\b{re.escape(arg.name)}\b", str(caught.value)), (
                f"{arg.where}({arg.name}={value!r}): the message does not name {arg.name}: "
                f"{caught.value}")


def docs_table():
    """{(function, argument): range} from docs/python.md's "Argument ranges" table."""
    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    section = text.split("## Argument ranges", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[0].startswith("`"):
            rows[(cells[0].strip("`"), cells[1].strip("`"))] = cells[2].replace("`", "")
    return rows


def test_the_docs_table_matches():
    documented = docs_table()
    listed = {(a.where, a.name): a.range_text() for a in ALL_ARGUMENTS}
    assert documented == listed
