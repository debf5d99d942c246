"""Sequence-parallel attention over torch.distributed process groups.

Every rank of a group holds a contiguous shard of the sequence (rank r the
tokens right after rank r - 1's; shards may differ in length, e.g. from
torch.tensor_split) for all heads, and gets the attention output of its own
shard back. Two schemes, both exact (equal to one process running
tilesplash.attention on the whole sequence, within float32 rounding):

- ulysses_attention: one all-to-all turns sequence shards into head shards
  (each rank gets the whole sequence for about H/P heads), tilesplash runs
  those heads with the global mask, a second all-to-all returns the sequence
  shards. Per rank and layer it moves about 4 N H d / P elements.
- ring_attention: the K/V shards travel around the ring; at each step a rank
  runs its queries against the visiting block under the window of the global
  mask (skipping blocks the mask leaves empty) and merges the partial
  results through their LSEs (tilesplash.merge_attention). For more ranks
  than heads, or when memory per rank must fall with P.

Works with any backend that has all_to_all_single and isend / irecv (gloo on
CPUs; tilesplash itself runs on the CPU). torch is imported on first use, not
with this module. Every collective waits at most `timeout` seconds: a rank
that raised, hung or exited makes the others raise (TimeoutError or
RuntimeError naming the step) instead of hanging. Arguments are checked on
every rank and compared across ranks before any data moves, so a bad argument
on one rank makes every rank raise.

The pieces are public so that whole-sequence per-head work (VideoAttention's
routing, a diffusers processor) can run on head shards: see SequenceShards,
head_range and UlyssesExchange.
"""

from __future__ import annotations

import contextlib
import datetime
import struct
from dataclasses import dataclass

from ._attention import attention
from ._mask import as_mask
from ._merge import merge_attention
from ._tensors import check_int, check_layout, check_qkv, check_scale

DEFAULT_TIMEOUT = 600.0
"""Seconds any one collective may wait for the other ranks (the `timeout` default)."""

_DTYPE_CODES = ("float32", "float16", "bfloat16")
_LAYOUT_CODES = ("bnhd", "bhnd", "hnd")


def _torch():
    import torch
    import torch.distributed as dist

    return torch, dist


@dataclass(frozen=True)
class SequenceShards:
    """Where each rank's contiguous shard lies: sizes in rank order."""

    sizes: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.sizes)

    def range(self, rank: int) -> tuple[int, int]:
        """The global [begin, end) of rank `rank`'s shard."""
        begin = sum(self.sizes[:rank])
        return begin, begin + self.sizes[rank]


def head_range(heads: int, rank: int, world: int) -> tuple[int, int]:
    """The global heads [begin, end) that rank `rank` of `world` runs under Ulysses.

    A balanced contiguous split: every rank gets floor(H / P) or ceil(H / P)
    heads, in rank order; with P > H some ranks get none. Global head index =
    begin + local index, which is what per-head decisions (routing, per-head
    masks) must be keyed on to match one process.
    """
    return rank * heads // world, (rank + 1) * heads // world


