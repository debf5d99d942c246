"""Sparse VideoGen's router with torch ops on the tensors' device.

The same decisions as the native router (src/routing/router.cc): the same
sampled rows (VideoAttention.sampled_rows: seed, layer and step, shared by
every head), each candidate's mask on those rows (Mask.rows), the exact
attention of those rows under the dense mask and under each candidate, the
mean squared difference to dense over rows and channels and the dense rows'
mean square. The rule is the library's (decide(): _core.decide_routes, the
one routing.h defines), not a copy. Q, K and V stay on their device: only
the [heads, candidates] table of MSEs goes to the host.

Scores and outputs are float32 (the native router's outputs are float32
too, bf16 inputs rounding P to bf16 for P.V there), so MSEs agree to float32
rounding and decisions differ only where two candidates are that close.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import _core

# Elements of one chunk's [heads, rows, tokens] score block (float32: 256 MiB).
_CHUNK_ELEMENTS = 1 << 26


def _masked_output(scores, keep, v):
    """softmax(scores where keep) @ v; rows keeping no key give 0."""
    masked = scores if keep is None else scores.masked_fill(~keep, float("-inf"))
    top = masked.amax(dim=-1, keepdim=True)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    p = torch.exp(masked - top)
    total = p.sum(dim=-1, keepdim=True)
    out = p @ v
    return torch.where(total > 0, out / torch.where(total > 0, total, torch.ones_like(total)),
                       torch.zeros_like(out))


def sampled_mse(q, k, v, rows, row_masks, scale, reference=None):
    """(MSE against the reference of each candidate, float64 [heads, candidates];
    the reference rows' mean square, float64 [heads]).

    q, k, v: [H, N, d] (one batch entry, any float dtype, one device); rows:
    int64 tensor [r] on that device; row_masks: bool [C, r, N] on that device;
    scale: the softmax scale; reference: None (dense) or bool [N], the keys the
    reference keeps (a padded entry's real keys; row_masks already drop the
    others)."""
    heads, tokens = int(q.shape[0]), int(k.shape[1])
    r = int(rows.shape[0])
    step = max(1, _CHUNK_ELEMENTS // max(1, r * tokens))
    tables, powers = [], []
    for h0 in range(0, heads, step):
        h1 = min(heads, h0 + step)
        qs = q[h0:h1].index_select(1, rows).float()
        kh, vh = k[h0:h1].float(), v[h0:h1].float()
        scores = (qs @ kh.transpose(1, 2)) * scale
        dense = _masked_output(scores, None if reference is None else reference[None, None], vh)
        columns = []
        for keep in row_masks:
            out = _masked_output(scores, keep[None], vh)
            columns.append(((out - dense).double() ** 2).mean(dim=(1, 2)))
        tables.append(torch.stack(columns, dim=1))
        powers.append((dense.double() ** 2).mean(dim=(1, 2)))
    return torch.cat(tables).cpu().numpy(), torch.cat(powers).cpu().numpy()


def decide(densities, mse, power, density_budget=None, error=None):
    """The library's routing decision per head (routing.h: decide_route):
    (index int64 [heads], target met bool [heads], sampled relative L2 error
    float64 [heads, candidates]) for an MSE table [heads, candidates], the dense
    rows' mean square [heads] and the candidates' densities."""
    index, met, errors = _core.decide_routes(
        np.ascontiguousarray(mse, dtype=np.float64), np.ascontiguousarray(power, dtype=np.float64),
        [float(d) for d in densities], density_budget, error)
    return np.asarray(index, np.int64), np.asarray(met, bool), np.asarray(errors, np.float64)
