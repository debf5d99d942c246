"""Views between the caller's layout and the [batch, N, heads, d] order the
exchanges move."""

from __future__ import annotations


def as_bnhd(x, layout):
    """A [batch, N, heads, d] view of x in `layout` (no copy)."""
    if layout == "bnhd":
        return x
    if layout == "bhnd":
        return x.transpose(1, 2)
    return x.transpose(0, 1).unsqueeze(0)


def from_bnhd(x, layout):
    if layout == "bnhd":
        return x.contiguous()
    if layout == "bhnd":
        return x.transpose(1, 2).contiguous()
    return x[0].transpose(0, 1).contiguous()


def lse_from_bhn(lse, layout):
    return lse[0] if layout == "hnd" else lse
