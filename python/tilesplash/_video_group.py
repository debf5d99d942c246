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

from . import _dist
from ._dist.agreement import gather_objects
from ._layouts import from_bnhd, lse_to_layout

_WHO = "tilesplash.VideoAttention"


class GroupForward:
    """VideoAttention's call over a process group (a part of VideoAttention, in its own
    file: it reads the object's own state as any method does)."""

    def _group_forward(self, group, timeout, q, k, v, layer, step, layout, return_lse,
                       key_lengths=None):
        """VideoAttention.__call__ with a group: this rank's shard in, its shard out.

        The ranks agree first, in the exchange's own all_gather, on the call (layer,
        step, return_lse, key_lengths, the tensors' shapes, dtype and layout) and on the whole
        configuration of the object (self._agreement()): ranks that disagree all
        raise, naming what differs, before any data moves. The call's arguments are
        checked inside that agreement: a rank that rejects one makes every rank raise,
        naming it."""
        checked = {}

        def arguments():  # run inside the agreement: a rank's bad argument is every rank's error
            layout_, layer_, step_, lse_, lengths = self._check_call(
                q, k, v, layer, step, layout, return_lse, key_lengths)
            checked.update(layout=layout_, layer=layer_, step=step_, return_lse=lse_,
                           key_lengths=lengths)
            return dict(self._agreement(), layer=layer_, step=step_, return_lse=lse_,
                        key_lengths=lengths)

        ctx, call, shards = _dist.start(q, k, v, "dense", layout, None, 0, group, timeout, _WHO,
                                        backend=self.backend, arguments=arguments)
        layer, step, return_lse = checked["layer"], checked["step"], checked["return_lse"]
        key_lengths = checked["key_lengths"]
        self._calls_since_reset += 1
        tokens = self.geometry.tokens
        if shards.total != tokens:
            raise ValueError(
                f"q, k, v: the ranks' sequence shards hold {shards.total} tokens in all "
                f"({list(shards.sizes)} by rank); geometry.tokens is {tokens}")
        torch, _ = _dist.torch_modules()
        exchange = _dist.UlyssesExchange(ctx, shards, call.heads)
        h0, h1 = exchange.heads
        qh, kh, vh = exchange.to_heads(call.q, call.k, call.v, scratch=True)
        out = lse = report = error = None
        try:
            if h1 > h0:
                out, lse, report = self._forward_local(qh, kh, vh, layer, step, "bnhd", True,
                                                            key_lengths)
            else:  # more ranks than heads: this rank runs none, but still exchanges
                out = torch.empty(call.batch, shards.total, 0, call.v_dim, dtype=call.dtype,
                                  device=call.q.device)
                lse = torch.empty(call.batch, 0, shards.total, dtype=torch.float32,
                                  device=call.q.device)
        except Exception as caught:  # the others must hear of it, not wait for the timeout
            error = caught
        self._last_heads = (h0, h1)
        heads = [] if report is None else [dict(h, head=h0 + h["head"]) for h in report["heads"]]
        mine = {"ok": error is None, "error": f"{type(error).__name__}: {error}" if error else None,
                "heads": heads, "report": None if report is None else
                {key: value for key, value in report.items() if key != "heads"}}
        everyone = gather_objects(ctx, "the reports", mine)
        if error is not None:
            raise error
        failed = [(r, x["error"]) for r, x in enumerate(everyone) if not x["ok"]]
        if failed:
            raise RuntimeError(f"{_WHO}: rank(s) {[r for r, _ in failed]} of {ctx.size} failed "
                               f"running their heads ({failed[0][1]}); no rank has an output")
        out, lse = exchange.to_sequence(out, lse if return_lse else None)
        out = from_bnhd(out, call.layout)
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
            return out, lse_to_layout(lse, call.layout), merged
        return out, merged
