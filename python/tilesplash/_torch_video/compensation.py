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
"""

from __future__ import annotations

import math

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
    tile's pooled key count float32 [T], -inf for a tile with none) of k, v [B, H, N, .]
    in run order, T = ceil(N / block_kv); `keep`: key_filter()'s mask or None."""
    batch, heads, n, d = (int(s) for s in k.shape)
    dv = int(v.shape[3])
    tiles = -(-n // block_kv)
    pad = tiles * block_kv - n
    weight = torch.ones(n, dtype=torch.float64, device=k.device) if keep is None \
        else keep.to(torch.float64)
    weight = torch.nn.functional.pad(weight, (0, pad))  # the ragged last tile's missing keys
    counts = weight.view(tiles, block_kv).sum(dim=1)

    def means(x, dim):
        x = torch.nn.functional.pad(x.to(torch.float64), (0, 0, 0, pad))
        sums = (x * weight[:, None]).view(batch, heads, tiles, block_kv, dim).sum(dim=3)
        return (sums / counts.clamp(min=1)[:, None]).to(torch.float32)

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


def compensate(q, out, lse, pooled, visited, scale: float, block_q: int):
    """(out in out's dtype, lse float32) with every skipped pooled tile merged in.

    q [B, H, N, d] and out [B, H, N, dv], lse [B, H, N] in the run order the plan
    was made in; pooled: pooled_tiles(); visited: visited_tiles() (broadcast over
    B and H). Rows of q-blocks that skip no pooled tile keep out's and lse's bits."""
    keys, values, log_count = pooled
    batch, heads, n = (int(s) for s in q.shape[:3])
    tiles = int(keys.shape[2])
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // max(1, batch * heads * tiles))
    rows_per_chunk = max(block_q, rows_per_chunk // block_q * block_q)
    pooled_tile = torch.isfinite(log_count)
    outs, lses = [], []
    for r0 in range(0, n, rows_per_chunk):
        r1 = min(n, r0 + rows_per_chunk)
        blocks = torch.arange(r0, r1, device=q.device) // block_q
        skip = ~visited.index_select(2, blocks) & pooled_tile  # [B|1, H|1, R, T]
        scores = torch.matmul(q[:, :, r0:r1].float(), keys.transpose(-1, -2)) * scale
        scores = torch.where(skip, scores + log_count, -math.inf)
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
