"""Views between the caller's layout and the orders the backends compute in.

One module for every conversion: FlexAttention computes [batch, heads, N, d]
(bhnd), the sequence-parallel exchanges move [batch, N, heads, d] (bnhd), and
LSEs are [batch, heads, N] ([heads, N] for hnd). The functions only call
.transpose / .unsqueeze / indexing / .contiguous, so they serve torch tensors
on any device (and nothing here imports torch).
"""

from __future__ import annotations


def to_bhnd(x, layout: str):
    """A [batch, heads, N, d] view of x in `layout` (no copy)."""
    if layout == "bhnd":
        return x
    if layout == "bnhd":
        return x.transpose(1, 2)
    return x.unsqueeze(0)


def from_bhnd(x, layout: str):
    """x [batch, heads, N, d] in `layout`, C-contiguous."""
    if layout == "bhnd":
        return x.contiguous()
    if layout == "bnhd":
        return x.transpose(1, 2).contiguous()
    return x[0].contiguous()


def to_bnhd(x, layout: str):
    """A [batch, N, heads, d] view of x in `layout` (no copy)."""
    if layout == "bnhd":
        return x
    if layout == "bhnd":
        return x.transpose(1, 2)
    return x.transpose(0, 1).unsqueeze(0)


def from_bnhd(x, layout: str):
    """x [batch, N, heads, d] in `layout`, C-contiguous."""
    if layout == "bnhd":
        return x.contiguous()
    if layout == "bhnd":
        return x.transpose(1, 2).contiguous()
    return x[0].transpose(0, 1).contiguous()


def lse_to_layout(lse, layout: str):
    """A [batch, heads, N] LSE as the caller's layout returns it ([heads, N] for hnd)."""
    return lse[0] if layout == "hnd" else lse


def lse_along_rows(lse, layout: str):
    """A [batch, heads, N] LSE as a view broadcasting over an output in `layout`
    (bhnd / bnhd; hnd outputs are merged as bhnd of batch 1)."""
    if layout == "bnhd":
        return lse.transpose(1, 2)[..., None]
    return lse[..., None]
