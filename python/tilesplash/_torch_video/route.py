"""Sparse VideoGen's router as torch ops that stay on the tensors' device.

The same decision as the native router (src/routing/router.cc): the same
sampled rows (VideoAttention.sampled_rows), each candidate's mask on those
rows, the attention of those rows under the dense mask and under each
candidate, the MSE against dense and the dense rows' mean square, then the
rule of routing.h (decide_route). Nothing comes back to the host: the
choices are a device tensor that the runner reads as data (runner.py), so a
call never waits for the device (STYLE.md, "Torch idioms").

The work does not grow with the candidates beyond one fused step (issue 34):
one Q.K^T of the sampled rows in the inputs' dtype (bf16 on a GPU), one exp
pass shifted by the dense rows' maxima and shared by every candidate (a
candidate keeps a subset of the dense keys, so its own softmax is the shared
exponentials over its keys, renormalised), one stacked P.V for the dense
reference and every candidate together. A candidate whose kept scores all
lie more than ~87 below its row's dense maximum underflows to an empty row
(output 0); its MSE is then that of the dense row, which no rule prefers.

The rule itself is routing.h's, encoded here as tensor ops because the choice
must stay on the device; `decide()` asks the library once per call whether
its test-only inverted mode is on (a host call on a constant table), and
tests/python/test_device_routing.py checks the encoding against
_core.decide_routes on random, tied and degenerate tables.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .. import _core

# Elements of one chunk's [heads, candidates + 1, rows, tokens] probability block.
_CHUNK_ELEMENTS = 1 << 26


def sampled_scores(q, k, v, rows, keeps, scale, terms=None):
    """(MSE against the reference per candidate, float32 [heads, C]; the reference
    rows' mean square, float32 [heads]) on q's device.

    q, k, v: [H, N, d] (one batch entry, one device, any float dtype); rows:
    int64 [r] on that device; keeps: bool [C + 1, r, N], the reference's kept
    keys first (dense, or a padded entry's real keys), then each candidate's. terms:
    None, or each candidate's compensation term (lse [H, C, r], out [H, C, r, dv]:
    compensation.sampled_terms), merged into its sampled rows through the LSEs before
    the MSE, so that the router scores what a compensated head runs."""
    heads, tokens = int(q.shape[0]), int(k.shape[1])
    count, r = int(keeps.shape[0]), int(rows.shape[0])
    step = max(1, _CHUNK_ELEMENTS // max(1, count * r * tokens))
    reference = keeps[0]
    mses, powers = [], []
    for h0 in range(0, heads, step):
        h1 = min(heads, h0 + step)
        # One Q.K^T of the sampled rows, float32 scores of the inputs' dtype.
        scores = _f32_bmm(q[h0:h1].index_select(1, rows), k[h0:h1].transpose(1, 2)) * scale
        top = scores.masked_fill(~reference, -math.inf).amax(dim=-1, keepdim=True)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
        p = torch.exp(scores - top)  # the one exp pass, shared by every candidate
        kept = p[:, None] * keeps[None]  # [h, C + 1, r, N]
        total = kept.sum(dim=-1, keepdim=True)
        # One stacked P.V for the reference and every candidate, P rounded to the inputs'
        # dtype as the native router rounds it, float32 sums.
        h, c = h1 - h0, count
        out = _f32_bmm(kept.to(v.dtype).reshape(h, c * r, tokens), v[h0:h1]).reshape(h, c, r, -1)
        if terms is not None:  # e^(term lse - top): the term's weight beside `total`
            weight = torch.exp(terms[0][h0:h1] - top[:, None, :, 0])[..., None]
            weight = torch.cat([torch.zeros_like(weight[:, :1]), weight], dim=1)
            out = out + weight * torch.cat([torch.zeros_like(out[:, :1]), terms[1][h0:h1]], 1)
            total = total + weight
        out = out / torch.where(total > 0, total, torch.ones_like(total))
        dense = out[:, :1]
        mses.append(((out[:, 1:] - dense) ** 2).mean(dim=(2, 3)))
        powers.append((dense[:, 0] ** 2).mean(dim=(1, 2)))
    return torch.cat(mses), torch.cat(powers)


def _f32_bmm(a, b):
    """a @ b ([h, m, k] @ [h, k, n]) as float32 from inputs of any float dtype: on CUDA
    bmm's float32 output (no float32 copy of K or V), elsewhere float32 operands."""
    if a.dtype != torch.float32 and a.device.type == "cuda":
        try:
            return torch.bmm(a, b, out_dtype=torch.float32)
        except (TypeError, RuntimeError, NotImplementedError):  # a torch without out_dtype
            pass
    return torch.bmm(a.float(), b.float())


def _inverted() -> bool:
    """Whether the library's test-only inverted rule is on (routing.h): asked of the
    library on a constant two-candidate table, on the host."""
    index, _, _ = _core.decide_routes(np.array([[0.0, 1.0]]), np.array([1.0]), [0.5, 0.5],
                                      None, None)
    return int(np.asarray(index)[0]) == 1


def allowed_candidates(densities, density_budget) -> np.ndarray:
    """routing.h's allowed set: within the budget (the densities' rounding absorbed),
    else the least dense one alone, the first on a tie."""
    densities = np.asarray(densities, dtype=np.float64)
    if density_budget is None:
        return np.ones(densities.shape, bool)
    allowed = densities <= density_budget * (1.0 + 1e-12)
    if not allowed.any():
        allowed[int(np.argmin(densities))] = True
    return allowed


def decide(densities, mse, power, density_budget=None, error=None):
    """routing.h's decide_route for every head, on mse's device: (index int64 [heads],
    target met bool [heads], sampled relative L2 error float32 [heads, C])."""
    device = mse.device
    allowed = torch.as_tensor(allowed_candidates(densities, density_budget), device=device)
    inf = torch.tensor(math.inf, dtype=mse.dtype, device=device)
    power = power[:, None]
    errors = torch.where(power > 0, torch.sqrt(mse / torch.where(power > 0, power, 1.0)),
                         torch.where(mse > 0, inf, torch.zeros_like(mse)))
    inverted = _inverted()
    if inverted:  # the allowed candidate of largest MSE, the first on a tie
        plain = torch.where(allowed, mse, -inf).argmax(dim=-1)
    else:  # the allowed candidate of smallest MSE, the first on a tie
        plain = torch.where(allowed, mse, inf).argmin(dim=-1)
    met = torch.ones(mse.shape[:1], dtype=torch.bool, device=device)
    if error is None or inverted:
        return plain, met, errors
    # The least dense allowed candidate whose error meets the target, the smaller MSE
    # and then the first on a density tie; none: the plain choice, target not met.
    meets = allowed & (errors <= error)
    density = torch.as_tensor(np.asarray(densities, np.float64), device=device).to(mse.dtype)
    least = torch.where(meets, density, inf).amin(dim=-1, keepdim=True)
    targeted = torch.where(meets & (density == least), mse, inf).argmin(dim=-1)
    met = meets.any(dim=-1)
    return torch.where(met, targeted, plain), met, errors
