"""Sparse VideoGen's router with torch ops on the tensors' device.

The same decisions as the native router (src/routing/router.cc): the same
sampled rows (VideoAttention.sampled_rows: seed, layer and step, shared by
every head), each candidate's mask on those rows (Mask.rows), the exact
attention of those rows under the dense mask and under each candidate, the
mean squared difference to dense over rows and channels, and the same rule
(the smallest MSE among candidates within the density budget, the first on
a tie; with none within it, the least dense). Q, K and V stay on their
device: only the [heads, candidates] table of MSEs goes to the host.

Scores and outputs are float32 (the native router's outputs are float32
too, bf16 inputs rounding P to bf16 for P.V there), so MSEs agree to float32
rounding and decisions differ only where two candidates are that close.
"""

from __future__ import annotations

import numpy as np
import torch

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


def sampled_mse(q, k, v, rows, row_masks, scale, reference=None) -> np.ndarray:
    """MSE against the reference of each candidate, float64 [heads, candidates].

    q, k, v: [H, N, d] (one batch entry, any float dtype, one device); rows:
    int64 tensor [r] on that device; row_masks: bool [C, r, N] on that device;
    scale: the softmax scale; reference: None (dense) or bool [N], the keys the
    reference keeps (a padded entry's real keys; row_masks already drop the
    others)."""
    heads, tokens = int(q.shape[0]), int(k.shape[1])
    r = int(rows.shape[0])
    step = max(1, _CHUNK_ELEMENTS // max(1, r * tokens))
    tables = []
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
    return torch.cat(tables).cpu().numpy()


def decide(candidates, mse_row, density_budget) -> int:
    """The index of the chosen candidate: the native router's rule."""
    within = [density_budget is None or density <= density_budget * (1.0 + 1e-12)
              for _, density in candidates]
    best = None
    if any(within):
        for i, ok in enumerate(within):
            if ok and (best is None or mse_row[i] < mse_row[best]):
                best = i
    else:
        for i, (_, density) in enumerate(candidates):
            if best is None or density < candidates[best][1]:
                best = i
    return best
