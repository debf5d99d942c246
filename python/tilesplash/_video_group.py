"""VideoAttention over a torch.distributed process group (Ulysses).

Each rank holds a contiguous shard of the sequence for every head; one
all-to-all gives each rank the whole sequence for its heads
(tilesplash.distributed.head_range), the rank's VideoAttention runs them, and a second
all-to-all returns each rank its sequence shard of the output.

Why this matches one process computing every head: nothing the router,
the warm-up or the masks decide depends on where a head sits in the call.
The router's sampled rows come from (seed, layer, step) and are shared by
every head; the warm-up is per layer and step; svg2's k-means starts from
the seed alone and is warm-started per (layer, local head), which names the
same global head on every call as long as the group does not change. Each
head runs the same kernel on the same whole-sequence bytes as it would in
one process, so the decisions (and the router's MSEs) are bit-identical and
the outputs equal. Only the report's head indices need the offset: they are
global here, and every rank returns the whole list.
"""

from __future__ import annotations

import pickle

from . import _dist

_WHO = "tilesplash.VideoAttention"


def _gather_objects(ctx, obj) -> list:
    """Every rank's picklable `obj`, in rank order, under the group's timeout."""
    torch, dist = _dist.torch_modules()
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8).to(ctx.device)
    size = torch.tensor([data.numel()], dtype=torch.int64, device=ctx.device)
    sizes = [torch.empty_like(size) for _ in range(ctx.size)]
    ctx.run("all_gather of the report sizes",
            lambda: dist.all_gather(sizes, size, group=ctx.group, async_op=True))
    longest = max(int(s) for s in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=ctx.device)
    padded[:data.numel()] = data
    rows = [torch.empty_like(padded) for _ in range(ctx.size)]
    ctx.run("all_gather of the reports",
            lambda: dist.all_gather(rows, padded, group=ctx.group, async_op=True))
    return [pickle.loads(row[:int(s)].cpu().numpy().tobytes()) for row, s in zip(rows, sizes)]


def _agree_call(ctx, layer: int, step: int, tokens: int, heads: int, shards):
    """Every rank must call at the same layer and step, with shards that add up
    to the geometry; raises on every rank otherwise (they all see the same rows)."""
    torch, dist = _dist.torch_modules()
    mine = torch.tensor([layer, step, tokens], dtype=torch.int64, device=ctx.device)
    rows = [torch.empty_like(mine) for _ in range(ctx.size)]
    ctx.run("all_gather of layer and step",
            lambda: dist.all_gather(rows, mine, group=ctx.group, async_op=True))
    for i, name in enumerate(("layer", "step", "geometry.tokens")):
        column = [int(x[i]) for x in rows]
        if len(set(column)) > 1:
            raise ValueError(f"{_WHO}: every rank must pass the same {name}; by rank: {column}")
    if shards.total != tokens:
        raise ValueError(
            f"q, k, v: the ranks' sequence shards hold {shards.total} tokens in all "
            f"({list(shards.sizes)} by rank); geometry.tokens is {tokens}")


def group_forward(attention, group, timeout, q, k, v, layer, step, layout, return_lse,
                  key_lengths=None):
    """VideoAttention.__call__ with a group: this rank's shard in, its shard out."""
    ctx, call, shards = _dist.start(q, k, v, "dense", layout, None, 0, group, timeout, _WHO,
                                    backend=attention.backend)
    _agree_call(ctx, layer, step, attention.geometry.tokens, call.heads, shards)
    torch, _ = _dist.torch_modules()
    exchange = _dist.UlyssesExchange(ctx, shards, call.heads)
    h0, h1 = exchange.heads
    qh, kh, vh = exchange.to_heads(call.q, call.k, call.v, scratch=True)
    out = lse = report = error = None
    try:
        if h1 > h0:
            out, lse, report = attention._forward_local(qh, kh, vh, layer, step, "bnhd", True,
                                                        key_lengths)
        else:  # more ranks than heads: this rank runs none, but still exchanges
            out = torch.empty(call.batch, shards.total, 0, call.v_dim, dtype=call.dtype,
                              device=call.q.device)
            lse = torch.empty(call.batch, 0, shards.total, dtype=torch.float32,
                              device=call.q.device)
    except Exception as caught:  # the others must hear of it, not wait for the timeout
        error = caught
    attention._last_heads = (h0, h1)
    heads = [] if report is None else [dict(h, head=h0 + h["head"]) for h in report["heads"]]
    mine = {"ok": error is None, "error": f"{type(error).__name__}: {error}" if error else None,
            "heads": heads, "report": None if report is None else
            {key: value for key, value in report.items() if key != "heads"}}
    everyone = _gather_objects(ctx, mine)
    if error is not None:
        raise error
    failed = [(r, x["error"]) for r, x in enumerate(everyone) if not x["ok"]]
    if failed:
        raise RuntimeError(f"{_WHO}: rank(s) {[r for r, _ in failed]} of {ctx.size} failed "
                           f"running their heads ({failed[0][1]}); no rank has an output")
    out, lse = exchange.to_sequence(out, lse if return_lse else None)
    out = _dist.from_bnhd(out, call.layout)
    merged = dict(report if report is not None else
                  next((x["report"] for x in everyone if x["report"] is not None), {}))
    if report is None:  # this rank ran no head: its own timings are zero
        for key in list(merged):
            if key.endswith("seconds"):
                merged[key] = 0.0
    merged["heads"] = sorted((h for x in everyone for h in x["heads"]),
                             key=lambda h: (h["batch"], h["head"]))
    merged["group"] = {"rank": ctx.rank, "size": ctx.size, "heads": (h0, h1),
                       "shards": list(shards.sizes)}
    if return_lse:
        return out, _dist.lse_from_bhn(lse, call.layout), merged
    return out, merged
