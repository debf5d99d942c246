"""Ulysses: one all-to-all turns sequence shards into head shards, a second
one turns the output back."""

from __future__ import annotations

import math

from .._attention import run_checked
from .._checks import check_int
from .call import Call, start
from .group import Group, torch_modules, workspace
from .._layouts import from_bnhd, lse_to_layout
from .shards import SequenceShards, head_range


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

    def __init__(self, ctx: Group, shards: SequenceShards, heads: int):
        self._ctx = ctx
        self.shards = shards
        self.total_heads = heads
        self.heads = head_range(heads, ctx.rank, ctx.size)

    def _head_counts(self):
        world = self._ctx.size
        return [b - a for a, b in (head_range(self.total_heads, j, world) for j in range(world))]

    def _all_to_all(self, recv, send, recv_sizes, send_sizes):
        """Issues one all_to_all_single; the caller waits for the returned work."""
        _, dist = torch_modules()
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
        torch, _ = torch_modules()
        world, rank = self._ctx.size, self._ctx.rank
        dtype, batch = tensors[0].dtype, int(tensors[0].shape[0])
        device = tensors[0].device
        counts = self._head_counts()
        n_local, h_local = self.shards.sizes[rank], counts[rank]
        outs, works, unpack = [], [], []
        with self._ctx.errors("all_to_all sequence -> heads"):
            for t, x in enumerate(tensors):
                d = int(x.shape[3])
                send_sizes = [batch * n_local * counts[j] * d for j in range(world)]
                recv_sizes = [batch * n * h_local * d for n in self.shards.sizes]
                send = workspace(f"heads_send{t}", sum(send_sizes), dtype, device)
                offset = 0
                for j in range(world):
                    j0, j1 = head_range(self.total_heads, j, world)
                    piece = x[:, :, j0:j1]
                    send[offset:offset + piece.numel()].view(piece.shape).copy_(piece)
                    offset += piece.numel()
                shape = (batch, self.shards.total, h_local, d)
                out = (workspace(f"heads_out{t}", math.prod(shape), dtype, device).view(shape)
                       if scratch else torch.empty(shape, dtype=dtype, device=device))
                recv = (out.view(-1) if batch == 1
                        else workspace(f"heads_recv{t}", sum(recv_sizes), dtype, device))
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
        torch, _ = torch_modules()
        world, rank = self._ctx.size, self._ctx.rank
        batch, dv, dtype, device = int(out.shape[0]), int(out.shape[3]), out.dtype, out.device
        # The float32 LSE rides in the output's dtype: as many elements as its bytes need.
        lse_factor = 4 // out.element_size()
        counts = self._head_counts()
        h_local, n_local = counts[rank], self.shards.sizes[rank]

        def lse_view(buffer, heads, n):
            return buffer.view(torch.float32).view(batch, heads, n)

        send_sizes = [batch * (e - b) * h_local * (dv + (lse_factor if lse is not None else 0))
                      for b, e in (self.shards.range(i) for i in range(world))]
        send = workspace("sequence_send", sum(send_sizes), dtype, device)
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
        recv = workspace("sequence_recv", sum(recv_sizes), dtype, device)
        self._ctx.run("all_to_all heads -> sequence",
                      lambda: self._all_to_all(recv, send, recv_sizes, send_sizes))
        result = torch.empty(batch, n_local, self.total_heads, dv, dtype=dtype, device=device)
        result_lse = (torch.empty(batch, self.total_heads, n_local, dtype=torch.float32,
                                  device=device) if lse is not None else None)
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
    torch, dist = torch_modules()
    who = "tilesplash.distributed.ulysses_exchange"
    ctx = Group(group, timeout, who)
    local_len = check_int(local_len, "local_len", 0)
    heads = check_int(heads, "heads", 1)
    mine = torch.tensor([local_len, heads], dtype=torch.int64, device=ctx.device)
    rows = [torch.empty_like(mine) for _ in range(ctx.size)]
    ctx.run("all_gather of the shard lengths",
            lambda: dist.all_gather(rows, mine, group=ctx.group, async_op=True))
    if len({int(x[1]) for x in rows}) > 1:
        raise ValueError(f"{who}: every rank must pass the same heads; by rank: "
                         f"{[int(x[1]) for x in rows]}")
    return UlyssesExchange(ctx, SequenceShards(tuple(int(x[0]) for x in rows)), heads)


def ulysses_attention(q, k, v, *, mask="dense", layout="bnhd", group=None, scale=None,
                      return_lse=False, threads=0, timeout=None, context=None, backend="auto"):
    """Attention of this rank's sequence shard over the whole sequence, by all-to-all.

    q, k, v: torch tensors in `layout` ("bnhd" [batch, n_local, heads, d]
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
    DEFAULT_TIMEOUT). backend: as tilesplash.attention's ("auto": the native
    kernel for CPU tensors, FlexAttention for CUDA tensors, which travel over
    NCCL; every rank resolves the same backend).

    Returns this rank's output shard in q's layout and dtype, and with
    return_lse=True also its float32 LSE [batch, heads, n_local]. Equal to
    tilesplash.attention on the gathered sequence: each head runs the same
    kernel over the same whole sequence, only on another rank.
    """
    arguments = dict(locals())  # every argument but the PER_RANK ones must agree across ranks
    who = "tilesplash.distributed.ulysses_attention"
    ctx, call, shards = start(q, k, v, mask, layout, scale, threads, group, timeout, who, context,
                              backend, arguments=arguments)
    threads = call.threads
    if ctx.size == 1 or shards.total == 0:
        return single(call, return_lse, threads, context)
    exchange = UlyssesExchange(ctx, shards, call.heads)
    qh, kh, vh = exchange.to_heads(call.q, call.k, call.v, scratch=True)
    out, lse = run_checked(call.backend, qh, kh, vh, call.mask, "bnhd", call.scale, threads,
                           context)
    out, lse = exchange.to_sequence(out, lse if return_lse else None)
    out = from_bnhd(out, call.layout)
    return (out, lse_to_layout(lse, call.layout)) if return_lse else out


def single(call: Call, return_lse, threads, context):
    out, lse = run_checked(call.backend, call.q, call.k, call.v, call.mask, "bnhd", call.scale,
                           threads, context)
    out = from_bnhd(out, call.layout)
    return (out, lse_to_layout(lse, call.layout)) if return_lse else out
