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
routing, a diffusers processor) can run on head shards: ulysses_exchange()
gives the exchange of one sharding (to_heads / to_sequence), head_range()
maps a rank's local heads to global head indices, SequenceShards says where
each rank's tokens lie.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import struct
import threading
from dataclasses import dataclass

from ._attention import attention
from ._mask import as_mask
from ._merge import merge_attention
from ._threading import check_context
from ._tensors import MAX_THREADS, check_int, check_layout, check_qkv, check_scale

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
    masks) must be keyed on to match one process. Needs heads >= 0, world >= 1
    and 0 <= rank < world.
    """
    world = check_int(world, "world", 1)
    rank = check_int(rank, "rank", 0, maximum=world - 1)
    heads = check_int(heads, "heads", 0)
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
            # A failed exchange may still hold the buffers; later calls get new ones.
            release_buffers()
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


_buffers = threading.local()


def _workspace(name: str, numel: int, dtype):
    """A grow-only buffer of this thread, kept between calls: a model calls the
    exchange every layer with the same shapes, and fresh memory costs a page
    fault per 4 KiB on first touch (several times a copy, measured)."""
    torch, _ = _torch()
    store = _buffers.__dict__.setdefault("store", {})
    buffer = store.get((name, dtype))
    if buffer is None or buffer.numel() < numel:
        store[(name, dtype)] = buffer = torch.empty(max(numel, 1), dtype=dtype)
    return buffer[:numel]


def release_buffers() -> None:
    """Frees the send / receive buffers this thread keeps between calls."""
    _buffers.__dict__.pop("store", None)


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
    threads: int


def _check_local(q, k, v, mask, layout, scale, threads, who) -> _Call:
    torch, _ = _torch()
    layout = check_layout(layout)
    for name, x in (("q", q), ("k", k), ("v", v)):
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name}: {who} needs torch tensors (it runs on torch.distributed), "
                            f"got {type(x).__module__}.{type(x).__qualname__}")
    check_qkv(q, k, v, layout)
    mask = as_mask(mask)
    scale = check_scale(scale)
    threads = check_int(threads, "threads", 0, maximum=MAX_THREADS)
    qb, kb, vb = (_as_bnhd(x, layout) for x in (q, k, v))
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
    return _Call(qb, kb, vb, layout, mask, scale, int(qb.shape[0]), int(qb.shape[2]),
                 int(qb.shape[1]), int(qb.shape[3]), int(vb.shape[3]), q.dtype, threads)


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


def _start(q, k, v, mask, layout, scale, threads, group, timeout, who, context=None):
    ctx = _Group(group, timeout, who)
    local, error = None, None
    try:
        check_context(context)
        local = _check_local(q, k, v, mask, layout, scale, threads, who)
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
    [batch, n_local, H, dv] ([batch, H, n_local]). Each tensor is copied once
    into the send buffer and once out of the receive buffer; the buffers have
    the tensors' dtype (the LSE travels reinterpreted as that dtype).
    """

    def __init__(self, ctx: _Group, shards: SequenceShards, heads: int):
        self._ctx = ctx
        self.shards = shards
        self.total_heads = heads
        self.heads = head_range(heads, ctx.rank, ctx.size)

    def _head_counts(self):
        world = self._ctx.size
        return [b - a for a, b in (head_range(self.total_heads, j, world) for j in range(world))]

    def _all_to_all(self, recv, send, recv_sizes, send_sizes):
        """Issues one all_to_all_single; the caller waits for the returned work."""
        _, dist = _torch()
        return dist.all_to_all_single(recv, send, recv_sizes, send_sizes, group=self._ctx.group,
                                      async_op=True)

    def to_heads(self, *tensors, scratch=False):
        """Sequence shards [B, n_local, H, d_i] -> head shards [B, N, h_local, d_i], contiguous.

        One all-to-all per tensor, all in flight together (packing the next
        tensor overlaps sending the previous one). With batch 1 the sources'
        pieces arrive back to back in the result itself, with no copy after.
        scratch=True returns views of this thread's reused buffers, valid
        until its next exchange (for callers that consume them at once).
        """
        torch, _ = _torch()
        world, rank = self._ctx.size, self._ctx.rank
        dtype, batch = tensors[0].dtype, int(tensors[0].shape[0])
        counts = self._head_counts()
        n_local, h_local = self.shards.sizes[rank], counts[rank]
        outs, works, unpack = [], [], []
        with self._ctx.errors("all_to_all sequence -> heads"):
            for t, x in enumerate(tensors):
                d = int(x.shape[3])
                send_sizes = [batch * n_local * counts[j] * d for j in range(world)]
                recv_sizes = [batch * n * h_local * d for n in self.shards.sizes]
                send = _workspace(f"heads_send{t}", sum(send_sizes), dtype)
                offset = 0
                for j in range(world):
                    j0, j1 = head_range(self.total_heads, j, world)
                    piece = x[:, :, j0:j1]
                    send[offset:offset + piece.numel()].view(piece.shape).copy_(piece)
                    offset += piece.numel()
                shape = (batch, self.shards.total, h_local, d)
                out = (_workspace(f"heads_out{t}", math.prod(shape), dtype).view(shape) if scratch
                       else torch.empty(shape, dtype=dtype))
                recv = (out.view(-1) if batch == 1
                        else _workspace(f"heads_recv{t}", sum(recv_sizes), dtype))
                works.append(self._all_to_all(recv, send, recv_sizes, send_sizes))
                outs.append(out)
                if batch != 1:
                    unpack.append((out, recv, d))
            self._ctx.wait(works)
        for out, recv, d in unpack:
            offset = 0
            for i in range(world):
                b, e = self.shards.range(i)
                count = batch * (e - b) * h_local * d
                out[:, b:e].copy_(recv[offset:offset + count].view(batch, e - b, h_local, d))
                offset += count
        return outs

    def to_sequence(self, out, lse=None):
        """Head shards back: out [B, N, h_local, dv] -> [B, n_local, H, dv]; lse too when given."""
        torch, _ = _torch()
        world, rank = self._ctx.size, self._ctx.rank
        batch, dv, dtype = int(out.shape[0]), int(out.shape[3]), out.dtype
        # The float32 LSE rides in the output's dtype: as many elements as its bytes need.
        lse_factor = 4 // out.element_size()
        counts = self._head_counts()
        h_local, n_local = counts[rank], self.shards.sizes[rank]

        def lse_view(buffer, heads, n):
            return buffer.view(torch.float32).view(batch, heads, n)

        send_sizes = [batch * (e - b) * h_local * (dv + (lse_factor if lse is not None else 0))
                      for b, e in (self.shards.range(i) for i in range(world))]
        send = _workspace("sequence_send", sum(send_sizes), dtype)
        offset = 0
        for i in range(world):
            b, e = self.shards.range(i)
            count = batch * (e - b) * h_local * dv
            send[offset:offset + count].view(batch, e - b, h_local, dv).copy_(out[:, b:e])
            offset += count
            if lse is not None:
                count = batch * h_local * (e - b) * lse_factor
                lse_view(send[offset:offset + count], h_local, e - b).copy_(lse[:, :, b:e])
                offset += count
        recv_sizes = [batch * n_local * counts[j] * (dv + (lse_factor if lse is not None else 0))
                      for j in range(world)]
        recv = _workspace("sequence_recv", sum(recv_sizes), dtype)
        self._ctx.run("all_to_all heads -> sequence",
                      lambda: self._all_to_all(recv, send, recv_sizes, send_sizes))
        result = torch.empty(batch, n_local, self.total_heads, dv, dtype=dtype)
        result_lse = (torch.empty(batch, self.total_heads, n_local, dtype=torch.float32)
                      if lse is not None else None)
        offset = 0
        for j in range(world):
            j0, j1 = head_range(self.total_heads, j, world)
            count = batch * n_local * (j1 - j0) * dv
            result[:, :, j0:j1].copy_(recv[offset:offset + count].view(batch, n_local, j1 - j0, dv))
            offset += count
            if lse is not None:
                count = batch * (j1 - j0) * n_local * lse_factor
                result_lse[:, j0:j1].copy_(lse_view(recv[offset:offset + count], j1 - j0, n_local))
                offset += count
        return result, result_lse