class _Group:
    """The process group of one call, its rank, and waits bounded by the timeout."""

    def __init__(self, group, timeout, who: str):
        torch, dist = _torch()
        self.who = who
        if not dist.is_available() or not dist.is_initialized():
            raise RuntimeError(
                f"{who}: torch.distributed is not initialized; call "
                "torch.distributed.init_process_group('gloo', ...) first (torchrun sets up the "
                "environment it reads)"
            )
        self.group = group
        self.rank = dist.get_rank(group)
        if self.rank < 0:
            raise ValueError(f"group: this process (global rank {dist.get_rank()}) is not a "
                             "member of the group")
        self.size = dist.get_world_size(group)
        if timeout is None:
            timeout = DEFAULT_TIMEOUT
        if isinstance(timeout, datetime.timedelta):
            timeout = timeout.total_seconds()
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
            raise ValueError(f"timeout: expected seconds > 0 (or a timedelta), got {timeout!r}")
        self.seconds = float(timeout)
        self.timeout = datetime.timedelta(seconds=self.seconds)

    def global_rank(self, rank: int) -> int:
        _, dist = _torch()
        return rank if self.group is None else dist.get_global_rank(self.group, rank)

    @contextlib.contextmanager
    def errors(self, what: str):
        """Turns a timeout or a lost peer inside the block (issuing a collective or
        waiting for it) into a clear error naming this call, rank and step."""
        try:
            yield
        except RuntimeError as error:
            text = str(error)
            where = f"rank {self.rank} of {self.size}, {what}"
            if "timed out" in text.lower() or "timeout" in text.lower():
                raise TimeoutError(
                    f"{self.who}: {where}: no answer within {self.seconds:g} s; another rank "
                    f"failed, exited or did not call {self.who} (timeout= sets the limit)"
                ) from error
            raise RuntimeError(
                f"{self.who}: {where} failed ({text.strip()}); another rank probably failed "
                "or exited"
            ) from error

    def wait(self, works):
        for work in works if isinstance(works, (list, tuple)) else [works]:
            work.wait(timeout=self.timeout)

    def run(self, what: str, issue):
        """Issues collectives (issue() returns their work objects) and waits for them."""
        with self.errors(what):
            self.wait(issue())


def _as_bnhd(x, layout):
    """A [batch, N, heads, d] view of x in `layout` (no copy)."""
    if layout == "bnhd":
        return x
    if layout == "bhnd":
        return x.transpose(1, 2)
    return x.transpose(0, 1).unsqueeze(0)


def _from_bnhd(x, layout):
    if layout == "bnhd":
        return x.contiguous()
    if layout == "bhnd":
        return x.transpose(1, 2).contiguous()
    return x[0].transpose(0, 1).contiguous()


def _lse_from_bhn(lse, layout):
    return lse[0] if layout == "hnd" else lse


def _bytes(x):
    """The bytes of x in C order as a flat uint8 tensor (a copy only when x is a strided view)."""
    torch, _ = _torch()
    return x.contiguous().view(-1).view(torch.uint8)


def _from_bytes(buffer, dtype, shape):
    return buffer.view(dtype).view(shape)


@dataclass(frozen=True)
class _Call:
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


def _check_local(q, k, v, mask, layout, scale, who) -> _Call:
    torch, _ = _torch()
    layout = check_layout(layout)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: {who} needs torch tensors (it runs on torch.distributed), "
                            f"got {type(x).__module__}.{type(x).__qualname__}")
    check_qkv(q, k, v, layout)
    mask = as_mask(mask)
    scale = check_scale(scale)
    qb, kb, vb = (_as_bnhd(x, layout) for x in (q, k, v))
    if tuple(kb.shape[:3]) != tuple(qb.shape[:3]) or tuple(vb.shape[:3]) != tuple(qb.shape[:3]):
        raise ValueError(
            f"k, v: every rank holds the same shard of q, k and v, so their [batch, N, heads] "
            f"must match q's {tuple(qb.shape[:3])}; got k {tuple(kb.shape[:3])}, v "
            f"{tuple(vb.shape[:3])} (in bnhd order)"
        )
    if kb.shape[3] != qb.shape[3]:
        raise ValueError(f"k: head dim must equal q's ({qb.shape[3]}), got {kb.shape[3]}")
    return _Call(qb, kb, vb, layout, mask, scale, int(qb.shape[0]), int(qb.shape[2]),
                 int(qb.shape[1]), int(qb.shape[3]), int(vb.shape[3]), q.dtype)


_FIELDS = ("batch", "heads", "head dim", "v head dim", "dtype", "layout", "mask", "scale")


