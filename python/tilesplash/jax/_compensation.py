"""Compensation of skipped tiles in jax.numpy: the JAX bridge's compensate=True.

The same term as the native pass (src/compensation/compensate.cc) and the flex
backend's (_torch_video/compensation.py): every key tile t that a query tile's
plan does not visit (neither full nor partial), holding n_t keys with mean key
k̄_t and mean value v̄_t, adds n_t * exp(scale * q . k̄_t) * v̄_t to the row's
softmax numerator and n_t * exp(scale * q . k̄_t) to its denominator, merged
into Splash's (out, lse) through the LSE (Splash's lse is the natural
log-sum-exp of the scores it was given, m + log(l), and tilesplash hands it
q already scaled: the same convention as the term here). Tiles are the plan's
own (block_q x block_kv, in the order the call runs), so callers pass q, k, v
in run order.

As native:
- a tile's mean is over the keys the filter keeps (the exactly-attended sink
  segment left out); a tile with no such key is never compensated, and the
  ragged last tile averages the keys it has;
- a q-block that skips no pooled tile keeps the kernel's bits (a plan that
  skips nothing gives exactly the uncompensated output);
- a row with no kept key and nothing skipped stays out 0, lse -inf.

Everything is traceable (jit, scan; the visited tables are device arrays
built once on the host) and no array is N x N: scores are [rows, N / block_kv],
computed a group of q-blocks at a time under lax.map. Cost: one pass over K
and V (the means) and rows x tiles x (d + dv) multiply-adds, about 1 / block_kv
of dense attention's work.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._tile_tables import EMPTY, TileTable
from ._plans import mask_tiles

_CHUNK_ELEMENTS = 1 << 24
"""Score elements ([q-blocks, heads, block_q, tiles]) of one lax.map step."""

_HIGHEST = jax.lax.Precision.HIGHEST


def visited_tiles(table: TileTable) -> np.ndarray:
    """bool [q_blocks, kv_blocks]: the tiles a plan visits (full or partial)."""
    return table.matrix() != EMPTY


def skips_any(visited: np.ndarray, keep: np.ndarray | None, kv_len: int, block_kv: int) -> bool:
    """Whether some q-block of `visited` ([.., Q, T]) skips a tile holding a pooled key
    (keep: bool [.., kv_len] or None for every key): on the host, once per plan."""
    tiles = visited.shape[-1]
    if keep is None:
        keep = np.ones(kv_len, bool)
    pooled = np.pad(keep, [(0, 0)] * (keep.ndim - 1) + [(0, tiles * block_kv - kv_len)])
    pooled = pooled.reshape(*keep.shape[:-1], tiles, block_kv).any(axis=-1)
    return bool((~visited & pooled[..., None, :]).any())


def pooled_tiles(k, v, block_kv: int, keep=None):
    """(mean keys float32 [H, T, d], mean values float32 [H, T, dv], log of each tile's
    pooled key count float32 [H | 1, T], -inf for a tile with none) of k, v [H, N, .]
    in run order, T = ceil(N / block_kv). keep: None (every key), bool [N] or [H, N].

    The sums run in float32 as deviations from each tile's first key, so a tile of
    one repeated key pools to exactly that key (native sums in double)."""
    heads, n, _ = k.shape
    tiles = -(-n // block_kv)
    pad = tiles * block_kv - n
    weight = jnp.ones((1, n), jnp.float32) if keep is None \
        else jnp.reshape(keep, (-1, n)).astype(jnp.float32)
    weight = jnp.pad(weight, ((0, 0), (0, pad))).reshape(-1, tiles, block_kv)
    counts = weight.sum(axis=2)  # integers, exact in float32

    def means(x):
        dim = x.shape[2]
        x = jnp.pad(x.astype(jnp.float32), ((0, 0), (0, pad), (0, 0)))
        x = x.reshape(heads, tiles, block_kv, dim)
        shift = x[:, :, :1]
        sums = jnp.einsum("htb,htbd->htd", jnp.broadcast_to(weight, (heads, tiles, block_kv)),
                          x - shift, precision=_HIGHEST)
        return shift[:, :, 0] + sums / jnp.maximum(counts, 1.0)[..., None]

    log_count = jnp.where(counts > 0, jnp.log(jnp.maximum(counts, 1.0)), -jnp.inf)
    return means(k), means(v), log_count


def compensate(q, out, lse, pooled, visited, scale: float, block_q: int):
    """(out in out's dtype, lse float32) with every skipped pooled tile merged in.

    q [H, N, d] (unscaled, run order), out [H, N, dv], lse [H, N] (-inf for rows
    that keep no key); pooled: pooled_tiles() of the call's keys; visited: bool
    [H | 1, Q, T], Q = ceil(N / block_q). Rows of q-blocks that skip no pooled tile
    keep out's and lse's bits."""
    keys, values, log_count = pooled
    heads, n, d = q.shape
    dv = out.shape[2]
    q_blocks, tiles = visited.shape[1], keys.shape[1]
    group = max(1, min(q_blocks, _CHUNK_ELEMENTS // max(1, heads * block_q * max(tiles, dv))))
    chunks = -(-q_blocks // group)
    rows = chunks * group * block_q
    skip = ~jnp.broadcast_to(visited, (heads, q_blocks, tiles)) & \
        jnp.isfinite(log_count)[:, None, :]
    changed = skip.any(axis=-1)  # [H, Q]

    def blocked(x, fill):
        # [H, N, ..] -> [chunks, group, H, block_q, ..]: a lax.map step is `group` q-blocks.
        x = jnp.pad(x, ((0, 0), (0, rows - n)) + ((0, 0),) * (x.ndim - 2), constant_values=fill)
        x = jnp.moveaxis(x.reshape(heads, chunks * group, block_q, *x.shape[2:]), 1, 0)
        return x.reshape(chunks, group, heads, block_q, *x.shape[3:])

    def per_block(x):  # [H, Q, ..] -> [chunks, group, H, ..]
        x = jnp.pad(x, ((0, 0), (0, chunks * group - q_blocks)) + ((0, 0),) * (x.ndim - 2))
        return jnp.moveaxis(x, 1, 0).reshape(chunks, group, heads, *x.shape[2:])

    bias = jnp.broadcast_to(log_count, (heads, tiles))[None, :, None, :]

    def step(args):
        qc, oc, lc, sk, ch = args
        scores = jnp.einsum("ghrd,htd->ghrt", qc.astype(jnp.float32), keys,
                            precision=_HIGHEST) * scale
        scores = jnp.where(sk[:, :, None, :], scores + bias, -jnp.inf)
        top = jnp.maximum(lc, scores.max(axis=-1))
        top = jnp.where(jnp.isfinite(top), top, 0.0)
        exact = jnp.exp(lc - top)  # 0 for a row with no kept key
        weights = jnp.exp(scores - top[..., None])  # 0 for a visited or empty tile
        total = exact + weights.sum(axis=-1)
        merged = (exact[..., None] * oc.astype(jnp.float32)
                  + jnp.einsum("ghrt,htv->ghrv", weights, values, precision=_HIGHEST)) \
            / jnp.where(total > 0, total, 1.0)[..., None]
        merged_lse = top + jnp.log(total)
        ch = ch[:, :, None]
        return (jnp.where(ch[..., None], merged.astype(oc.dtype), oc),
                jnp.where(ch, merged_lse, lc))

    outs, lses = jax.lax.map(step, (blocked(q, 0), blocked(out, 0), blocked(lse, -jnp.inf),
                                    per_block(skip), per_block(changed)))

    def unblocked(x):
        x = jnp.moveaxis(x.reshape(chunks * group, heads, block_q, *x.shape[4:]), 0, 1)
        return x.reshape(heads, rows, *x.shape[3:])[:, :n]

    return unblocked(outs), unblocked(lses)


class CandidateTables(NamedTuple):
    """The host's compensation tables of a routed layer's candidates (each as its run
    runs it: run order, run-order mask, key segment). visited: bool [C, Q, T] of each
    candidate's main plan (sequence keys only); keep: bool [C, N], the run-order keys
    the means pool (the sink segment's keys out); order: int64 [C, N], run position
    r holds original row order[c, r]; skips: bool [C], whether it skips a pooled tile."""

    visited: np.ndarray
    keep: np.ndarray
    order: np.ndarray
    skips: np.ndarray


def candidate_tables(runs, n: int, block_q: int, block_kv: int) -> CandidateTables:
    """From VideoAttention.candidate_run() dicts: each run's main plan (its run-order
    mask over the n sequence keys, as Splash runs it) in block_q x block_kv tiles."""
    visited = np.stack([visited_tiles(mask_tiles(run["run_mask"], n, n, block_q, block_kv))
                        for run in runs])
    keep = np.ones((len(runs), n), bool)
    orders = np.stack([np.arange(n) if run["order"] is None else np.asarray(run["order"])
                       for run in runs]).astype(np.int64)
    for c, run in enumerate(runs):
        extra = run["extra"]
        if extra:  # attended exactly in its own segment: never counted twice
            keep[c, extra["first"] + extra["stride"] * np.arange(extra["count"])] = False
    skips = np.array([skips_any(visited[c], keep[c], n, block_kv) for c in range(len(runs))])
    return CandidateTables(visited, keep, orders, skips)


def sampled_terms(q, k, v, rows, tables: dict, *, block_q: int, block_kv: int, scale: float):
    """What compensation adds to the router's sampled rows, every head and candidate:
    the skipped tiles of the plan each candidate runs for the row's q-block (its run
    position // block_q), pooled as that candidate's run pools them, in one softmax
    state. Returns (lse float32 [H, C, r], -inf where the candidate skips nothing for
    the row; out float32 [H, C, r, dv], normalised). q, k, v: [H, N, .] original
    order; rows: int32 [r]; tables: device arrays "visited" [C, Q, T], "position"
    [C, N] (run position of each original row), "pool_order" [P, N], "pool_keep"
    [P, N], "pool_of" [C] (candidates sharing an order and a filter pool once).
    Work: rows x candidates x tiles x (d + dv), plus a pooling pass per pool."""
    pooled = [pooled_tiles(jnp.take(k, order, axis=1), jnp.take(v, order, axis=1), block_kv,
                           keep)
              for order, keep in zip(tables["pool_order"], tables["pool_keep"])]
    pool_of = tables["pool_of"]
    keys = jnp.stack([p[0] for p in pooled])[pool_of]  # [C, H, T, d]
    values = jnp.stack([p[1] for p in pooled])[pool_of]  # [C, H, T, dv]
    log_count = jnp.concatenate([p[2] for p in pooled])[pool_of]  # [C, T]
    block = tables["position"][:, rows] // block_q  # [C, r]
    seen = jnp.take_along_axis(tables["visited"], block[:, :, None], axis=1)  # [C, r, T]
    skip = ~seen & jnp.isfinite(log_count)[:, None, :]
    scores = jnp.einsum("hrd,chtd->hcrt", q[:, rows].astype(jnp.float32), keys,
                        precision=_HIGHEST) * scale
    scores = jnp.where(skip[None], scores + log_count[None, :, None, :], -jnp.inf)
    top = scores.max(axis=-1)
    safe = jnp.where(jnp.isfinite(top), top, 0.0)
    weights = jnp.exp(scores - safe[..., None])
    total = weights.sum(axis=-1)
    lse = jnp.where(total > 0, safe + jnp.log(jnp.where(total > 0, total, 1.0)), -jnp.inf)
    out = jnp.einsum("hcrt,chtv->hcrv", weights, values, precision=_HIGHEST) \
        / jnp.where(total > 0, total, 1.0)[..., None]
    return lse, out


def router_tables(tables: CandidateTables, device=None) -> dict:
    """sampled_terms()'s device tables from a layer's CandidateTables (pools shared by
    candidates with the same order and filter, found on the host)."""
    pools, pool_of = [], []
    for c in range(len(tables.order)):
        key = (tables.order[c].tobytes(), tables.keep[c].tobytes())
        found = next((i for i, (o, kp) in enumerate(pools)
                      if (o.tobytes(), kp.tobytes()) == key), None)
        if found is None:
            found = len(pools)
            pools.append((tables.order[c], tables.keep[c]))
        pool_of.append(found)
    position = np.empty_like(tables.order)
    np.put_along_axis(position, tables.order,
                      np.arange(tables.order.shape[1])[None, :], axis=1)

    def put(x):
        return jax.device_put(np.ascontiguousarray(x), device)

    return {"visited": put(tables.visited), "position": put(position.astype(np.int32)),
            "pool_order": [put(o.astype(np.int32)) for o, _ in pools],
            "pool_keep": [put(kp) for _, kp in pools],
            "pool_of": put(np.asarray(pool_of, np.int32))}
