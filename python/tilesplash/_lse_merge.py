"""The LSE merge in torch ops, for tensors on any device: the one merge every torch
path off the native kernel uses (merge_attention off the CPU, the flex backend's
extra key segment, ring attention's steps on the flex backend). The native
kernel's merge is the C++ merge_attention (merge.h); both follow one rule.

The rule: LSE = log(sum_i exp(LSE_i)), out = sum_i exp(LSE_i - LSE) * out_i,
parts folded in the order given (so the same inputs give the same bits); a
part whose LSE is -inf adds nothing to its row (not even a NaN it holds), and
rows whose LSEs are all -inf give 0 and -inf.
"""

from __future__ import annotations

from ._layouts import lse_along_rows
from ._tensors import torch_module


def merge_lse(outputs, lses, layout="bhnd", accumulate=None, check_finite=False):
    """(out, lse) of partial results `outputs` (same shape, in `layout`) with LSEs `lses`
    ([batch, heads, N], [heads, N] for hnd), computed in `accumulate` (default float32)
    and returned in it. check_finite: a NaN / Inf output value in a row whose merged LSE
    is finite raises ValueError naming outputs[i] (one host round trip per part)."""
    torch = torch_module()
    accumulate = torch.float32 if accumulate is None else accumulate
    lses = [lse.to(accumulate) for lse in lses]
    total = lses[0]
    for lse in lses[1:]:
        total = torch.logaddexp(total, lse)
    finite = torch.isfinite(total)
    safe = torch.where(finite, total, torch.zeros_like(total))
    out = None
    for i, (x, lse) in enumerate(zip(outputs, lses)):
        weight = lse_along_rows(torch.where(torch.isfinite(lse), torch.exp(lse - safe),
                                            torch.zeros_like(safe)), layout)
        part = x.to(accumulate)
        if check_finite:
            live = lse_along_rows(torch.isfinite(lse) & finite, layout).expand_as(part)
            if bool((~torch.isfinite(part) & live).any()):
                raise ValueError(f"outputs[{i}]: NaN or Inf in a row whose LSE is finite")
        part = torch.where(weight > 0, part * weight, torch.zeros_like(part))
        out = part if out is None else out + part
    return out, torch.where(finite, total, torch.full_like(total, float("-inf")))
