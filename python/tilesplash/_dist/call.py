"""One call's arguments, checked on every rank and compared across ranks
before any data moves, so a bad argument on one rank makes every rank raise."""

from __future__ import annotations

from dataclasses import dataclass

from .._backends import Backend, check_backend, resolve
from .._mask import as_mask, core_mask
from .._checks import MAX_THREADS, check_int, check_scale
from .._tensors import check_layout, check_qkv
from .._threading import check_context
from .agreement import (DIGEST_WORDS, check_same, describe, describe_arguments, digest_words,
                        gather_objects, gather_rows)
from .group import Group, torch_modules
from .._layouts import to_bnhd
from .shards import SequenceShards


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
    backend: Backend  # resolved once: what every step of the call runs on


def check_local(q, k, v, mask, layout, scale, threads, who, backend="auto") -> Call:
    torch, _ = torch_modules()
    layout = check_layout(layout)
    backend = check_backend(backend)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: {who} needs torch tensors (it runs on torch.distributed), "
                            f"got {type(x).__module__}.{type(x).__qualname__}")
    backend = resolve(backend, q)
    check_qkv(q, k, v, layout, any_device=backend.any_device)
    mask = as_mask(mask)
    scale = check_scale(scale)
    threads = check_int(threads, "threads", 0, maximum=MAX_THREADS)
    qb, kb, vb = (to_bnhd(x, layout) for x in (q, k, v))
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


def call_description(local: Call, arguments) -> dict[str, str]:
    """What every rank must pass the same: the shapes and dtype its tensors imply,
    the mask, layout, scale and backend as checked (the backend resolved), and
    every other argument in `arguments` but the PER_RANK ones (the caller's
    locals() on entry)."""
    described = describe_arguments(arguments or {})
    described.update({
        "batch": str(local.batch), "heads": str(local.heads), "head dim": str(local.dim),
        "v head dim": str(local.v_dim), "dtype": str(local.dtype).removeprefix("torch."),
        "layout": local.layout, "mask": _comparable_spec(local.mask),
        "scale": describe(local.scale), "backend": local.backend.name})
    return described


def _comparable_spec(mask) -> str:
    """The mask's SPEC, which ranks compare; refused when it does not describe the
    mask (svg2's cluster masks carry a token assignment no SPEC holds)."""
    spec = str(mask)
    try:
        same = as_mask(spec) == mask
    except ValueError:
        same = False
    if not same:
        raise ValueError(f"mask: {spec[:60]!r} cannot be compared across ranks: its str() is not "
                         "a SPEC that parses back to it (a cluster mask from "
                         "VideoAttention.head_mask()); pass a SPEC or a mask built from one")
    return spec


def agree(ctx: Group, local: Call | None, description, error: Exception | None) -> SequenceShards:
    """All-gathers every rank's shard length and the digest of its description:
    raises on every rank when one rank rejected its own arguments, or when
    ranks disagree (naming the fields); returns the sequence shards."""
    ok = local is not None and description is not None and error is None
    row = [1, local.local_len, *digest_words(description)] if ok else [0] * (2 + DIGEST_WORDS)
    rows = gather_rows(ctx, "all_gather of the call's arguments", row)
    failed = [r for r, x in enumerate(rows) if x[0] == 0]
    if failed:
        # A second all_gather, on this path only, so that every rank's error names the
        # argument the failing rank rejected.
        errors = gather_objects(ctx, "the rejected arguments' errors",
                                None if error is None else f"{type(error).__name__}: {error}")
        if error is not None:
            raise error
        shown = "; ".join(f"rank {r}: {errors[r]}" for r in failed)
        raise ValueError(f"{ctx.who}: rank(s) {failed} rejected their arguments ({shown}); no "
                         "rank computed anything")
    check_same(ctx, [x[2:] for x in rows], description)
    shards = SequenceShards(tuple(int(x[1]) for x in rows))
    if shards.total == 0:
        return shards
    core_mask(local.mask).check_lengths(shards.total, shards.total)
    return shards


def start(q, k, v, mask, layout, scale, threads, group, timeout, who, context=None,
          backend="auto", arguments=None):
    """Checks this rank's arguments and agrees on them with the other ranks.

    arguments: what else every rank must pass the same, by name (the public
    function's locals() on entry: all but the PER_RANK ones are compared, so
    an argument added later is compared too; or a caller's configuration), or a
    function returning them that checks the caller's own arguments: it runs
    inside the agreement, so what it raises reaches every rank.
    Returns (the group, the checked call, the sequence shards).
    """
    ctx = Group(group, timeout, who)
    local, description, error = None, None, None
    try:
        check_context(context)
        if callable(arguments):
            arguments = arguments()
        local = check_local(q, k, v, mask, layout, scale, threads, who, backend)
        description = call_description(local, arguments)
    except Exception as caught:  # every rank must reach the gather, or the others wait
        error = caught
    shards = agree(ctx, local, description, error)
    return ctx, local, shards
