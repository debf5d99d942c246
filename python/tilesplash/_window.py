"""Attention over a window of a larger map: the q_offset / kv_offset arguments.

A rank of a sequence-parallel job holds a shard of the queries and, at each
ring step, a block of the keys. attention() and plan() take the global
position of both (q_offset, kv_offset) and the global lengths (q_total,
kv_total); the mask keeps its global meaning, and the library plans the window
of the global mask (tilesplash/plan_window.h), never a new mask per shard.
"""

from __future__ import annotations

from . import _core
from ._mask import Mask, core_mask
from ._checks import INT64_MAX, check_int


def seq_len(x, layout: str) -> int:
    """N of a tensor in `layout` (bhnd: axis 2; bnhd, hnd: axis 1)."""
    return int(x.shape[2] if layout == "bhnd" else x.shape[1])


def window_args(q_len: int, kv_len: int, q_offset, kv_offset, q_total, kv_total):
    """Checked (q_offset, kv_offset, q_total, kv_total); q_total = 0 when the call
    covers the whole map (no window). Totals default to offset + length."""
    q_offset = check_int(q_offset, "q_offset", 0)
    kv_offset = check_int(kv_offset, "kv_offset", 0)
    q_total = check_int(q_total, "q_total", 1, allow_none=True)
    kv_total = check_int(kv_total, "kv_total", 1, allow_none=True)
    # Global indices are int64: the window's last row must be one.
    for name, offset, length in (("q_offset", q_offset, q_len), ("kv_offset", kv_offset, kv_len)):
        if offset > INT64_MAX - length:
            raise ValueError(f"{name}: rows [{offset}, {offset + length}) of this call pass the "
                             f"int64 index range; expected {name} <= 2^63 - 1 - length "
                             f"({INT64_MAX - length})")
    q_total = q_offset + q_len if q_total is None else q_total
    kv_total = kv_offset + kv_len if kv_total is None else kv_total
    if q_offset == 0 and kv_offset == 0 and q_total == q_len and kv_total == kv_len:
        return 0, 0, 0, 0
    for name, offset, length, total, total_name in (
        ("q_offset", q_offset, q_len, q_total, "q_total"),
        ("kv_offset", kv_offset, kv_len, kv_total, "kv_total"),
    ):
        if offset + length > total:
            raise ValueError(
                f"{name}: rows [{offset}, {offset + length}) of this call do not fit in "
                f"{total_name} = {total}; expected {name} + length <= {total_name}"
            )
    return q_offset, kv_offset, q_total, kv_total


def window_core(mask: Mask, q_len: int, kv_len: int, window) -> "_core.Mask":
    """The core mask for a call of q_len x kv_len at `window` (from window_args)."""
    q_offset, kv_offset, q_total, kv_total = window
    if q_total == 0:
        return core_mask(mask)
    return _core.window_mask(core_mask(mask), q_offset, q_offset + q_len, kv_offset,
                             kv_offset + kv_len, q_total, kv_total)
