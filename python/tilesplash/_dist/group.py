"""The process group of one distributed call: membership, waits bounded by
the timeout, errors that name the call, rank and step, and the thread's
reused exchange buffers. Private to tilesplash (distributed.py, the video
front door's group path, the diffusers sequence split)."""

from __future__ import annotations

import contextlib
import datetime
import threading

DEFAULT_TIMEOUT = 600.0
"""Seconds any one collective may wait for the other ranks (the `timeout` default)."""


def torch_modules():
    import torch
    import torch.distributed as dist

    return torch, dist


class Group:
    """The process group of one call, its rank, and waits bounded by the timeout."""

    def __init__(self, group, timeout, who: str):
        torch, dist = torch_modules()
        self.who = who
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
        if timeout is None:
            timeout = DEFAULT_TIMEOUT
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout: expected seconds > 0 (or a timedelta), got {timeout!r}")
        self.seconds = float(timeout)
        self.timeout = datetime.timedelta(seconds=self.seconds)
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