def _agree(ctx: _Group, local: _Call | None, error: Exception | None) -> SequenceShards:
    """All-gathers every rank's arguments: raises on every rank when one rank
    rejected its own, or when ranks disagree; returns the sequence shards."""
    torch, dist = _torch()
    row = [0] * (2 + len(_FIELDS))
    if local is not None and error is None:
        scale_bits = struct.unpack("<q", struct.pack("<d", local.scale))[0] if local.scale else 0
        row = [1, local.local_len, local.batch, local.heads, local.dim, local.v_dim,
               _DTYPE_CODES.index(str(local.dtype).removeprefix("torch.")),
               _LAYOUT_CODES.index(local.layout), hash(local.mask), scale_bits]
    mine = torch.tensor(row, dtype=torch.int64)
    rows = [torch.empty_like(mine) for _ in range(ctx.size)]
    ctx.run("all_gather of the call's shapes",
            lambda: dist.all_gather(rows, mine, group=ctx.group, async_op=True))
    if error is not None:
        raise error
    failed = [r for r, x in enumerate(rows) if x[0].item() == 0]
    if failed:
        raise ValueError(f"{ctx.who}: rank(s) {failed} rejected their arguments (their own error "
                         "says why); no rank computed anything")
    values = [x.tolist() for x in rows]
    for i, field in enumerate(_FIELDS):
        column = [x[2 + i] for x in values]
        if len(set(column)) > 1:
            shown = column
            if field == "dtype":
                shown = [_DTYPE_CODES[c] for c in column]
            elif field == "layout":
                shown = [_LAYOUT_CODES[c] for c in column]
            elif field in ("mask", "scale"):
                shown = "differs"
            raise ValueError(f"{ctx.who}: every rank must pass the same {field}; by rank: {shown}")
    shards = SequenceShards(tuple(int(x[1]) for x in values))
    if shards.total == 0:
        return shards
    local.mask._core.check_lengths(shards.total, shards.total)
    return shards


def _start(q, k, v, mask, layout, scale, group, timeout, who):
    ctx = _Group(group, timeout, who)
    local, error = None, None
    try:
        local = _check_local(q, k, v, mask, layout, scale, who)
    except Exception as caught:  # every rank must reach the gather, or the others wait
        error = caught
    shards = _agree(ctx, local, error)
    return ctx, local, shards


class UlyssesExchange:
    """The two all-to-alls of Ulysses for one group and sequence sharding.

    to_heads() turns tensors [batch, n_local, H, d] (each rank its sequence
    shard, all heads) into [batch, N, h_local, d] (the whole sequence for this
    rank's heads, `heads` = global [begin, end)); to_sequence() sends an
    output [batch, N, h_local, dv] (and its LSE [batch, h_local, N]) back as
    [batch, n_local, H, dv] ([batch, H, n_local]). Tensors travel as bytes, so
    every dtype works on every backend.
    """

    def __init__(self, ctx: _Group, shards: SequenceShards, heads: int):
        self._ctx = ctx
        self.shards = shards
        self.total_heads = heads
        self.heads = head_range(heads, ctx.rank, ctx.size)

    def _all_to_all(self, send_by_rank, recv_sizes, what):
        """send_by_rank[j]: the uint8 pieces for rank j; recv_sizes[i]: bytes from rank i."""
        torch, dist = _torch()
        pieces = [p for for_rank in send_by_rank for p in for_rank]
        send = torch.cat(pieces) if pieces else torch.empty(0, dtype=torch.uint8)
        recv = torch.empty(sum(recv_sizes), dtype=torch.uint8)
        send_sizes = [sum(int(p.numel()) for p in for_rank) for for_rank in send_by_rank]
        self._ctx.run(what, lambda: dist.all_to_all_single(
            recv, send, recv_sizes, send_sizes, group=self._ctx.group, async_op=True))
        return recv

    def to_heads(self, *tensors):
        """Sequence shards [B, n_local, H, d_i] -> head shards [B, N, h_local, d_i], contiguous."""
        torch, _ = _torch()
        world = self._ctx.size
        h0, h1 = self.heads
        send = []
        for j in range(world):
            j0, j1 = head_range(self.total_heads, j, world)
            send.append([_bytes(x[:, :, j0:j1]) for x in tensors])
        batch = int(tensors[0].shape[0])
        elem = tensors[0].element_size()
        dims = [int(x.shape[3]) for x in tensors]
        recv_sizes = [batch * self.shards.sizes[i] * (h1 - h0) * sum(dims) * elem
                      for i in range(world)]
        recv = self._all_to_all(send, recv_sizes, "all_to_all sequence -> heads")
        pieces = [[] for _ in tensors]
        offset = 0
        for i in range(world):
            for t, d in enumerate(dims):
                shape = (batch, self.shards.sizes[i], h1 - h0, d)
                count = batch * shape[1] * shape[2] * d * elem
                pieces[t].append(_from_bytes(recv[offset:offset + count], tensors[t].dtype, shape))
                offset += count
        return [torch.cat(p, dim=1) for p in pieces]

    def to_sequence(self, out, lse=None):
        """Head shards back: out [B, N, h_local, dv] -> [B, n_local, H, dv]; lse too when given."""
        torch, _ = _torch()
        world = self._ctx.size
        batch, dv, elem = int(out.shape[0]), int(out.shape[3]), out.element_size()
        send = []
        for i in range(world):
            b, e = self.shards.range(i)
            send.append([_bytes(out[:, b:e])] + ([_bytes(lse[:, :, b:e])] if lse is not None else []))
        n_local = self.shards.sizes[self._ctx.rank]
        recv_sizes = []
        for j in range(world):
            hj = head_range(self.total_heads, j, world)
            heads_j = hj[1] - hj[0]
            size = batch * n_local * heads_j * dv * elem
            recv_sizes.append(size + (batch * heads_j * n_local * 4 if lse is not None else 0))
        recv = self._all_to_all(send, recv_sizes, "all_to_all heads -> sequence")
        outs, lses, offset = [], [], 0
        for j in range(world):
            j0, j1 = head_range(self.total_heads, j, world)
            count = batch * n_local * (j1 - j0) * dv * elem
            outs.append(_from_bytes(recv[offset:offset + count], out.dtype,
                                    (batch, n_local, j1 - j0, dv)))
            offset += count
            if lse is not None:
                count = batch * (j1 - j0) * n_local * 4
                lses.append(_from_bytes(recv[offset:offset + count], torch.float32,
                                        (batch, j1 - j0, n_local)))
                offset += count
        return torch.cat(outs, dim=2), (torch.cat(lses, dim=1) if lse is not None else None)


