"""Rank-side code of the tests of ranks that disagree and of peers that stop.

disagreements(): one rank (the last) builds or calls with one thing
different: every rank must raise a ValueError naming it, before any data
moves; a rank that differs only in what may differ (threads, timeout, a mask
given as a string or as a Mask) must not. One launch runs every case in turn:
a disagreement raises on every rank at the same point, so the group is in
step for the next case.

stopped_peer(): rank 1 stops itself (SIGSTOP) and rank 0 calls every entry
point with a timeout under a millisecond (and one of a fifth of a second),
each on its own process group (a timed-out gloo group is not reused): each
must raise TimeoutError within a few seconds instead of waiting for ever.
Rank 0 wakes rank 1 (SIGCONT) at the end, whatever happened.
"""

from __future__ import annotations

import datetime
import os
import signal
import time

import numpy as np
import torch

import tilesplash
import tilesplash.diffusers as tsd
from diffusers_tiny import run_wan, tiny_wan, wan_inputs
from tilesplash import distributed

N, HEADS, DIM = 64, 2, 16


def _shard(x, rank, world):
    return torch.tensor_split(x, world, dim=1)[rank]


def _qkv(rank, world, seed=0):
    gen = torch.Generator().manual_seed(seed)
    return [_shard(torch.randn(1, N, HEADS, DIM, generator=gen), rank, world) for _ in range(3)]


def _distributed(scheme, odd, **changed):
    """ulysses_attention / ring_attention; the odd rank passes `changed` on top."""
    def call(rank, world):
        fn = getattr(distributed, f"{scheme}_attention")
        kwargs = dict(mask="causal", threads=1, timeout=60)
        if odd:
            kwargs.update(changed)
        return fn(*_qkv(rank, world), **kwargs)
    return call


GEOMETRY = (4, 4, 4)  # 64 video tokens


def _video(odd, changed, calls=((0, 0),), between=None, call_changed=None, base=None):
    """VideoAttention(group=) with `base` on top of the defaults; the odd rank
    builds with `changed` on top (a "geometry" entry: its (frames, height,
    width)), or calls with `call_changed`; between calls every rank runs
    between(its object, odd)."""
    def call(rank, world):
        import torch.distributed as dist

        kwargs = {**dict(method="svg", density=0.25, samples=8, threads=1, timeout=60),
                  **(base or {})}
        if odd:
            kwargs.update(changed)
        geometry = tilesplash.VideoGeometry(*kwargs.pop("geometry", GEOMETRY))
        layer_attention = tilesplash.VideoAttention(geometry, group=dist.group.WORLD, **kwargs)
        q, k, v = _qkv(rank, world)
        for i, (layer, step) in enumerate(calls):
            if i and between is not None:
                between(layer_attention, odd)
            extra = call_changed if (odd and call_changed) else {}
            layer_attention(q, k, v, **{"layer": layer, "step": step, **extra})
    return call


def _configured(odd, **settings):
    """_video's call with the odd rank's flex backend configured with `settings`
    (tilesplash.flex.configure, process-wide: restored after the call)."""
    def call(rank, world):
        import tilesplash.flex

        with tilesplash.flex.configure(**(settings if odd else {})):
            _video(False, {})(rank, world)
    return call


def _diffusers(odd, changed=None, model_seed=0, input_seed=1):
    """enable(process_group=) on a one-layer tiny Wan; the odd rank enables with
    `changed`, or holds other weights or inputs."""
    def call(rank, world):
        import torch.distributed as dist

        model = tiny_wan(seed=model_seed if odd else 0, layers=1)
        kwargs = dict(density=0.25, threads=1, timeout=60)
        if odd and changed:
            kwargs.update(changed)
        handle = tsd.enable(model, process_group=dist.group.WORLD, **kwargs)
        try:
            hidden, text = wan_inputs(seed=input_seed if odd else 1)
            run_wan(model, hidden, text)
        finally:
            handle.remove()
    return call


