"""Sparse VideoGen 2's clusters on the tensors' device (VideoAttention(method="svg2")
with the flex backend).

Q and K stay on their device: copying every head's rows to the host for the
native k-means would cost a transfer and a CPU k-means per head, layer and
step, far more than the attention it serves. So the whole pipeline runs in
torch ops, batched over the heads of a call:

- k-means of each head's video query rows (qc clusters) and key rows (kc),
  the native algorithm (src/clusters/kmeans.cc): the same initial points
  (kmeans_initial_indices with the same seeds), Lloyd rounds, nearest
  centroid by squared Euclidean distance with the lowest index on a tie, an
  empty cluster keeping its centroid, 50 rounds cold and 2 warm-started from
  the previous call of the same layer and head, each head stopping once no
  centroid moves by 1e-4 (frozen in place, so no host round trip per round);
- the kept cluster pairs: the native rule (weights |K_b| exp(scale c^Q_a .
  c^K_b), per query cluster the shortest prefix of key clusters by falling
  weight reaching top-p, at least min_kc_ratio of them, the top-p whose
  density is nearest the target read from one sorted cumsum of the density's
  steps, as the native bisection picks it: _top_p);
- the run order: Q rows sorted by query cluster, K and V rows by key cluster,
  text last; clusters ordered by barycentre sweeps over the kept pairs (the
  native order starts the sweeps from a nearest-neighbour chain through the
  query centroids, a sequential walk; here they start from the cluster
  index). The order decides only which tiles are visited, never the result;
- the plan in run order, classified in O(1) per tile from a 2-D prefix sum
  of the kept pairs; FlexAttention's BlockMask of it (its mask_mod reads the
  head's cluster ranks and kept table) is made in _flex/cluster_masks.py.

Distances and means are float32 sums in another order than the native
kernel's, so a point almost equidistant from two centroids may land in the
other one: on data with clear clusters the masks are the native ones.
"""

from __future__ import annotations

import math
import time

import numpy as np
import torch

from .. import _core
from .._flex.cluster_masks import cluster_block_mask
from .compensation import compensate_call, key_filter

_CHUNK_ELEMENTS = 1 << 27


