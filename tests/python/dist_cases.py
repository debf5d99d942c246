"""Rank-side code of the distributed tests (run inside dist_harness ranks) and the cases.

A case is the whole problem (mask, lengths, heads, layout, dtype, how the
sequence is split); make_inputs() builds the same full q, k, v from the
case's seed in the test process and in every rank, so each rank takes its
shard and the test compares the gathered shards against one process.
"""

from __future__ import annotations

import time

import numpy as np
import torch

import tilesplash
from tilesplash import distributed

VIDEO = "frames=4,height=3,width=5"
VIDEO_TEXT = "frames=4,height=3,width=5,text=7,text_at=before"

# name: (mask, N, heads, d, dv, layout, dtype, splits by world size or None for balanced)
CASES = {
    "dense": ("dense", 101, 4, 32, 32, "bnhd", "f32", None),
    "causal": ("causal", 101, 4, 32, 16, "bnhd", "f32", None),
    "causal_bhnd": ("causal", 96, 3, 16, 16, "bhnd", "f32", None),
    "local": ("local:left=17,right=9", 101, 2, 32, 32, "bnhd", "f32", None),
    "local_ragged_split": ("local:left=17,right=9", 101, 4, 32, 32, "bnhd", "f32",
                           {2: [70, 31], 3: [40, 0, 61]}),
    "spatial_sink": (f"spatial:{VIDEO},band=12,sink", 60, 4, 32, 32, "bnhd", "f32", None),
    "temporal_sink": (f"temporal:{VIDEO},band=5,sink", 60, 4, 32, 32, "bnhd", "f32", None),
    "spatial_text": (f"spatial:{VIDEO_TEXT},band=9,text_full", 67, 4, 32, 32, "hnd", "f32", None),
    "causal_bf16": ("causal", 77, 4, 32, 32, "bnhd", "bf16", None),
}


def splits(case, world):
    n, given = CASES[case][1], CASES[case][7]
    if given and world in given:
        return given[world]
    return [len(c) for c in np.array_split(np.arange(n), world)]


def make_inputs(case):
    """Full q, k, v as torch tensors in the case's layout and dtype."""
    _, n, heads, d, dv, layout, dtype, _ = CASES[case]
    gen = torch.Generator().manual_seed(sum(map(ord, case)))
    q, k = (torch.randn(1, n, heads, d, generator=gen) for _ in range(2))
    v = torch.randn(1, n, heads, dv, generator=gen)
    t = torch.bfloat16 if dtype == "bf16" else torch.float32
    return tuple(_layout(x, layout).to(t) for x in (q, k, v))


def _layout(x, layout):
    if layout == "bnhd":
        return x.contiguous()
    if layout == "bhnd":
        return x.transpose(1, 2).contiguous()
    return x[0].transpose(0, 1).contiguous()


def seq_axis(layout):
    return {"bnhd": 1, "bhnd": 2, "hnd": 1}[layout]


def shard(x, layout, sizes, rank):
    begin = sum(sizes[:rank])
    return x.narrow(seq_axis(layout), begin, sizes[rank])


def run_cases(rank, world, names):
    """Both schemes on every case: {(name, scheme): (out shard, lse shard)} as float32 numpy."""
    results = {}
    for name in names:
        mask, _, _, _, _, layout, _, _ = CASES[name]
        sizes = splits(name, world)
        q, k, v = (shard(x, layout, sizes, rank) for x in make_inputs(name))
        for scheme in ("ulysses", "ring"):
            fn = getattr(distributed, f"{scheme}_attention")
            out, lse = fn(q, k, v, mask=mask, layout=layout, return_lse=True, threads=1,
                          timeout=60)
            assert out.dtype == q.dtype and tuple(out.shape[:-1]) == tuple(q.shape[:-1])
            results[(name, scheme)] = (out.float().numpy(), lse.numpy())
    return results


def run_flex_cases(rank, world, names):
    """Both schemes on every case with backend="flex" (FlexAttention on the CPU,
    the LSE merges in torch ops): {(name, scheme): (out shard, lse shard)}."""
    results = {}
    for name in names:
        mask, _, _, _, _, layout, _, _ = CASES[name]
        sizes = splits(name, world)
        q, k, v = (shard(x, layout, sizes, rank) for x in make_inputs(name))
        for scheme in ("ulysses", "ring"):
            fn = getattr(distributed, f"{scheme}_attention")
            out, lse = fn(q, k, v, mask=mask, layout=layout, return_lse=True, timeout=60,
                          backend="flex")
            assert out.dtype == q.dtype and tuple(out.shape[:-1]) == tuple(q.shape[:-1])
            results[(name, scheme)] = (out.float().numpy(), lse.numpy())
    return results


def determinism(rank, world):
    """The same call twice gives the same bits (ring merge order, Ulysses exchange),
    and so does the call on this rank's own 2-thread ThreadingContext."""
    q, k, v = (shard(x, "bnhd", splits("causal", world), rank) for x in make_inputs("causal"))
    context = tilesplash.ThreadingContext(2)
    same = []
    for fn in (distributed.ulysses_attention, distributed.ring_attention):
        a = fn(q, k, v, mask="causal", threads=1, timeout=60)
        b = fn(q, k, v, mask="causal", threads=1, timeout=60)
        c = fn(q, k, v, mask="causal", context=context, timeout=60)
        same.append(bool(torch.equal(a, b)) and bool(torch.equal(a, c)))
    return same


