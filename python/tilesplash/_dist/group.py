"""The process group of one distributed call: membership, waits bounded by
the timeout, errors that name the call, rank and step, and the thread's
reused exchange buffers. Private to tilesplash (distributed.py, the video
front door's group path, the diffusers sequence split)."""

from __future__ import annotations

import contextlib
import datetime
import math
import numbers
import threading

DEFAULT_TIMEOUT = 600.0
"""Seconds any one collective may wait for the other ranks (the `timeout` default)."""

MAX_TIMEOUT = 365 * 24 * 3600.0
"""The longest `timeout` in seconds (365 days): waits far past it are no wait
at all to c10d and gloo, whose clocks add the timeout in nanoseconds (2^63 ns
is 292 years) and overflow."""


def check_timeout(value, name: str = "timeout") -> datetime.timedelta | None:
    """A `timeout` argument as the wait c10d gets, rounded up to whole milliseconds.

    None (the default, DEFAULT_TIMEOUT), seconds (an int or float) or a
    datetime.timedelta, in (0, MAX_TIMEOUT]. c10d counts waits in whole
    milliseconds and reads 0 ms as "wait forever", so a positive timeout under
    a millisecond is one millisecond, never no timeout at all. Anything else is
    a TypeError or ValueError naming `name`, here, before any collective.
    """
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        # Exact: timedeltas count whole microseconds.
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        seconds = micros / 1e6
        millis = -(-micros // 1000)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        seconds = float(value)
        # Rounded to a nanosecond first, so that 1.1 s is 1100 ms, not 1101.
        millis = math.ceil(round(seconds * 1000.0, 6)) if math.isfinite(seconds) else 0
    else:
        raise TypeError(f"{name}: expected seconds (a number) or a datetime.timedelta, or None; "
                        f"got {type(value).__name__}")
    if not 0.0 < seconds <= MAX_TIMEOUT:
        raise ValueError(f"{name}: expected seconds in (0, {MAX_TIMEOUT:.0f}] (365 days; rounded "
                         f"up to whole milliseconds) or a timedelta of that length, or None; "
                         f"got {value!r}")
    return datetime.timedelta(milliseconds=max(millis, 1))


def torch_modules():
    import torch
    import torch.distributed as dist

    return torch, dist


class Group:
    """The process group of one call, its rank, and waits bounded by the timeout."""

    def __init__(self, group, timeout, who: str):
        torch, dist = torch_modules()
        self.who = who
        self.timeout = check_timeout(timeout) or datetime.timedelta(seconds=DEFAULT_TIMEOUT)
        self.seconds = self.timeout.total_seconds()
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                f"{who}: torch.distributed is not initialized; call "
                "torch.distributed.init_process_group('gloo', ...) first (torchrun sets up the "
                "environment it reads)"
            )
        self.group = group
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise ValueError(f"group: this process (global rank {dist.get_rank()}) is not a "
                             "member of the group")
        self.size = dist.get_world_size(group)
        self.device = collective_device(group)

    def global_rank(self, rank: int) -> int:
        _, dist = torch_modules()
        return rank if self.group is None else dist.get_global_rank(self.group, rank)

    @contextlib.contextmanager
    def errors(self, what: str):
        """Turns a timeout or a lost peer inside the block (issuing a collective or
        waiting for it) into a clear error naming this call, rank and step."""
        try:
            yield
        except RuntimeError as error:
            # A failed exchange may still hold the buffers; later calls get new ones.
            release_buffers()
            text = str(error)
            where = f"rank {self.rank} of {self.size}, {what}"
            if "timed out" in text.lower() or "timeout" in text.lower():
                raise TimeoutError(
                    f"{self.who}: {where}: no answer within {self.seconds:g} s; another rank "
                    f"failed, exited or did not call {self.who} (timeout= sets the limit)"
                ) from error
            raise RuntimeError(
                f"{self.who}: {where} failed ({text.strip()}); another rank probably failed "
                "or exited"
            ) from error

    def wait(self, works):
        for work in works if isinstance(works, (list, tuple)) else [works]:
            work.wait(timeout=self.timeout)

    def run(self, what: str, issue):
        """Issues collectives (issue() returns their work objects) and waits for them."""
        with self.errors(what):
            self.wait(issue())


def collective_device(group):
    """Where this group's small bookkeeping tensors (shapes, reports) live: NCCL
    moves CUDA tensors only (the current CUDA device), gloo and the others CPU ones."""
    torch, dist = torch_modules()
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


_buffers = threading.local()


def workspace(name: str, numel: int, dtype, device=None):
    """A grow-only buffer of this thread on `device` (default: the CPU), kept between
    calls: a model calls the exchange every layer with the same shapes, and fresh
    memory costs a page fault per 4 KiB on first touch (several times a copy,
    measured)."""
    torch, _ = torch_modules()
    device = torch.device("cpu") if device is None else torch.device(device)
    store = _buffers.__dict__.setdefault("store", {})
    buffer = store.get((name, dtype, device))
    if buffer is None or buffer.numel() < numel:
        store[(name, dtype, device)] = buffer = torch.empty(max(numel, 1), dtype=dtype,
                                                            device=device)
    return buffer[:numel]


def release_buffers() -> None:
    """Frees the send / receive buffers this thread keeps between calls."""
    _buffers.__dict__.pop("store", None)
