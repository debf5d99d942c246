"""tilesplash.ThreadingContext: the worker threads a call runs on, owned by the caller."""

from __future__ import annotations

import itertools
import weakref

from . import _core
from ._checks import INT32_MAX, MAX_THREADS, check_bool, check_int


class ThreadingContext:
    """A pool of worker threads that tilesplash calls run on.

    threads: threads of a call that asks for 0 (the calling thread included);
    0 means every CPU this process may use (tilesplash.hardware_threads()).
    pin: pin worker w (1, 2, ...) to the allowed CPU at index first_cpu + w
    (modulo their count); the calling thread is not pinned. Workers start on
    the first call that needs them.

    Give one to tilesplash.attention(..., context=ctx) or
    tilesplash.VideoAttention(..., context=ctx): each Python thread (rank,
    diffusers processor) that owns its own context runs at the same time as the
    others, sharing no lock with them. Calls that share one context take turns
    on its workers, which bounds the threads a process starts. Results are the
    same bits whatever the context or thread count. threads is at most 4096.
    A copy (copy.copy, copy.deepcopy, pickle) is a new, independent context
    with the same settings.
    """

    __slots__ = ("_core", "_handle", "_threads", "__weakref__")

    def __init__(self, threads=0, *, pin=False, first_cpu=0):
        self._threads = check_int(threads, "threads", 0, maximum=MAX_THREADS)  # as asked: 0 stays 0
        self._core = _core.ThreadingContext(
            self._threads, check_bool(pin, "pin"),
            check_int(first_cpu, "first_cpu", 0, maximum=INT32_MAX))
        self._handle = next(_handles)
        _live[self._handle] = self

    # A copy is a new, independent context with the same settings (its own
    # workers and handle), for copy.copy, copy.deepcopy and pickle alike: a
    # copy sharing the original's handle would break once the original is gone.
    def __reduce__(self):
        return (_rebuild, (self._threads, self.pin, self.first_cpu))

    threads = property(lambda self: self._core.threads,
                       doc="Threads of a call that asks for 0 (resolved: >= 1).")
    pin = property(lambda self: self._core.pin)
    first_cpu = property(lambda self: self._core.first_cpu)

    def __repr__(self) -> str:
        pinned = f", pin=True, first_cpu={self.first_cpu}" if self.pin else ""
        return f"tilesplash.ThreadingContext({self.threads}{pinned})"


def _rebuild(threads: int, pin: bool, first_cpu: int) -> ThreadingContext:
    return ThreadingContext(threads, pin=pin, first_cpu=first_cpu)


# The torch op takes a context as an int handle (its schema has no Python
# objects); live contexts by handle, 0 for none.
_handles = itertools.count(1)
_live: weakref.WeakValueDictionary[int, ThreadingContext] = weakref.WeakValueDictionary()


def check_context(context) -> ThreadingContext | None:
    if context is not None and not isinstance(context, ThreadingContext):
        raise TypeError(f"context: expected a tilesplash.ThreadingContext or None, got "
                        f"{type(context).__name__}")
    return context


def core_of(context: ThreadingContext | None):
    return None if context is None else context._core


def handle_of(context: ThreadingContext | None) -> int:
    return 0 if context is None else context._handle


def from_handle(handle: int) -> ThreadingContext | None:
    if handle == 0:
        return None
    context = _live.get(handle)
    if context is None:
        raise ValueError(f"context: the ThreadingContext of handle {handle} no longer exists")
    return context


def hardware_threads() -> int:
    """CPUs this process may run on (its affinity mask), at least 1."""
    return _core.hardware_threads()
