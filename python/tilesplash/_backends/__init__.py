"""Which backend runs a call, resolved once from `backend=` into a backend object.

backend="auto" (the default) runs the native kernel for NumPy arrays and
CPU tensors and FlexAttention for tensors on any other device; "cpu" only
the native kernel; "flex" FlexAttention on any device, the CPU included
(that is how the CPU tests check it). The front doors call resolve() once and
then ask the object (base.Backend) what it can do. Adding a backend: a file
here with a Backend subclass and its line in BACKENDS (docs/extending.md).
No torch import here.
"""

from __future__ import annotations

from .base import Backend
from .flex import FlexBackend
from .native import NativeBackend

BACKENDS: dict[str, Backend] = {backend.name: backend for backend in (NativeBackend(),
                                                                       FlexBackend())}
"""Every backend by name, in the order backend="auto" asks them."""

NAMES = ("auto",) + tuple(BACKENDS)


def check_backend(backend) -> str:
    """A backend name: "auto" or one of BACKENDS."""
    if not isinstance(backend, str) or backend not in NAMES:
        raise ValueError(f"backend: expected {', '.join(map(repr, NAMES[:-1]))} or "
                         f"{NAMES[-1]!r}, got {backend!r}")
    return backend


def resolve(backend, q) -> Backend:
    """The backend object that runs a call whose first tensor is q (backend's name checked)."""
    name = check_backend(backend)
    if name == "auto":
        return next(b for b in BACKENDS.values() if b.is_default_for(q))
    chosen = BACKENDS[name]
    chosen.check_input(q)
    return chosen


__all__ = ["BACKENDS", "Backend", "NAMES", "check_backend", "resolve"]