def _assign(points, centroids):
    """Nearest centroid per point: [H, n] int64 (lowest index on a tie)."""
    heads, n, _ = points.shape
    k = centroids.shape[1]
    norms = (centroids * centroids).sum(-1)
    step = max(1, _CHUNK_ELEMENTS // max(1, heads * k))
    labels = []
    for i in range(0, n, step):
        block = points[:, i:i + step]
        labels.append((norms[:, None, :] - 2.0 * block @ centroids.transpose(1, 2)).argmin(-1))
    return torch.cat(labels, dim=1)


def kmeans(points, clusters: int, seed: int, iterations: int, tolerance: float, warm=None):
    """Batched Lloyd k-means of points [H, n, d] float32: (centroids, labels, sizes)."""
    heads, n, d = points.shape
    if warm is None:
        first = torch.as_tensor(np.asarray(_core.kmeans_initial_indices(n, clusters, seed)),
                                device=points.device)
        centroids = points.index_select(1, first).clone()
    else:
        centroids = warm.clone()
    active = torch.ones(heads, dtype=torch.bool, device=points.device)
    labels = torch.zeros((heads, n), dtype=torch.int64, device=points.device)
    for _ in range(iterations):
        new = _assign(points, centroids)
        labels = torch.where(active[:, None], new, labels)
        sizes = torch.zeros((heads, clusters), dtype=torch.float64, device=points.device)
        sizes.scatter_add_(1, labels, torch.ones_like(labels, dtype=torch.float64))
        sums = torch.zeros((heads, clusters, d), dtype=torch.float64, device=points.device)
        sums.scatter_add_(1, labels[..., None].expand(-1, -1, d), points.double())
        means = torch.where(sizes[..., None] > 0, sums / sizes.clamp(min=1)[..., None],
                            centroids.double()).float()
        moved = ((means.double() - centroids.double()) ** 2).sum(-1).sqrt().amax(-1)
        centroids = torch.where(active[:, None, None], means, centroids)
        active = active & (moved >= tolerance)
    sizes = torch.zeros((heads, clusters), dtype=torch.int64, device=points.device)
    sizes.scatter_add_(1, labels, torch.ones_like(labels))
    return centroids, labels, sizes


def select_pairs(cq, ck, sizes_q, sizes_k, scale, density, min_kc_ratio, tokens, text):
    """The kept pairs [H, qc, kc] (bool) of the native rule, top-p meeting `density`."""
    heads, qc, kc = cq.shape[0], cq.shape[1], ck.shape[1]
    nonempty = sizes_k > 0
    logits = torch.log(sizes_k.double().clamp(min=1))[:, None, :] + scale * (
        cq.double() @ ck.double().transpose(1, 2))
    logits = logits.masked_fill(~nonempty[:, None, :], float("-inf"))
    weights = torch.softmax(logits, dim=-1)
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices
    cumulative = torch.cumsum(weights.gather(-1, order), dim=-1)
    width = nonempty.sum(-1)  # [H]
    minimum = torch.clamp(torch.full_like(width, math.ceil(min_kc_ratio * kc - 1e-9)), min=1)
    minimum = torch.minimum(minimum, width)
    key_sizes = torch.cumsum(sizes_k.double()[:, None, :].expand(-1, qc, -1).gather(-1, order),
                             dim=-1)

    def prefix(p):  # [H, qc]: key clusters kept by each query cluster at top-p p ([H])
        reach = torch.searchsorted(cumulative, p[:, None, None].expand(-1, qc, 1).contiguous())
        return torch.minimum(torch.maximum(reach[..., 0] + 1, minimum[:, None]), width[:, None])

    n, t = float(tokens), float(text)

    def kept_density(p):
        m = prefix(p)
        keys = key_sizes.gather(-1, (m - 1).clamp(min=0)[..., None])[..., 0]
        return (2 * t * n - t * t + (sizes_q.double() * keys).sum(-1)) / (n * n)

    p = _top_p(cumulative, prefix, kept_density, sizes_q, key_sizes, minimum, width,
               density, n)
    m = prefix(p)
    rank = torch.arange(kc, device=cq.device)
    kept_sorted = rank[None, None, :] < m[..., None]
    kept = torch.zeros((heads, qc, kc), dtype=torch.bool, device=cq.device)
    return kept.scatter_(-1, order, kept_sorted)


def _top_p(cumulative, prefix, kept_density, sizes_q, key_sizes, minimum, width, density, n):
    """[H] top-p whose kept density is nearest `density` (the lower on a tie), as the
    native rule's bisection of p over [0, 1] picks it, found in one pass: the density
    is a step function of p that rises only where p passes a cumulative weight, so
    every step's level is a cumsum of the rises sorted by where they happen, and the
    two levels around the target are read from it (no loop, no host read).

    Passing cumulative[a, j] moves query cluster a's prefix from clamp(j + 1) to
    clamp(j + 2) key clusters (clamped to [minimum, width]): the rise is |Q_a| times
    the keys of the extra cluster."""
    heads, qc, kc = cumulative.shape
    j = torch.arange(kc, device=cumulative.device)

    def keys(m):  # [H, qc, kc]: the keys of the first m key clusters of each query cluster
        m = torch.minimum(torch.maximum(m, minimum[:, None, None]), width[:, None, None])
        return key_sizes.gather(-1, (m - 1).clamp(min=0))

    before = (j + 1).expand(heads, qc, kc)
    rise = sizes_q.double()[..., None] * (keys(before + 1) - keys(before)) / (n * n)
    where_, sorted_at = torch.sort(cumulative.reshape(heads, -1), dim=-1, stable=True)
    start = kept_density(torch.zeros(heads, dtype=torch.float64, device=cumulative.device))
    levels = start[:, None] + torch.cumsum(rise.reshape(heads, -1).gather(-1, sorted_at), -1)
    # A level holds for p in (where_[i], next]: reachable when where_[i] < 1 (p <= 1) and
    # the last of its tied weights; p = min(next, 1) stands for it.
    following = torch.cat([where_[:, 1:], torch.full_like(where_[:, :1], 2.0)], dim=-1)
    valid = (where_ < 1) & (following > where_)
    levels = torch.cat([start[:, None], levels], dim=-1)
    valid = torch.cat([torch.ones_like(valid[:, :1]), valid], dim=-1)
    at = torch.cat([torch.zeros_like(where_[:, :1]), following.clamp(max=1.0)], dim=-1)
    index = torch.arange(levels.shape[1], device=levels.device).expand_as(levels)
    last = torch.where(valid, index, -1).amax(-1)
    lo = torch.where(valid & (levels < density), index, -1).amax(-1).clamp(min=0)
    hi = torch.where(valid & (levels >= density), index, levels.shape[1]).amin(-1)
    hi = torch.where(hi == levels.shape[1], last, hi)
    d_lo, d_hi = levels.gather(-1, lo[:, None])[:, 0], levels.gather(-1, hi[:, None])[:, 0]
    pick = torch.where(density - d_lo <= d_hi - density, lo, hi)
    return at.gather(-1, pick[:, None])[:, 0]


def cluster_ranks(kept, sizes_q, sizes_k, sweeps=4):
    """Compact ranks (non-empty clusters only, in run order; -1 for empty ones)."""
    heads, qc, kc = kept.shape
    w_q = sizes_q.double() + 1e-3
    w_k = sizes_k.double() + 1e-3
    k_fallback = qc + torch.arange(kc, device=kept.device, dtype=torch.float64)
    q_pos = torch.arange(qc, device=kept.device, dtype=torch.float64).expand(heads, qc)
    keptf = kept.double()

    def ranks(position):
        sequence = torch.sort(position, dim=-1, stable=True).indices
        return torch.empty_like(sequence).scatter_(
            -1, sequence, torch.arange(position.shape[-1], device=position.device).expand_as(
                sequence)).double()

    q_pos = ranks(q_pos)
    for sweep in range(sweeps):
        weight = torch.einsum("ha,hab->hb", w_q, keptf)
        total = torch.einsum("ha,hab->hb", w_q * q_pos, keptf)
        k_pos = ranks(torch.where(weight > 0, total / weight.clamp(min=1e-300), k_fallback))
        if sweep + 1 == sweeps:
            break
        weight = torch.einsum("hab,hb->ha", keptf, w_k)
        total = torch.einsum("hab,hb->ha", keptf, w_k * k_pos)
        q_pos = ranks(torch.where(weight > 0, total / weight.clamp(min=1e-300), q_pos))

    def compact(position, sizes):  # empty clusters last, ranks among the non-empty
        position = torch.where(sizes > 0, position, position + 1e9)
        r = ranks(position).long()
        return torch.where(sizes > 0, r, torch.full_like(r, -1))

    return compact(q_pos, sizes_q), compact(k_pos, sizes_k)


def run_order(labels, crank, video_begin, tokens, text_range):
    """[H, N] source rows in run order: video rows by compact cluster rank (token order
    within a cluster), then text; and the compact rank of each run position (-1: text)."""
    heads, length = labels.shape
    key = crank.gather(1, labels)
    video = torch.sort(key, dim=1, stable=True).indices + video_begin
    text = torch.arange(*text_range, device=labels.device).expand(heads, -1)
    source = torch.cat([video, text], dim=1)
    ranks = torch.cat([torch.sort(key, dim=1, stable=True).values,
                       torch.full((heads, tokens - length), -1, device=labels.device,
                                  dtype=key.dtype)], dim=1)
    return source, ranks


def block_lists(kind):
    """[1, H, Qb, KVb] lists (counts and ascending indices) of the tiles where kind holds."""
    counts = kind.sum(-1).to(torch.int32)
    indices = torch.sort((~kind).to(torch.int8), dim=-1, stable=True).indices.to(torch.int32)
    return counts[None], indices[None]


def classify_tiles(q_rank, k_rank, compact, video, tokens, block_q, block_kv):
    """Tile kinds in run order from cluster ranks: (full, partial) bool [H, Qb, KVb].

    A q-block's video rows cover the compact query clusters [a0, a1] (sorted, so
    every non-empty cluster between them appears) and its text rows keep every
    key; likewise for kv-blocks. A 2-D prefix sum of the compact kept pairs
    counts the kept cluster pairs of a tile's rectangle in O(1)."""
    heads, qn, kn = compact.shape
    prefix = torch.zeros((heads, qn + 1, kn + 1), dtype=torch.int64, device=compact.device)
    prefix[:, 1:, 1:] = compact.long().cumsum(1).cumsum(2)

    def ranges(rank, block):
        starts = torch.arange(0, tokens, block, device=rank.device)
        has_video = starts < video
        last = torch.clamp(torch.clamp(starts + block, max=video) - 1, min=0, max=video - 1)
        first = rank.gather(1, torch.clamp(starts, max=video - 1).expand(heads, -1))
        end = rank.gather(1, last.expand(heads, -1))
        first = torch.where(has_video, first, torch.zeros_like(first))
        end = torch.where(has_video, end, torch.full_like(end, -1))
        return first, end, torch.clamp(starts + block, max=tokens) > video

    a0, a1, text_rows = ranges(q_rank, block_q)
    b0, b1, text_cols = ranges(k_rank, block_kv)
    flat = prefix.view(heads, -1)
    width = kn + 1

    def at(rows, cols):
        index = rows[:, :, None] * width + cols[:, None, :]
        return flat.gather(1, index.view(heads, -1)).view(index.shape)

    count = at(a1 + 1, b1 + 1) - at(a0, b1 + 1) - at(a1 + 1, b0) + at(a0, b0)
    area = (a1 - a0 + 1)[:, :, None] * (b1 - b0 + 1)[:, None, :]
    full = count == area  # an area of 0: only text pairs, all kept
    empty = (count == 0) & (area > 0) & ~text_rows[None, :, None] & ~text_cols[None, None, :]
    return full, ~full & ~empty


def drop_padded_keys(full, partial, limit, tokens, block_kv):
    """Tile kinds (full, partial) [H, Qb, KVb] with keys [limit, tokens) dropped: tiles
    wholly past the limit become empty, a full tile across it partial (run order keeps
    trailing text, the only padding, in place)."""
    starts = torch.arange(0, tokens, block_kv, device=full.device)
    past = starts >= limit
    across = ~past & (starts + block_kv > limit)
    return full & ~past & ~across, (partial | (full & across)) & ~past


class DeviceClusters:
    """svg2 on the device for one VideoAttention: k-means warm starts per (layer, head).

    Not thread-safe on its own: its owner (VideoAttention) runs one call at a time
    under its lock, so a layer's warm start is never another layer's."""

    def __init__(self, geometry, options):
        """options: the core's svg2 options for this geometry and density
        (VideoAttention.cluster_options): density, min_kc_ratio and each side's
        k-means run (clusters, iterations, tolerance, seed). Nothing is chosen here."""
        if options is None or options["density"] is None:
            raise ValueError("options: expected svg2's cluster options with a density, got "
                             f"{options!r}")
        self.geometry = geometry
        self.density = options["density"]
        self.min_kc_ratio = options["min_kc_ratio"]
        self.runs = {"q": options["query"], "k": options["key"]}
        self.warm: dict = {}
        self.last: dict = {}  # head -> its clusters in the last call, for head_mask()

    def reset(self) -> None:
        self.warm.clear()
        self.last.clear()

    def head_mask(self, head: int):
        """The core Mask (original order) head `head` ran in the last call's last batch
        entry that ran it as svg2; None when no call ran it so."""
        found = self.last.get(head)
        if found is None:
            return None
        host = lambda x: x.detach().cpu().contiguous().numpy()  # noqa: E731
        (cq, lq, sq), (ck, lk, sk), kept = found
        return _core.cluster_mask(self.geometry, host(cq), host(lq).astype(np.int32), host(sq),
                                  host(ck), host(lk).astype(np.int32), host(sk),
                                  host(kept).astype(np.uint8))

    def _ranges(self):
        g = self.geometry
        n, text = g.tokens, g.text_tokens
        if g.text_at == "before":
            return (text, n), (0, text)
        return (0, n - text), (n - text, n)

    def _cluster(self, points, which, heads, layer):
        run = self.runs[which]
        clusters = run["clusters"]
        keys = [(layer, which, h) for h in heads]
        warm = [self.warm.get(key) for key in keys]
        use_warm = all(w is not None and w.shape == (clusters, points.shape[2]) for w in warm)
        centroids, labels, sizes = kmeans(
            points, clusters, run["seed"],
            run["warm_iterations"] if use_warm else run["first_iterations"], run["tolerance"],
            torch.stack(warm) if use_warm else None)
        for key, c in zip(keys, centroids):
            self.warm[key] = c
        return centroids, labels, sizes

    def run(self, video_attention, q, k, v, group, need_lse, info, key_limit=None, layer=0):
        """Heads `group` of one batch entry (q, k, v [1, h, N, d]) at `layer` on their own
        clusters (warm-started from that layer's previous call); keys [key_limit, tokens)
        are padding when key_limit is not None (text after the video, which the run order
        keeps in place)."""
        start = time.perf_counter()
        (v0, v1), text_range = self._ranges()
        n, length, text = self.geometry.tokens, v1 - v0, self.geometry.text_tokens
        qc, kc = self.runs["q"]["clusters"], self.runs["k"]["clusters"]
        d = int(q.shape[3])
        scale = video_attention.scale if video_attention.scale is not None else d ** -0.5
        cq, lq, sq = self._cluster(q[0, :, v0:v1].float(), "q", group, layer)
        ck, lk, sk = self._cluster(k[0, :, v0:v1].float(), "k", group, layer)
        kept = select_pairs(cq, ck, sq, sk, scale, self.density, self.min_kc_ratio, n, text)
        for i, h in enumerate(group):
            self.last[h] = ((cq[i], lq[i], sq[i]), (ck[i], lk[i], sk[i]), kept[i])
        q_crank, k_crank = cluster_ranks(kept, sq, sk)
        heads = len(group)
        compact = torch.zeros((heads, qc + 1, kc + 1), dtype=torch.uint8, device=q.device)
        rows = torch.where(q_crank >= 0, q_crank, torch.full_like(q_crank, qc))
        cols = torch.where(k_crank >= 0, k_crank, torch.full_like(k_crank, kc))
        index = torch.arange(heads, device=q.device)[:, None, None]
        compact[index, rows[:, :, None], cols[:, None, :]] = kept.to(torch.uint8)
        compact = compact[:, :qc, :kc].contiguous()
        q_source, q_rank = run_order(lq, q_crank, v0, n, text_range)
        k_source, k_rank = run_order(lk, k_crank, v0, n, text_range)
        clustered = time.perf_counter() - start
        start = time.perf_counter()
        bq, bk = video_attention.block
        full, partial = classify_tiles(q_rank, k_rank, compact.bool(), length, n, bq, bk)
        limit = n if key_limit is None else int(key_limit)
        if limit < n:
            full, partial = drop_padded_keys(full, partial, limit, n, bk)
        partial_num, partial_idx = block_lists(partial)
        full_num, full_idx = block_lists(full)
        block_mask = cluster_block_mask((partial_num, partial_idx, full_num, full_idx), q_rank,
                                        k_rank, compact, limit, n, (bq, bk))
        planned = time.perf_counter() - start
        start = time.perf_counter()
        gather = lambda x, source: x.gather(  # noqa: E731
            2, source[None, :, :, None].expand(-1, -1, -1, x.shape[3]))
        qr, kr, vr = gather(q, q_source), gather(k, k_source), gather(v, k_source)
        compensate = getattr(video_attention, "compensate", False)
        # Through the runner's kernel interface (kernels/), as every other call.
        out_run, lse_run = video_attention.call(qr, kr, vr, block_mask, n, need_lse or compensate)
        if compensate:  # in the clusters' run order, padding left out of the means
            out_run, lse_run = compensate_call(qr, kr, vr, out_run, lse_run, block_mask, scale,
                                               key_filter(n, q.device, key_limit))
            # Whether a head's plan skips a tile with a pooled key: 0-d device
            # values, read with the report's densities (report.call_report).
            pooled_tiles = -(-limit // bk)
            skipped = (~(full | partial)[:, :, :pooled_tiles]).flatten(1).any(dim=1)
            for h, flag in zip(group, skipped.unbind()):
                info[h]["compensated"] = flag
        out = torch.empty_like(out_run).scatter_(
            2, q_source[None, :, :, None].expand(-1, -1, -1, out_run.shape[3]), out_run)
        lse = torch.empty_like(lse_run).scatter_(2, q_source[None], lse_run) if need_lse else None
        permute = time.perf_counter() - start
        self._report(info, group, kept, sq, sk, full | partial, n, text, bq, bk, clustered,
                     planned, permute)
        return out, lse

    def _report(self, info, group, kept, sq, sk, visited, n, text, bq, bk, clustered, planned,
                permute):
        pairs = (kept.double() * sq.double()[:, :, None] * sk.double()[:, None, :]).sum((1, 2))
        density = (pairs + 2 * text * n - text * text) / (n * n)
        rows = torch.clamp(n - torch.arange(0, n, bq, device=kept.device), max=bq).double()
        cols = torch.clamp(n - torch.arange(0, n, bk, device=kept.device), max=bk).double()
        tiles = (visited.double() * rows[None, :, None] * cols[None, None, :]).sum((1, 2)) / (n * n)
        # 0-d device tensors: the report reads them when asked (report.call_report).
        for h, dens, frac in zip(group, density.unbind(), tiles.unbind()):
            info[h].update(density=dens, tiles_visited=frac, cluster_seconds=clustered / len(group),
                           plan_seconds=planned / len(group),
                           permute_seconds=permute / len(group))
