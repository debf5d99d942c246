"""Ring attention: K/V shards travel around the ring, partial results merge
through their LSEs."""

from __future__ import annotations

from .._attention import run_checked
from .call import start
from .group import torch_modules, workspace
from .._layouts import from_bnhd, lse_to_layout
from .ulysses import single


def ring_attention(q, k, v, *, mask="dense", layout="bnhd", group=None, scale=None,
                   return_lse=False, threads=0, timeout=None, context=None, backend="auto"):
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
    With the flex backend (CUDA tensors over NCCL, or backend="flex") the
    steps run FlexAttention and merge in float32 torch ops on the device.
    """
    arguments = dict(locals())  # every argument but the PER_RANK ones must agree across ranks
    who = "tilesplash.distributed.ring_attention"
    ctx, call, shards = start(q, k, v, mask, layout, scale, threads, group, timeout, who, context,
                              backend, arguments=arguments)
    threads = call.threads
    if ctx.size == 1 or shards.total == 0:
        return single(call, return_lse, threads, context)
    torch, dist = torch_modules()
    rank, world, total = ctx.rank, ctx.size, shards.total
    q0, q1 = shards.range(rank)

    def k_part(n):  # K first, then V, in one buffer of the inputs' dtype
        return call.batch * n * call.heads * call.dim

    def needs(dst, src):  # does rank dst's window over rank src's keys keep a pair?
        (a, b), (c, d) = shards.range(dst), shards.range(src)
        return b > a and d > c and call.mask.classify((a, b), (c, d)) != 0

    kv_size = [call.batch * n * call.heads * (call.dim + call.v_dim) for n in shards.sizes]
    device = call.q.device
    own = workspace("ring_own", kv_size[rank], call.dtype, device)
    own[:k_part(q1 - q0)].view(call.k.shape).copy_(call.k)
    own[k_part(q1 - q0):].view(call.v.shape).copy_(call.v)
    # Two receive buffers take turns: step s computes on one while step s + 1 fills the other.
    buffers = [workspace(f"ring{i}", max(kv_size), call.dtype, device) for i in range(2)]

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
        out, lse = run_checked(call.backend, call.q, ks, vs, call.mask, "bnhd", call.scale,
                               threads, context, q0, k0, total, total)
        if acc_out is None:
            acc_out, acc_lse = out, lse
        else:
            acc_out, acc_lse = call.backend.merge(acc_out, acc_lse, out, lse, "bnhd")
    n_local = q1 - q0
    if acc_out is None:  # no query of this shard keeps any key
        acc_out = torch.zeros((call.batch, n_local, call.heads, call.v_dim), dtype=call.dtype,
                              device=device)
        acc_lse = torch.full((call.batch, call.heads, n_local), float("-inf"), device=device)
    out = from_bnhd(acc_out.to(call.dtype), call.layout)
    return (out, lse_to_layout(acc_lse, call.layout)) if return_lse else out
