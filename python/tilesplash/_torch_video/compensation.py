"""Compensation of skipped tiles in torch ops: the flex backend's compensate=True.

The same term as the native pass (src/compensation/compensate.cc): every key
tile t that a query tile's plan does not visit (neither full nor partial),
holding n_t keys with mean key k̄_t and mean value v̄_t, adds
n_t * exp(scale * q . k̄_t) * v̄_t to the row's softmax numerator and
n_t * exp(scale * q . k̄_t) to its denominator, merged into FlexAttention's
(out, lse) through the LSE. Tiles are the plan's own (block_q x block_kv in
the order the call runs), so a caller passes q, k, v in run order.

What native does, done the same way here:
- a tile's mean is over the keys the filter keeps (padding at or past the
  key limit, the exactly-attended sink segment left out); a tile with no such
  key is never compensated, and the ragged last tile averages the keys it has;
- a q-block that skips no pooled tile keeps FlexAttention's bits (a plan that
  skips nothing gives exactly the uncompensated output);
- a row with no kept key and nothing skipped stays out 0, lse -inf.

Everything stays on the device and no tensor is N x N: the scores of the
queries against the pooled keys are [rows, N / block_kv], computed in chunks
of rows, and the visited tiles come from the BlockMask's block lists
(kv_num_blocks / kv_indices and full_kv_*), which the device already holds.
Cost: one pass over K and V (the means, in float64 so that a tile of one
repeated key pools to that key) and rows x tiles x (d + dv), about 1 /
block_kv of dense attention.

Three users: compensate_call() for one masked call (tilesplash.attention, the
call's own BlockMask); CompensatedHeads for VideoAttention, after a head's
calls, from the head's band plan (the sink segment is another call, or may
join the band's: the band's tiles are read from its own plan, not from the
call's BlockMask); sampled_terms() for the router, so an error target scores
what runs. One difference from native in low precision: FlexAttention hands
back its output already rounded to q's dtype, which the merge then rounds
again (native merges the kernel's float32 rows); float32 results agree to
float32 rounding.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

_CHUNK_ELEMENTS = 1 << 24
"""Score elements ([batch, heads, rows, tiles]) of one chunk of query rows."""


def key_filter(kv_len: int, device, key_limit=None, segment=None):
    """bool [kv_len] on `device`: the keys the means pool (None: every key). key_limit:
    keys from it on are padding; segment: (first, count, stride) of keys attended exactly
    in their own call (the first-frame sink in run order), kept out of the means."""
    if key_limit is None and segment is None:
        return None
    keep = torch.ones(kv_len, dtype=torch.bool, device=device)
    if key_limit is not None:
        keep[int(key_limit):] = False
    if segment is not None:
        first, count, stride = (int(x) for x in segment)
        keep[first:first + count * stride:stride] = False
    return keep


def pooled_tiles(k, v, block_kv: int, keep=None):
    """(mean keys float32 [B, H, T, d], mean values float32 [B, H, T, dv], log of each
    tile's pooled key count float32 [H | 1, T], -inf for a tile with none) of k, v
    [B, H, N, .] in run order, T = ceil(N / block_kv); `keep`: None (every key) or bool
    [N] or [H, N] (each head's own filter): key_filter()'s masks."""
    batch, heads, n, d = (int(s) for s in k.shape)
    dv = int(v.shape[3])
    tiles = -(-n // block_kv)
    pad = tiles * block_kv - n
    weight = torch.ones(n, dtype=torch.float64, device=k.device) if keep is None \
        else keep.to(torch.float64)
    weight = torch.nn.functional.pad(weight, (0, pad)).reshape(-1, tiles * block_kv)
    counts = weight.view(-1, tiles, block_kv).sum(dim=2)  # [H | 1, T]

    def means(x, dim):
        # float64 sums, as native's: a tile of one repeated key pools to that key. A few
        # heads at a time, so the float64 copy stays small (K alone is GBs at 720p).
        step = max(1, _CHUNK_ELEMENTS // max(1, batch * tiles * block_kv * dim))
        parts = []
        for h0 in range(0, heads, step):
            h1 = min(heads, h0 + step)
            w = weight if weight.shape[0] == 1 else weight[h0:h1]
            c = counts if counts.shape[0] == 1 else counts[h0:h1]
            part = torch.nn.functional.pad(x[:, h0:h1].to(torch.float64), (0, 0, 0, pad))
            sums = (part * w[:, :, None]).view(batch, h1 - h0, tiles, block_kv, dim).sum(3)
            parts.append((sums / c.clamp(min=1)[:, :, None]).to(torch.float32))
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)

    log_count = torch.where(counts > 0, counts.clamp(min=1).log(),
                            torch.full_like(counts, -math.inf)).to(torch.float32)
    return means(k, d), means(v, dv), log_count


def visited_tiles(block_mask, tiles: int):
    """bool [B, H, Q, tiles] (B, H as the BlockMask holds them, 1 where shared): the key
    tiles each q-block visits, full or partial, from the BlockMask's block lists."""
    visited = None
    for num, index in ((block_mask.kv_num_blocks, block_mask.kv_indices),
                       (block_mask.full_kv_num_blocks, block_mask.full_kv_indices)):
        if num is None:
            continue
        slots = torch.arange(int(index.shape[-1]), device=index.device)
        # Entries past a row's count are never read: sent to a spare column.
        target = torch.where(slots < num[..., None], index.long(), tiles)
        seen = torch.zeros(tuple(index.shape[:-1]) + (tiles + 1,), dtype=torch.bool,
                           device=index.device)
        seen.scatter_(-1, target, True)
        visited = seen if visited is None else visited | seen
    return visited[..., :tiles]


def compensate(q, out, lse, pooled, visited, scale: float, block_q: int, row_block=None):
    """(out in out's dtype, lse float32) with every skipped pooled tile merged in.

    q [B, H, N, d] and out [B, H, N, dv], lse [B, H, N]; pooled: pooled_tiles();
    visited: bool [B | 1, H | 1, Q, T], visited_tiles(). Row r lies in q-block r //
    block_q (rows in the plan's run order), or with row_block (int64 [H | 1, N]) in
    q-block row_block[h, r]: rows in another order than the plan's, e.g. the original
    order of a head whose plan runs token-major. Rows of q-blocks that skip no pooled
    tile keep out's and lse's bits."""
    keys, values, log_count = pooled
    batch, heads, n = (int(s) for s in q.shape[:3])
    tiles = int(keys.shape[2])
    width = max(tiles, int(out.shape[3]))  # scores [.., R, T] and rows [.., R, dv]
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // max(1, batch * heads * width))
    rows_per_chunk = max(block_q, rows_per_chunk // block_q * block_q)
    pooled_tile = torch.isfinite(log_count)[:, None, :]  # [H | 1, 1, T]
    if row_block is None:
        row_block = (torch.arange(n, device=q.device) // block_q)[None]
    plans = torch.arange(int(visited.shape[1]), device=q.device)[:, None]
    outs, lses = [], []
    for r0 in range(0, n, rows_per_chunk):
        r1 = min(n, r0 + rows_per_chunk)
        # [B | 1, H | 1, R, T]: each row's q-block's visited tiles.
        seen = visited[:, plans, row_block[:, r0:r1]]
        skip = ~seen & pooled_tile
        scores = torch.matmul(q[:, :, r0:r1].float(), keys.transpose(-1, -2)) * scale
        scores = torch.where(skip, scores + log_count[:, None, :], -math.inf)
        exact_lse, exact_out = lse[:, :, r0:r1], out[:, :, r0:r1].float()
        top = torch.maximum(exact_lse, scores.amax(dim=-1))
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        exact = torch.exp(exact_lse - top)  # 0 for a row with no kept key
        weights = torch.exp(scores - top[..., None])  # 0 for a visited or empty tile
        total = exact + weights.sum(dim=-1)
        merged = (exact[..., None] * exact_out + torch.matmul(weights, values)) \
            / torch.where(total > 0, total, torch.ones_like(total))[..., None]
        merged_lse = top + torch.log(total)
        # Native leaves a q-block with no skipped tile untouched: so do these rows.
        changed = skip.any(dim=-1).expand(batch, heads, r1 - r0)
        outs.append(torch.where(changed[..., None], merged, exact_out).to(out.dtype))
        lses.append(torch.where(changed, merged_lse, exact_lse))
    return torch.cat(outs, dim=2), torch.cat(lses, dim=2)


def compensate_call(q, k, v, out, lse, block_mask, scale: float, keep=None):
    """One FlexAttention call's (out, lse) compensated for the tiles its BlockMask skips
    (q, k, v [B, H, N, .] as the call took them; keep: key_filter() or None)."""
    block_q, block_kv = (int(b) for b in block_mask.BLOCK_SIZE)
    pooled = pooled_tiles(k, v, block_kv, keep)
    visited = visited_tiles(block_mask, int(pooled[0].shape[2]))
    return compensate(q, out, lse, pooled, visited, scale, block_q)


class CompensatedHeads:
    """A video runner's compensation (a mixin of the flex runner, _flex/video.py): each
    head's skipped tiles added after its calls, on the call's (out, lse) in the original
    row order, as the native backend adds them (src/routing/head_runs.cc,
    compensate_band): the tiles of the head's band plan in its run order (the token-
    exact or rounded run mask, padding dropped), pooled over the run-order keys less
    the padding and the sink segment, which the head attends exactly. Merging after the
    sink segment and the scatter back, not before, is the same sum through the LSEs.

    The runner provides tokens, block, granularity, strategy, runs, candidates and
    `compensate`. Dense heads skip nothing; svg2 heads are compensated inside their own
    call (_flex/clusters.py), where the plan's run order is at hand."""

    def _compensation_entry(self, name, key_limit):
        """(q order, kv order: int64 arrays or None, visited bool [Q, T], keep bool [N],
        whether any q-block skips a pooled tile) of candidate `name`, or None when its
        heads are not compensated here (dense, svg2). Host arrays, cached."""
        cache = self.__dict__.setdefault("_compensation_entries", {})
        key = (name, key_limit)
        if key in cache:
            return cache[key]
        from .._flex.tables import plan_tables
        from .._mask import Mask

        n, (bq, bk) = self.tokens, self.block
        run = self.runs.get(name)
        entry = None
        if run is not None:
            permuted = run["order"] is not None or run["kv_order"] is not None
            if permuted and self.strategy == "per_head":  # planned where it is scattered
                band, orders, segment = run["mask"], (None, None), None
            else:
                kv_order = run["order"] if run["kv_order"] is None else run["kv_order"]
                band, orders = run["run_mask"], (run["order"], kv_order)
                extra = run["extra"]
                segment = None if extra is None else (extra["first"], extra["count"],
                                                      extra["stride"])
            if self.granularity == "tile":
                band = band.tile_granular(n, n, bq, bk)
            if key_limit is not None:
                band = band & Mask.key_range(0, key_limit)
            visited = plan_tables(band, n, n, bq, bk).tiles != 0
            keep = np.ones(n, bool)
            if key_limit is not None:
                keep[key_limit:] = False
            if segment is not None:
                first, count, stride = segment
                keep[first:first + count * stride:stride] = False
            tiles = int(visited.shape[1])
            pooled = np.pad(keep, (0, tiles * bk - n)).reshape(tiles, bk).any(axis=1)
            entry = (*orders, visited, keep, bool((~visited & pooled[None]).any()))
        cache[key] = entry
        return entry

    def _compensation_tables(self, names, key_limit, device):
        """The device tables of candidates `names` (a head's choice indexes them), cached:
        (pool keys: [(kv order tensor or None, keep [N])], pool of each candidate int64
        [C], visited bool [C, Q, T], row_block int64 [C, N], compensated: [C] host bools,
        None for a candidate not compensated here)."""
        cache = self.__dict__.setdefault("_compensation_tables_cache", {})
        key = (tuple(names), key_limit, str(device))
        if key in cache:
            return cache[key]
        n, (bq, bk) = self.tokens, self.block
        q_blocks, tiles = -(-n // bq), -(-n // bk)
        pools, pool_of, visited, row_block, flags = [], [], [], [], []
        for name in names:
            entry = self._compensation_entry(name, key_limit)
            if entry is None:  # nothing compensated: every tile counts as visited
                visited.append(np.ones((q_blocks, tiles), bool))
                row_block.append(np.zeros(n, np.int64))
                pool_of.append(0)
                flags.append(None)  # the report keeps what the head's own call said
                continue
            q_order, kv_order, seen, keep, flag = entry
            found = next((i for i, (o, k) in enumerate(pools)
                          if _same(o, kv_order) and np.array_equal(k, keep)), None)
            if found is None:
                found = len(pools)
                pools.append((kv_order, keep))
            pool_of.append(found)
            visited.append(seen)
            position = np.arange(n) if q_order is None else np.argsort(q_order)
            row_block.append(position // bq)
            flags.append(flag)
        if not pools:
            pools.append((None, np.ones(n, bool)))
        found = cache[key] = (
            [(None if o is None else torch.as_tensor(o, device=device),
              torch.as_tensor(k, device=device)) for o, k in pools],
            torch.as_tensor(np.asarray(pool_of, np.int64), device=device),
            torch.as_tensor(np.stack(visited), device=device),
            torch.as_tensor(np.stack(row_block), device=device), flags)
        return found

    def compensated(self, q, k, v, out, lse, choices, key_limit, scale, info=None):
        """(out, lse) of one batch entry ([1, H, N, .], original row order) with each
        head's skipped tiles added. choices: each head's candidate name (a host list; the
        report dicts `info` get "compensated") or, routed, int64 [H] on the device
        indexing the candidates (`info`: the RoutedLayer, which keeps the flags per
        candidate for the report). Nothing here waits for the device."""
        if not self.compensate:
            return out, lse
        start = time.perf_counter()
        heads = int(q.shape[1])
        if isinstance(choices, torch.Tensor):
            names, index = [name for name, _ in self.candidates], choices
        else:
            names = sorted(set(choices))
            index = torch.as_tensor([names.index(c) for c in choices], device=q.device)
        pools, pool_of, visited, row_block, flags = self._compensation_tables(
            names, key_limit, q.device)
        if all(flag is None for flag in flags):  # dense or svg2 heads only: nothing here
            return out, lse
        stacked = []
        for kv_order, keep in pools:
            kr, vr = (k, v) if kv_order is None else (k.index_select(2, kv_order),
                                                      v.index_select(2, kv_order))
            stacked.append(pooled_tiles(kr, vr, self.block[1], keep))
        head_pool = pool_of[index]
        every = torch.arange(heads, device=q.device)
        keys = torch.stack([p[0] for p in stacked])[head_pool, :, every].transpose(0, 1)
        values = torch.stack([p[1] for p in stacked])[head_pool, :, every].transpose(0, 1)
        log_count = torch.cat([p[2] for p in stacked])[head_pool]
        out, lse = compensate(q, out, lse, (keys, values, log_count), visited[index][None],
                              scale, self.block[0], row_block[index])
        seconds = (time.perf_counter() - start) / max(1, heads)
        if isinstance(choices, torch.Tensor):
            if info is not None:
                info.compensated = flags
        elif info is not None:
            for h, choice in enumerate(choices):
                if flags[names.index(choice)] is not None:
                    info[h]["compensated"] = flags[names.index(choice)]
                    info[h]["compensation_seconds"] = seconds
        return out, lse


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return a is b or np.array_equal(a, b)


def sampled_terms(runner, q, k, v, rows, key_limit, scale):
    """What compensation adds to the router's sampled rows (src/routing/
    compensation_terms.cc): for every head, candidate and sampled row, the skipped
    tiles of the plan the candidate runs (its run order, tiles, padding and segment as
    CompensatedHeads has them) in one softmax state. Returns (lse float32 [H, C, r],
    -inf where the candidate skips nothing for the row; out float32 [H, C, r, dv]
    normalised) on q's device. q, k, v: [H, N, d] of one batch entry; rows: int64 [r]
    original-order rows. Work: rows x candidates x tiles x (d + dv)."""
    names = [name for name, _ in runner.candidates]
    pools, pool_of, visited, row_block, _ = runner._compensation_tables(
        names, key_limit, q.device)
    stacked = []
    for kv_order, keep in pools:
        kr, vr = (k, v) if kv_order is None else (k.index_select(1, kv_order),
                                                  v.index_select(1, kv_order))
        stacked.append(pooled_tiles(kr[None], vr[None], runner.block[1], keep))
    keys = torch.stack([p[0][0] for p in stacked])[pool_of]  # [C, H, T, d]
    values = torch.stack([p[1][0] for p in stacked])[pool_of]  # [C, H, T, dv]
    log_count = torch.cat([p[2] for p in stacked])[pool_of]  # [C, T]
    candidates = torch.arange(len(names), device=q.device)[:, None]
    skip = ~visited[candidates, row_block[:, rows]] & torch.isfinite(log_count)[:, None]
    scores = torch.einsum("hrd,chtd->hcrt", q.index_select(1, rows).float(), keys) * scale
    scores = torch.where(skip[None], scores + log_count[None, :, None], -math.inf)
    lse = torch.logsumexp(scores, dim=-1)  # -inf where nothing is skipped
    safe = torch.where(torch.isfinite(lse), lse, torch.zeros_like(lse))
    out = torch.einsum("hcrt,chtv->hcrv", torch.exp(scores - safe[..., None]), values)
    return lse, out
