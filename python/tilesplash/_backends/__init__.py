"""Which backend runs a call: the native CPU kernel or FlexAttention.

backend="auto" (the default) runs the native kernel for NumPy arrays and
CPU tensors and FlexAttention for tensors on any other device; "cpu" only
the native kernel; "flex" FlexAttention on any device, the CPU included
(that is how the CPU tests check it). No torch import here.
"""

from __future__ import annotations

BACKENDS = ("auto", "cpu", "flex")


def check_backend(backend) -> str:
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend: expected 'auto', 'cpu' or 'flex', got {backend!r}")
    return backend


def resolve(backend: str, q) -> str:
    """"cpu" or "flex" for a call whose first tensor is q (checked: backend's value)."""
    from ._tensors import is_torch

    if not is_torch(q):
        if backend == "flex":
            raise TypeError("backend: 'flex' runs torch tensors (FlexAttention); got "
                            f"{type(q).__module__}.{type(q).__qualname__} q")
        return "cpu"
    if backend == "auto":
        return "cpu" if q.device.type == "cpu" else "flex"
    if backend == "cpu" and q.device.type != "cpu":
        raise ValueError(f"q: backend 'cpu' runs CPU tensors, got a tensor on device "
                         f"'{q.device}'; pass backend='auto' or 'flex' for FlexAttention")
    return backend