def ulysses_exchange(local_len: int, heads: int, *, group=None, timeout=None) -> UlyssesExchange:
    """The Ulysses exchange of this rank's shard of `local_len` tokens, `heads` heads.

    Every rank of the group calls it (one all_gather of the shard lengths;
    all ranks must give the same `heads`). For code that runs per-head work
    other than plain attention over the whole sequence, with the same
    sharding as ulysses_attention: exchange.to_heads(q, k, v), work on
    global heads exchange.heads, exchange.to_sequence(out).
    """
    torch, dist = _torch()
    who = "tilesplash.distributed.ulysses_exchange"
    ctx = _Group(group, timeout, who)
    local_len = check_int(local_len, "local_len", 0)
    heads = check_int(heads, "heads", 1)
    mine = torch.tensor([local_len, heads], dtype=torch.int64)
    rows = [torch.empty_like(mine) for _ in range(ctx.size)]
    ctx.run("all_gather of the shard lengths",
            lambda: dist.all_gather(rows, mine, group=ctx.group, async_op=True))
    if len({int(x[1]) for x in rows}) > 1:
        raise ValueError(f"{who}: every rank must pass the same heads; by rank: "
                         f"{[int(x[1]) for x in rows]}")
    return UlyssesExchange(ctx, SequenceShards(tuple(int(x[0]) for x in rows)), heads)