def ulysses_attention(q, k, v, *, mask="dense", layout="bnhd", group=None, scale=None,
                      return_lse=False, threads=0, timeout=None):
    """Attention of this rank's sequence shard over the whole sequence, by all-to-all.

    q, k, v: torch CPU tensors in `layout` ("bnhd" [batch, n_local, heads, d]
    by default, "bhnd", "hnd"), this rank's contiguous shard of the sequence
    for every head; every rank passes the same batch, heads, dims, dtype,
    mask (a SPEC or tilesplash.Mask over the whole sequence) and scale.
    Heads need not divide by the group size: ranks run floor(H / P) or
    ceil(H / P) heads (head_range); shards need not be equal. threads: the
    kernel threads of this rank (0: all cores; give cores / ranks per machine).
    timeout: seconds any collective waits (default DEFAULT_TIMEOUT).

    Returns this rank's output shard in q's layout and dtype, and with
    return_lse=True also its float32 LSE [batch, heads, n_local]. Equal to
    tilesplash.attention on the gathered sequence: each head runs the same
    kernel over the same whole sequence, only on another rank.
    """
    who = "tilesplash.distributed.ulysses_attention"
    ctx, call, shards = _start(q, k, v, mask, layout, scale, group, timeout, who)
    threads = check_int(threads, "threads", 0)
    if ctx.size == 1 or shards.total == 0:
        return _single(call, return_lse, threads)
    exchange = UlyssesExchange(ctx, shards, call.heads)
    qh, kh, vh = exchange.to_heads(call.q, call.k, call.v)
    out, lse = attention(qh, kh, vh, mask=call.mask, layout="bnhd", scale=call.scale,
                         return_lse=True, threads=threads)
    out, lse = exchange.to_sequence(out, lse if return_lse else None)
    out = _from_bnhd(out, call.layout)
    return (out, _lse_from_bhn(lse, call.layout)) if return_lse else out


def _single(call: _Call, return_lse, threads):
    out, lse = attention(call.q, call.k, call.v, mask=call.mask, layout="bnhd", scale=call.scale,
                         return_lse=True, threads=threads)
    out = _from_bnhd(out, call.layout)
    return (out, _lse_from_bhn(lse, call.layout)) if return_lse else out


