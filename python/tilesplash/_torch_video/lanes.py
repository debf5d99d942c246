"""A routed layer's kernel calls, driven by choices that stay on the device.

The router's choice per head is a device tensor (_torch_video.route); the
host never learns it during the call. So the calls a layer makes are fixed by
its candidates, not by its choices: one "lane" per distinct row order among
the candidates (the original order; token-major for temporal heads, with the
first-frame sink's key segment; tile-major for sta), each lane one
FlexAttention call over every head (a key segment such as the sink is kept
as tiles of the same plan, on keys gathered after the band's: joined_tables).
A lane's tables stack an empty plan and
the plan of each of its candidates (built once per shape and cached); a
call's BlockMask picks each head's plan by a device gather of `slot[choice]`,
so a head whose choice lies in another lane visits no tile of this one
(output 0, LSE -inf), and the lanes' outputs combine by `where` on the
device. Same shapes every layer and step: one compiled kernel per shape.
"""

from __future__ import annotations

import numpy as np
import torch

from .._flex.masks import device_tables, joined_device_tables, joined_kv_len
from .._flex.stacked import LaneTables

class Lane:
    """One row order's call: its candidates (indices into the layer's candidates),
    their masks in that order, the order's gathers and the key segment, if any."""

    def __init__(self, order, inverse, extra, members):
        """order: None, or (q order, kv order) int64 device tensors; inverse: the run
        position of each original row; extra: None, or (segment keys in run order, count).
        With a segment the call's keys are kv order's, padded to a whole kv block, then
        the segment's (one gather: self.keys)."""
        self.order, self.inverse, self.extra = order, inverse, extra
        self.members = members  # [(candidate index, band mask, segment mask or None)]
        self._tables: dict = {}

    def slots(self, candidates: int, device):
        """int64 [candidates]: each candidate's slot in this lane's tables (0: none)."""
        slots = np.zeros(candidates, np.int64)
        for i, (c, _, _) in enumerate(self.members):
            slots[c] = 1 + i
        return torch.as_tensor(slots, device=device)

    def tables(self, n, block, device):
        """The LaneTables of the lane's call: each member's band joined with its key
        segment, if the lane has one, and the original-order index of every key of the
        call (None: kv order itself)."""
        key = str(device)
        found = self._tables.get(key)
        if found is None:
            if self.extra is None:
                plans = [device_tables(m[1], n, n, *block, (0, 0, 0, 0), device)
                         for m in self.members]
                found = (LaneTables(plans, n, n, block, device), None)
            else:
                segment_keys, count = self.extra
                total = joined_kv_len(n, count, block[1])
                plans = [joined_device_tables(m[1], m[2], n, n, count, *block, device)
                         for m in self.members]
                # Padding keys (never kept) repeat key 0: any real row serves.
                kv_order = self.order[1]
                keys = torch.cat([kv_order, kv_order.new_zeros(total - n - count),
                                  kv_order.index_select(0, segment_keys)])
                found = (LaneTables(plans, n, total, block, device), keys)
            self._tables[key] = found
        return found


def _gather(x, index):
    """x's rows `index` ([B, H, N, d], along N) in x's own memory order: a [B, N, H, d]
    input's view stays one, so every lane's call sees the strides of the original-order
    call and one compiled kernel serves them all (dynamo guards on strides)."""
    if x.stride(1) < x.stride(2):  # heads inside tokens (a bnhd view)
        return x.transpose(1, 2).index_select(1, index).transpose(1, 2)
    return x.index_select(2, index)


def run_lane(runner, lane, slot_of_head, q, k, v, need_lse):
    """One lane over every head of one batch entry ([1, H, N, d]): (out, lse) in the
    original row order; heads outside the lane give 0 and -inf."""
    n, grad = runner.tokens, torch.is_grad_enabled() and q.requires_grad
    tables, keys = lane.tables(n, runner.block, q.device)
    if lane.order is not None:
        q_order, kv_order = lane.order
        kv_index = kv_order if keys is None else keys
        q, k, v = _gather(q, q_order), _gather(k, kv_index), _gather(v, kv_index)
    first = lane.members[0][1]  # tuned options: the lane's first mask's family and shape
    o, l = runner.call(q, k, v, tables.block_mask(slot_of_head, grad), tables.kv_len,
                       need_lse, first)
    if lane.order is not None:
        o = o.index_select(2, lane.inverse)
        l = None if l is None else l.index_select(2, lane.inverse)
    return o, l


def combine(parts, lane_of_head, need_lse):
    """The lanes' outputs, each head's from its own lane (where, on the device)."""
    out, lse = None, None
    for index, (o, l) in enumerate(parts):
        if out is None:
            out, lse = o, l
            continue
        chosen = lane_of_head == index
        out = torch.where(chosen[None, :, None, None], o.to(out.dtype), out)
        if need_lse:
            lse = torch.where(chosen[None, :, None], l, lse)
    return out, lse


class RoutedLayer:
    """The lanes of one runner's candidates at one key limit, on one device, with each
    candidate's lane, slot and visited pairs (what its heads report)."""

    def __init__(self, runner, key_limit, device):
        names = [name for name, _ in runner.candidates]
        n, count = runner.tokens, len(names)
        self.lanes, lane_of = [], np.zeros(count, np.int64)
        self.visited = [0.0] * count  # pairs of the tiles visited / n^2, per candidate
        self.skipped = [0.0] * count  # pairs of them the sink segment skips (tile)
        for key, members in runner.group_of_candidates(names).items():
            calls = runner.group_calls(key, members, names, key_limit)
            band, segment = calls[0][0], (calls[1][0] if len(calls) > 1 else None)
            order = inverse = extra = None
            if key[0] != "original":
                name = names[members[0]]
                q_order = runner.order_tensor(name, "q", device)
                order = (q_order, runner.order_tensor(name, "kv", device))
                inverse = torch.argsort(q_order)
                run_extra = runner.runs[name]["extra"]
                if run_extra is not None:
                    keys = (torch.arange(run_extra["count"], device=device) * run_extra["stride"]
                            + run_extra["first"])
                    extra = (keys, calls[1][1])
            self.lanes.append(Lane(order, inverse, extra, [
                (c, band[c], None if segment is None else segment[c]) for c in members]))
            for c in members:
                lane_of[c] = len(self.lanes) - 1
                self.visited[c], self.skipped[c] = runner.candidate_visited(
                    names[c], band[c], None if segment is None else (segment[c], calls[1][1]),
                    key_limit, key[0] == "original")
        self.slots = [lane.slots(count, device) for lane in self.lanes]
        self.lane_of = torch.as_tensor(lane_of, device=device)

    def run(self, runner, q, k, v, index, need_lse):
        """Every head of one batch entry ([1, H, N, d]) under candidate index[h] (int64
        [H] on the device): (out [1, H, N, dv], lse [1, H, N] or None)."""
        parts = [run_lane(runner, lane, slots[index], q, k, v, need_lse)
                 for lane, slots in zip(self.lanes, self.slots)]
        return combine(parts, self.lane_of[index], need_lse)