def ulysses_attention(q, k, v, *, mask="dense", layout="bnhd", group=None, scale=None,
                      return_lse=False, threads=0, timeout=None, context=None):
    """Attention of this rank's sequence shard over the whole sequence, by all-to-all.

    q, k, v: torch CPU tensors in `layout` ("bnhd" [batch, n_local, heads, d]
    by default, "bhnd", "hnd"), this rank's contiguous shard of the sequence
    for every head; every rank passes the same batch, heads, dims, dtype,
    mask (a SPEC or tilesplash.Mask over the whole sequence) and scale.
    Heads need not divide by the group size: ranks run floor(H / P) or
    ceil(H / P) heads (head_range); shards need not be equal. threads: the
    kernel threads of this rank (0: all cores, or the context's count; give
    cores / ranks per machine). context: a tilesplash.ThreadingContext this
    rank's kernel runs on (None: the calling thread's own runner and workers);
    with pin=True and first_cpu = rank * threads, ranks of one machine keep to
    their own cores. timeout: seconds any collective waits (default
    DEFAULT_TIMEOUT).

    Returns this rank's output shard in q's layout and dtype, and with
    return_lse=True also its float32 LSE [batch, heads, n_local]. Equal to
    tilesplash.attention on the gathered sequence: each head runs the same
    kernel over the same whole sequence, only on another rank.
    """
    who = "tilesplash.distributed.ulysses_attention"
    ctx, call, shards = _start(q, k, v, mask, layout, scale, threads, group, timeout, who, context)
    threads = call.threads
    if ctx.size == 1 or shards.total == 0:
        return _single(call, return_lse, threads, context)
    exchange = UlyssesExchange(ctx, shards, call.heads)
    qh, kh, vh = exchange.to_heads(call.q, call.k, call.v, scratch=True)
    out, lse = attention(qh, kh, vh, mask=call.mask, layout="bnhd", scale=call.scale,
                         return_lse=True, threads=threads, context=context)
    out, lse = exchange.to_sequence(out, lse if return_lse else None)
    out = _from_bnhd(out, call.layout)
    return (out, _lse_from_bhn(lse, call.layout)) if return_lse else out


def _single(call: _Call, return_lse, threads, context):
    out, lse = attention(call.q, call.k, call.v, mask=call.mask, layout="bnhd", scale=call.scale,
                         return_lse=True, threads=threads, context=context)
    out = _from_bnhd(out, call.layout)
    return (out, _lse_from_bhn(lse, call.layout)) if return_lse else out


