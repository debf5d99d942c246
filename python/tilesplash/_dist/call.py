"""One call's arguments, checked on every rank and compared across ranks
before any data moves, so a bad argument on one rank makes every rank raise."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .._backend import check_backend, resolve
from .._mask import as_mask
from .._tensors import MAX_THREADS, check_int, check_layout, check_qkv, check_scale
from .._threading import check_context
from .group import Group, torch_modules
from .layouts import as_bnhd
from .shards import SequenceShards

_DTYPE_CODES = ("float32", "float16", "bfloat16")
_LAYOUT_CODES = ("bnhd", "bhnd", "hnd")


@dataclass(frozen=True)
class Call:
    """One call's checked arguments, as every rank must agree on them."""

    q: object  # bnhd views
    k: object
    v: object
    layout: str
    mask: object
    scale: float | None
    batch: int
    heads: int
    local_len: int
    dim: int
    v_dim: int
    dtype: object
    threads: int
    backend: str = "cpu"  # resolved: "cpu" (the native kernel) or "flex"


def check_local(q, k, v, mask, layout, scale, threads, who, backend="auto") -> Call:
    torch, _ = torch_modules()
    layout = check_layout(layout)
    backend = check_backend(backend)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: {who} needs torch tensors (it runs on torch.distributed), "
                            f"got {type(x).__module__}.{type(x).__qualname__}")
    backend = resolve(backend, q)
    check_qkv(q, k, v, layout, any_device=backend == "flex")
    mask = as_mask(mask)
    scale = check_scale(scale)
    threads = check_int(threads, "threads", 0, maximum=MAX_THREADS)
    qb, kb, vb = (as_bnhd(x, layout) for x in (q, k, v))
    if tuple(kb.shape[:3]) != tuple(qb.shape[:3]) or tuple(vb.shape[:3]) != tuple(qb.shape[:3]):
        raise ValueError(
            f"k, v: every rank holds the same shard of q, k and v, so their [batch, N, heads] "
            f"must match q's {tuple(qb.shape[:3])}; got k {tuple(kb.shape[:3])}, v "
            f"{tuple(vb.shape[:3])} (in bnhd order)"
        )
    if kb.shape[3] != qb.shape[3]:
        raise ValueError(f"k: head dim must equal q's ({qb.shape[3]}), got {kb.shape[3]}")
    # The kernel would find a NaN only on the rank that runs it, after the
    # exchange, and the others would wait for it until the timeout.
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not bool(torch.isfinite(x).all()):
            raise ValueError(f"{name}: NaN or Inf in this rank's shard")
    return Call(qb, kb, vb, layout, mask, scale, int(qb.shape[0]), int(qb.shape[2]),
                int(qb.shape[1]), int(qb.shape[3]), int(vb.shape[3]), q.dtype, threads, backend)


_FIELDS = ("batch", "heads", "head dim", "v head dim", "dtype", "layout", "mask", "scale")


def agree(ctx: Group, local: Call | None, error: Exception | None) -> SequenceShards:
    """All-gathers every rank's arguments: raises on every rank when one rank
    rejected its own, or when ranks disagree; returns the sequence shards."""
    torch, dist = torch_modules()
    row = [0] * (2 + len(_FIELDS))
    if local is not None and error is None:
        scale_bits = struct.unpack("<q", struct.pack("<d", local.scale))[0] if local.scale else 0
        row = [1, local.local_len, local.batch, local.heads, local.dim, local.v_dim,
               _DTYPE_CODES.index(str(local.dtype).removeprefix("torch.")),
               _LAYOUT_CODES.index(local.layout), hash(local.mask), scale_bits]
    mine = torch.tensor(row, dtype=torch.int64, device=ctx.device)
    rows = [torch.empty_like(mine) for _ in range(ctx.size)]
    ctx.run("all_gather of the call's shapes",
            lambda: dist.all_gather(rows, mine, group=ctx.group, async_op=True))
    if error is not None:
        raise error
    values = [x.tolist() for x in rows]
    failed = [r for r, x in enumerate(values) if x[0] == 0]
    if failed:
        raise ValueError(f"{ctx.who}: rank(s) {failed} rejected their arguments (their own error "
                         "says why); no rank computed anything")
    for i, field in enumerate(_FIELDS):
        column = [x[2 + i] for x in values]
        if len(set(column)) > 1:
            shown = column
            if field == "dtype":
                shown = [_DTYPE_CODES[c] for c in column]
            elif field == "layout":
                shown = [_LAYOUT_CODES[c] for c in column]
            elif field == "mask":
                shown = f"they differ (this rank's: {local.mask})"
            elif field == "scale":
                shown = f"they differ (this rank's: {local.scale})"
            raise ValueError(f"{ctx.who}: every rank must pass the same {field}; by rank: {shown}")
    shards = SequenceShards(tuple(int(x[1]) for x in values))
    if shards.total == 0:
        return shards
    local.mask._core.check_lengths(shards.total, shards.total)
    return shards


def start(q, k, v, mask, layout, scale, threads, group, timeout, who, context=None,
          backend="auto"):
    ctx = Group(group, timeout, who)
    local, error = None, None
    try:
        check_context(context)
        local = check_local(q, k, v, mask, layout, scale, threads, who, backend)
    except Exception as caught:  # every rank must reach the gather, or the others wait
        error = caught
    shards = agree(ctx, local, error)
    return ctx, local, shards
