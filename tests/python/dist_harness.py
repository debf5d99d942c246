"""Runs a function on P local ranks (gloo over 127.0.0.1) and collects what each returned.

The ranks are processes forked from a multiprocessing forkserver that has
imported torch, tilesplash and the rank-side code (dist_cases) once, so a
launch costs milliseconds instead of one torch import per rank. Rendezvous
goes through a TCPStore that this process opens on port 0 (the kernel picks a
free port, no race), and gloo is held to the loopback interface. Every rank
process is stopped before run_ranks returns: joined, else terminated, else
killed.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import queue
import time
import traceback

# torch._dynamo: the first call of a torch custom op imports it (seconds); so
# does diffusers' Wan model, which diffusers imports lazily on first use. The
# forkserver pays that once instead of every rank of every launch (a module
# that cannot be imported is skipped).
_PRELOAD = ["torch", "torch.distributed", "torch._dynamo", "tilesplash", "tilesplash.distributed",
            "diffusers.models.transformers.transformer_wan",
            "dist_cases", "dist_video_cases", "dist_diffusers_cases", "dist_robust_cases",
            "dist_diffusers_cp_cases"]


def _context():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def _rank_main(target, rank, world, port, args, results, timeout_s):
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    status, value = "ok", None
    try:
        delta = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore("127.0.0.1", port, world, is_master=False, timeout=delta)
        dist.init_process_group("gloo", store=store, rank=rank, world_size=world, timeout=delta)
        value = target(rank, world, *args)
    except BaseException as error:  # reported to the test, never swallowed
        status, value = "error", f"{type(error).__name__}: {error}\n{traceback.format_exc()}"
    results.put((rank, status, value))
    results.close()
    results.join_thread()
    # No destroy_process_group / atexit: with a peer gone they can block, and the
    # test has its answer; the OS closes the sockets.
    os._exit(0)


def run_ranks(world: int, target, *args, timeout: float = 120.0):
    """target(rank, world, *args) on `world` ranks; a list of (status, value) by rank.

    status is "ok" (value: what target returned), "error" (value: the
    exception's type, message and traceback) or "missing" (no answer within
    `timeout` seconds: the rank hung or died).
    """
    from torch.distributed import TCPStore

    store = TCPStore("127.0.0.1", 0, world + 1, is_master=True, wait_for_workers=False,
                     timeout=datetime.timedelta(seconds=timeout))
    ctx = _context()
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_rank_main, args=(target, r, world, store.port, args, results, timeout),
                    daemon=True)
        for r in range(world)
    ]
    collected = {}
    try:
        for p in procs:
            p.start()
        deadline = time.monotonic() + timeout
        while len(collected) < world and time.monotonic() < deadline:
            try:
                rank, status, value = results.get(timeout=1.0)
                collected[rank] = (status, value)
            except queue.Empty:
                if not any(p.is_alive() for p in procs):
                    # Dead ranks flushed their answer before exiting; one more look.
                    try:
                        while True:
                            rank, status, value = results.get(timeout=1.0)
                            collected[rank] = (status, value)
                    except queue.Empty:
                        break
        return [
            collected.get(r, ("missing", f"rank {r}: no answer within {timeout} s "
                                         f"(exit code {procs[r].exitcode})"))
            for r in range(world)
        ]
    finally:
        for p in procs:
            p.join(timeout=5)
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)
        for p in procs:
            if p.is_alive():
                p.kill()
                p.join()
        results.close()
        results.join_thread()
        del store


def values(results):
    """The values of a run in which every rank must have succeeded."""
    problems = [f"rank {r}: {status}: {value}" for r, (status, value) in enumerate(results)
                if status != "ok"]
    assert not problems, "\n".join(problems)
    return [value for _, value in results]