def ring_attention(q, k, v, *, mask="dense", layout="bnhd", group=None, scale=None,
                   return_lse=False, threads=0, timeout=None, context=None):
    """Attention of this rank's sequence shard over the whole sequence, by rotating K/V.

    Arguments and result as ulysses_attention. At step s, rank r runs its
    queries against the K/V shard of rank r - s under the window of the
    global mask (attention(..., q_offset=, kv_offset=)). That shard is sent
    to it by its owner while step s - 1 computes (isend / irecv overlap the
    kernel), and only when the window keeps a pair (Mask.classify, known to
    sender and receiver alike): under a causal mask rank r computes and
    receives r of the P - 1 other shards, under a band only the shards the
    band reaches travel. The partial results merge exactly through their
    LSEs (merge_attention, float32 accumulator, steps in order, so the same
    inputs give the same bits). Any number of heads, including fewer than
    ranks; memory per rank is three K/V shards, not the whole sequence.
    bf16 / f16: each step's output is rounded to the dtype before the merge,
    so the result may differ from one process by a rounding of that dtype.
    """
    who = "tilesplash.distributed.ring_attention"
    ctx, call, shards = _start(q, k, v, mask, layout, scale, threads, group, timeout, who, context)
    threads = call.threads
    if ctx.size == 1 or shards.total == 0:
        return _single(call, return_lse, threads, context)
    torch, dist = _torch()
    rank, world, total = ctx.rank, ctx.size, shards.total
    q0, q1 = shards.range(rank)

    def k_part(n):  # K first, then V, in one buffer of the inputs' dtype
        return call.batch * n * call.heads * call.dim

    def needs(dst, src):  # does rank dst's window over rank src's keys keep a pair?
        (a, b), (c, d) = shards.range(dst), shards.range(src)
        return b > a and d > c and call.mask.classify((a, b), (c, d)) != 0

    kv_size = [call.batch * n * call.heads * (call.dim + call.v_dim) for n in shards.sizes]
    own = _workspace("ring_own", kv_size[rank], call.dtype)
    own[:k_part(q1 - q0)].view(call.k.shape).copy_(call.k)
    own[k_part(q1 - q0):].view(call.v.shape).copy_(call.v)
    # Two receive buffers take turns: step s computes on one while step s + 1 fills the other.
    buffers = [_workspace(f"ring{i}", max(kv_size), call.dtype) for i in range(2)]

    def post(step):
        """Issues step's transfers; returns (works, the buffer that will hold rank - step's K/V)."""
        if step >= world:
            return [], None
        dst, src = (rank + step) % world, (rank - step) % world
        ops, incoming = [], None
        if needs(dst, rank):
            ops.append(dist.P2POp(dist.isend, own, ctx.global_rank(dst), ctx.group))
        if needs(rank, src):
            incoming = buffers[step % 2][:kv_size[src]]
            ops.append(dist.P2POp(dist.irecv, incoming, ctx.global_rank(src), ctx.group))
        with ctx.errors(f"step {step} of {world - 1}: isend / irecv"):
            return (dist.batch_isend_irecv(ops) if ops else []), incoming

    acc_out, acc_lse = None, None
    pending = post(1)
    for step in range(world):
        src = (rank - step) % world
        if step == 0:
            current = own if needs(rank, rank) else None
        else:
            works, current = pending
            with ctx.errors(f"step {step} of {world - 1}: K/V of rank {src}"):
                ctx.wait(works)
            pending = post(step + 1)
        if current is None:  # this window keeps no pair: nothing was sent, nothing to run
            continue
        k0, k1 = shards.range(src)
        ks = current[:k_part(k1 - k0)].view(call.batch, k1 - k0, call.heads, call.dim)
        vs = current[k_part(k1 - k0):].view(call.batch, k1 - k0, call.heads, call.v_dim)
        out, lse = attention(call.q, ks, vs, mask=call.mask, layout="bnhd", scale=call.scale,
                             return_lse=True, threads=threads, q_offset=q0, kv_offset=k0,
                             q_total=total, kv_total=total, context=context)
        if acc_out is None:
            acc_out, acc_lse = out, lse
        else:
            acc_out, acc_lse = merge_attention([acc_out, out], [acc_lse, lse], layout="bnhd",
                                               dtype=torch.float32)
    n_local = q1 - q0
    if acc_out is None:  # no query of this shard keeps any key
        acc_out = torch.zeros((call.batch, n_local, call.heads, call.v_dim), dtype=call.dtype)
        acc_lse = torch.full((call.batch, call.heads, n_local), float("-inf"))
    out = _from_bnhd(acc_out.to(call.dtype), call.layout)
    return (out, _lse_from_bhn(acc_lse, call.layout)) if return_lse else out