def ring_skips(rank, world):
    """Which steps ran under a causal mask, seen through the plan cache's misses
    (a skipped step builds no plan), and which transfers were posted."""
    import torch.distributed as dist

    tilesplash.clear_plan_cache()
    q, k, v = (shard(x, "bnhd", splits("causal", world), rank) for x in make_inputs("causal"))
    posted = []
    original = dist.batch_isend_irecv

    def counting(ops):
        posted.extend("send" if op.op is dist.isend else "recv" for op in ops)
        return original(ops)

    dist.batch_isend_irecv = counting
    try:
        before = tilesplash.plan_cache_stats()["misses"]
        distributed.ring_attention(q, k, v, mask="causal", threads=1, timeout=60)
        return tilesplash.plan_cache_stats()["misses"] - before, sorted(posted)
    finally:
        dist.batch_isend_irecv = original


def one_rank_raises(rank, world, scheme, exits):
    """Rank 1 raises before the call (and exits at once, or stays alive without
    calling); the others call with a short timeout. Returns (error type, message, seconds)."""
    import torch.distributed as dist

    q, k, v = (shard(x, "bnhd", splits("dense", world), rank) for x in make_inputs("dense"))
    # Every rank finishes gloo's connection set-up first: a rank leaving while
    # the others still connect makes their init fail instead (seen under load).
    dist.barrier()
    if rank == 1:
        if not exits:
            time.sleep(4)  # alive, its sockets open, past rank 0's timeout
        raise RuntimeError("rank 1 failed before the call")
    start = time.monotonic()
    try:
        getattr(distributed, f"{scheme}_attention")(q, k, v, threads=1, timeout=2)
    except Exception as error:  # the point: an error, not a hang
        return type(error).__name__, str(error), time.monotonic() - start
    return None, "no error", time.monotonic() - start


def bad_argument_on_one_rank(rank, world, scheme, what):
    """One rank passes a bad or disagreeing argument: every rank raises, none hangs."""
    q, k, v = (shard(x, "bnhd", splits("dense", world), rank) for x in make_inputs("dense"))
    mask, context = "dense", None
    if rank == world - 1:
        if what == "context":
            context = 2
        elif what == "dtype":
            q, k, v = q.double(), k.double(), v.double()
        elif what == "mask":
            mask = "causal"
        elif what == "heads":
            q, k, v = q[:, :, :3], k[:, :, :3], v[:, :, :3]
        elif what == "nan":
            q = q.clone()
            q[0, 0, 0, 0] = float("nan")
    if what == "video_length":
        mask = f"spatial:{VIDEO},band=4"  # 60 tokens, but the shards add up to 101
    try:
        getattr(distributed, f"{scheme}_attention")(q, k, v, mask=mask, threads=1, timeout=20,
                                                     context=context)
    except Exception as error:
        return type(error).__name__, str(error)
    return None, "no error"



def subgroup(rank, world):
    """Ranks 0 and 2 of 3 run both schemes in a subgroup; rank 1 stays out.
    Ring peers are the subgroup's neighbours, addressed by their global ranks."""
    import torch.distributed as dist

    group = dist.new_group([0, 2])
    if rank == 1:
        return None
    sub_rank = dist.get_rank(group)
    sizes = splits("causal", 2)
    q, k, v = (shard(x, "bnhd", sizes, sub_rank) for x in make_inputs("causal"))
    results = {}
    for scheme in ("ulysses", "ring"):
        out, lse = getattr(distributed, f"{scheme}_attention")(
            q, k, v, mask="causal", group=group, return_lse=True, threads=1, timeout=60)
        results[scheme] = (out.numpy(), lse.numpy())
    return results


def exchange_round_trip(rank, world):
    """ulysses_exchange: to_heads then to_sequence gives the shard back, and the
    head shard holds the global heads head_range names, over the whole sequence."""
    q, k, v = (shard(x, "bnhd", splits("local_ragged_split", world), rank)
               for x in make_inputs("local_ragged_split"))
    full_q = make_inputs("local_ragged_split")[0]
    exchange = distributed.ulysses_exchange(q.shape[1], q.shape[2], timeout=60)
    qh, kh, vh = exchange.to_heads(q, k, v)
    h0, h1 = exchange.heads
    # An LSE that names its global head and token: 1000 * head + token.
    heads = torch.arange(h0, h1, dtype=torch.float32)[None, :, None]
    tokens = torch.arange(exchange.shards.total, dtype=torch.float32)[None, None, :]
    back, lse_back = exchange.to_sequence(qh, 1000 * heads + tokens)
    t0, t1 = exchange.shards.range(rank)
    expected = (1000 * torch.arange(q.shape[2], dtype=torch.float32)[None, :, None]
                + torch.arange(t0, t1, dtype=torch.float32)[None, None, :])
    return (exchange.heads, bool(torch.equal(qh, full_q[:, :, h0:h1])), bool(torch.equal(back, q)),
            bool(torch.equal(lse_back, expected)))