# name: (make(odd) -> call(rank, world), the field the error must name; None: no error)
DISAGREEMENTS = {
    "ulysses return_lse": (lambda odd: _distributed("ulysses", odd, return_lse=True),
                           "return_lse"),
    "ring return_lse": (lambda odd: _distributed("ring", odd, return_lse=True), "return_lse"),
    "ulysses scale": (lambda odd: _distributed("ulysses", odd, scale=0.5), "scale"),
    "ring mask": (lambda odd: _distributed("ring", odd, mask="causal:offset=1"), "mask"),
    # An argument added after the agreement was written is compared all the same.
    "ring backend": (lambda odd: _distributed("ring", odd, backend="flex"), "backend"),
    "ulysses same call": (lambda odd: _distributed(
        "ulysses", odd, mask=tilesplash.Mask.causal(), threads=2, timeout=30), None),
    "video density": (lambda odd: _video(odd, dict(density=0.3)), "VideoAttention.density"),
    "video method": (lambda odd: _video(odd, dict(method="mix")), "VideoAttention.method"),
    "video seed": (lambda odd: _video(odd, dict(seed=1)), "VideoAttention.seed"),
    "video geometry": (lambda odd: _video(odd, dict(geometry=(2, 8, 4))),
                       "VideoAttention.geometry"),
    "video band": (lambda odd: _video(odd, dict(band=9)), "VideoAttention.band"),
    "video sink": (lambda odd: _video(odd, dict(sink=True)), "VideoAttention.sink"),
    "video samples": (lambda odd: _video(odd, dict(samples=9)), "VideoAttention.samples"),
    "video dense_steps": (lambda odd: _video(odd, dict(dense_steps=1)),
                          "VideoAttention.dense_steps"),
    "video force": (lambda odd: _video(odd, dict(force="spatial")), "VideoAttention.force"),
    "video block_kv": (lambda odd: _video(odd, dict(block_kv=64)), "VideoAttention.block_kv"),
    "video scale": (lambda odd: _video(odd, dict(scale=0.2)), "VideoAttention.scale"),
    "video layer": (lambda odd: _video(odd, {}, call_changed=dict(layer=1)), "layer"),
    "video return_lse": (lambda odd: _video(odd, {}, call_changed=dict(return_lse=True)),
                         "return_lse"),
    "video svg2 reset": (lambda odd: _video(
        odd, {}, base=dict(method="svg2"), calls=((0, 0), (0, 1)),
        between=lambda a, odd: a.reset_clusters() if odd else None),
        "calls since reset_clusters()"),
    # Every rank resets before the same call (the odd one twice): the same clusters.
    "video svg2 reset everywhere": (lambda odd: _video(
        odd, {}, base=dict(method="svg2"), calls=((0, 0), (0, 1)),
        between=lambda a, odd: [a.reset_clusters() for _ in range(1 + odd)]), None),
    "video flex strategy": (lambda odd: _configured(odd, strategy="per_head"),
                            "tilesplash.flex.configure strategy"),
    "video same": (lambda odd: _video(odd, dict(threads=2, timeout=30)), None),
    # The same ladder as a list and as a NumPy array is the same configuration.
    "video ladder as an array": (lambda odd: _video(
        odd, dict(error=np.float64(0.3), densities=np.array([0.1, 0.3])),
        base=dict(error=0.3, densities=[0.1, 0.3])), None),
    "diffusers density": (lambda odd: _diffusers(odd, dict(density=0.3)), "enable.density"),
    "diffusers inputs": (lambda odd: _diffusers(odd, input_seed=2), "input hidden_states"),
    "diffusers weights": (lambda odd: _diffusers(odd, model_seed=1), "model weights"),
    "diffusers same": (lambda odd: _diffusers(odd, dict(threads=2, timeout=30)), None),
}


def disagreements(rank, world, names):
    """{name: (error type or None, message)} of every case, the last rank the odd one."""
    results = {}
    for name in names:
        call = DISAGREEMENTS[name][0](rank == world - 1)
        try:
            call(rank, world)
            results[name] = (None, "no error")
        except Exception as error:
            results[name] = (type(error).__name__, str(error))
    return results


def _prepare_stop_case(name, group, timeout):
    """A call over `group` with `timeout` that needs the stopped peer, with what it
    needs built first (a model, an object), so that only the call is timed."""
    if name in ("ulysses", "ring"):
        fn = getattr(distributed, f"{name}_attention")
        q, k, v = _qkv(0, 2)
        return lambda: fn(q, k, v, group=group, threads=1, timeout=timeout), None
    if name == "video":
        layer_attention = tilesplash.VideoAttention(tilesplash.VideoGeometry(*GEOMETRY),
                                                    samples=8, threads=1, group=group,
                                                    timeout=timeout)
        q, k, v = _qkv(0, 2)
        return lambda: layer_attention(q, k, v), None
    model = tiny_wan(layers=1)
    hidden, text = wan_inputs()
    handle = tsd.enable(model, threads=1, process_group=group, timeout=timeout)
    return lambda: run_wan(model, hidden, text), handle.remove


# (entry point, timeout): sub-millisecond timeouts as seconds and as a timedelta,
# and one of 0.2 s, which must be waited out before the error.
STOPPED_CASES = [("ulysses", 1e-4), ("ring", datetime.timedelta(microseconds=100)),
                 ("video", 1e-4), ("diffusers", 1e-4), ("ulysses", 0.2)]


def stopped_peer(rank, world, cases):
    """Rank 1 stops; rank 0 runs each case on its own group: [(case, error type,
    message, seconds)]. Rank 1 returns "woken" once rank 0 has woken it."""
    import torch.distributed as dist

    groups = [dist.new_group([0, 1]) for _ in cases]  # every rank creates every group
    pids = [None, None]
    dist.all_gather_object(pids, os.getpid())
    if rank == 1:
        os.kill(os.getpid(), signal.SIGSTOP)
        return "woken"
    try:
        _wait_until_stopped(pids[1])
        out = []
        for (name, timeout), group in zip(cases, groups):
            call, cleanup = _prepare_stop_case(name, group, timeout)
            start = time.monotonic()
            try:
                call()
                out.append((name, None, "no error", time.monotonic() - start))
            except Exception as error:
                out.append((name, type(error).__name__, str(error), time.monotonic() - start))
            finally:
                if cleanup is not None:
                    cleanup()
        return out
    finally:
        os.kill(pids[1], signal.SIGCONT)


def _wait_until_stopped(pid, limit=10.0):
    """Until /proc says the process is stopped (state T), at most `limit` seconds."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in ("T", "t"):
                    return
        except OSError:
            return  # no /proc: go on, the peer does not call either way
        time.sleep(0.01)
    raise RuntimeError(f"rank 1 (pid {pid}) did not stop within {limit} s")