def ring_attention(q, k, v, *, mask="dense", layout="bnhd", group=None, scale=None,
                   return_lse=False, threads=0, timeout=None):
    """Attention of this rank's sequence shard over the whole sequence, by a K/V ring.

    Arguments and result as ulysses_attention. At step s, rank r holds the
    K/V shard of rank r - s and sends it on to rank r + 1 while it computes
    (isend / irecv overlap the kernel). The step runs this rank's queries
    against the visiting keys under the window of the global mask
    (attention(..., q_offset=, kv_offset=)); a step whose window keeps no
    pair (Mask.classify) is skipped, so under a causal mask rank r computes
    r + 1 of the P steps. The partial results merge exactly through their
    LSEs (merge_attention, float32 accumulator, steps in ring order, so the
    same inputs give the same bits). Any number of heads, including fewer
    than ranks; memory per rank is two K/V shards, not the whole sequence.
    bf16 / f16: each step's output is rounded to the dtype before the merge,
    so the result may differ from one process by a rounding of that dtype.
    """
    who = "tilesplash.distributed.ring_attention"
    ctx, call, shards = _start(q, k, v, mask, layout, scale, group, timeout, who)
    threads = check_int(threads, "threads", 0)
    if ctx.size == 1 or shards.total == 0:
        return _single(call, return_lse, threads)
    torch, dist = _torch()
    rank, world, total = ctx.rank, ctx.size, shards.total
    q0, q1 = shards.range(rank)
    kv_bytes = [call.batch * n * call.heads * (call.dim + call.v_dim) * call.k.element_size()
                for n in shards.sizes]
    current = torch.cat([_bytes(call.k), _bytes(call.v)])
    acc_out, acc_lse = None, None
    for step in range(world):
        src = (rank - step) % world
        works = []
        if step < world - 1:
            # Shard src goes on to rank + 1, which at this step receives exactly it;
            # shard src - 1 arrives from rank - 1 for the next step.
            incoming = torch.empty(kv_bytes[(src - 1) % world], dtype=torch.uint8)
            ops = []
            if kv_bytes[src]:
                ops.append(dist.P2POp(dist.isend, current, ctx.global_rank((rank + 1) % world),
                                      ctx.group))
            if incoming.numel():
                ops.append(dist.P2POp(dist.irecv, incoming, ctx.global_rank((rank - 1) % world),
                                      ctx.group))
            with ctx.errors(f"ring step {step + 1} of {world}: isend / irecv"):
                works = dist.batch_isend_irecv(ops) if ops else []
        k0, k1 = shards.range(src)
        if q1 > q0 and k1 > k0 and call.mask.classify((q0, q1), (k0, k1)) != 0:
            n_src = k1 - k0
            split = call.batch * n_src * call.heads * call.dim * call.k.element_size()
            ks = _from_bytes(current[:split], call.dtype, (call.batch, n_src, call.heads, call.dim))
            vs = _from_bytes(current[split:], call.dtype,
                             (call.batch, n_src, call.heads, call.v_dim))
            out, lse = attention(call.q, ks, vs, mask=call.mask, layout="bnhd", scale=call.scale,
                                 return_lse=True, threads=threads, q_offset=q0, kv_offset=k0,
                                 q_total=total, kv_total=total)
            if acc_out is None:
                acc_out, acc_lse = out, lse
            else:
                acc_out, acc_lse = merge_attention([acc_out, out], [acc_lse, lse], layout="bnhd",
                                                   dtype=torch.float32)
        with ctx.errors(f"ring step {step + 1} of {world}: K/V of rank {(src - 1) % world}"):
            ctx.wait(works)
        if step < world - 1:
            current = incoming
    n_local = q1 - q0
    if acc_out is None:  # no query of this shard keeps any key
        acc_out = torch.zeros((call.batch, n_local, call.heads, call.v_dim), dtype=call.dtype)
        acc_lse = torch.full((call.batch, call.heads, n_local), float("-inf"))
    out = _from_bnhd(acc_out.to(call.dtype), call.layout)
    return (out, _lse_from_bhn(acc_lse, call.layout)) if return_lse else out
