"""Each candidate's mask on the router's sampled rows, made on the device.

The router scores every candidate on a few sampled query rows (the native
router's rows, new for every layer and step). Evaluating the masks there on the
host and uploading [candidates, rows, tokens] booleans costs host work and a
transfer per (layer, step) that grow with the candidates; instead each
candidate's rule is put on the device once per shape: its run-order mask as at
most ROW_INTERVALS key intervals per row (TilePlan.row_intervals, exact), its
row order's positions and its key segment's (the first-frame sink). A layer and
step then uploads only its sampled row indices, and the masks are a few
gathers and comparisons. A candidate whose rows need more intervals makes the
runner keep the host path (RowRules.build returns None).
"""

from __future__ import annotations

import numpy as np
import torch

from .._flex.tables import plan_tables

_BLOCK = 128  # any block: row intervals do not depend on the tiles


def _intervals(mask, q_len, kv_len):
    tables = plan_tables(mask, q_len, kv_len, _BLOCK, _BLOCK)
    if tables.row_starts is None:
        return None
    return tables.row_starts, tables.row_ends


class RowRules:
    """The device rules of a layer's candidates, stacked over them, so that a ladder of
    many rungs costs the operators of two candidates: keeps(rows) -> bool [C, r, N]."""

    def __init__(self, starts, ends, q_pos, kv_pos, segment):
        self.starts, self.ends = starts, ends  # int32 [C, I, N]: run-order key intervals
        self.q_pos, self.kv_pos = q_pos, kv_pos  # int64 [C, N]: run position of each row
        self.segment = segment  # None, or (starts, ends [C, I, N], first, stride, count [C])

    @classmethod
    def build(cls, runs, tokens, device):
        """RowRules from the candidates' candidate_run() dicts, or None when a run-order
        mask keeps more than ROW_INTERVALS runs of keys in some row."""
        n = tokens
        bands, q_pos, kv_pos, segments = [], [], [], []
        for run in runs:
            band = _intervals(run["run_mask"], n, n)
            if band is None:
                return None
            bands.append(band)
            order = run["order"]
            kv_order = run["kv_order"] if run["kv_order"] is not None else order
            q_pos.append(np.arange(n) if order is None else np.argsort(np.asarray(order)))
            kv_pos.append(np.arange(n) if kv_order is None else np.argsort(np.asarray(kv_order)))
            extra = run["extra"]
            if extra is None:
                segments.append(None)
                continue
            rows = _intervals(extra["mask"], n, extra["count"])
            if rows is None:
                return None
            segments.append((rows, extra["first"], extra["stride"], extra["count"]))
        put = lambda a, dtype=None: torch.as_tensor(np.ascontiguousarray(a), device=device,  # noqa: E731
                                                    dtype=dtype)
        segment = None
        if any(s is not None for s in segments):
            shape = (len(runs),) + bands[0][0].shape[:1] + (n,)
            s_starts, s_ends = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
            first, stride, counts = (np.zeros(len(runs), np.int64), np.ones(len(runs), np.int64),
                                     np.zeros(len(runs), np.int64))
            for c, found in enumerate(segments):
                if found is not None:
                    (starts, ends), first[c], stride[c], counts[c] = found
                    s_starts[c], s_ends[c] = starts, ends
            segment = (put(s_starts), put(s_ends), put(first), put(stride), put(counts))
        return cls(put(np.stack([b[0] for b in bands])), put(np.stack([b[1] for b in bands])),
                   put(np.stack(q_pos), torch.int64), put(np.stack(kv_pos), torch.int64),
                   segment)

    def keeps(self, rows):
        """bool [C, r, N]: each candidate's mask on original rows `rows` (int64 [r]) over
        every original key, on the rules' device. Segment intervals are read at the
        query's run position (rows of run order), keys mapped to their segment index."""
        at = self.q_pos[:, rows]  # [C, r]: the rows' run positions
        pick = at[:, None, :].expand(-1, self.starts.shape[1], -1)  # [C, I, r]
        key = self.kv_pos[:, None, None, :]  # [C, 1, 1, N]
        starts = self.starts.gather(2, pick)[..., None]  # [C, I, r, 1]
        ends = self.ends.gather(2, pick)[..., None]
        keep = ((key >= starts) & (key < ends)).any(dim=1)  # [C, r, N]
        if self.segment is None:
            return keep
        s_starts, s_ends, first, stride, counts = self.segment
        offset = self.kv_pos - first[:, None]  # [C, N]
        j = torch.div(offset, stride[:, None], rounding_mode="floor")
        on = (offset >= 0) & (offset % stride[:, None] == 0) & (j < counts[:, None])
        j = j[:, None, None, :]
        inside = ((j >= s_starts.gather(2, pick)[..., None])
                  & (j < s_ends.gather(2, pick)[..., None])).any(dim=1)
        return keep | (inside & on[:, None, :])
