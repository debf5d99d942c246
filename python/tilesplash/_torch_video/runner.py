"""VideoAttention(..., backend="flex"): the torch video runner (routing, plans, calls).

The native router's decisions (on the device: route.py), then every head of a
batch entry runs in a few kernel calls (kernels/), one per group of heads that
share a row order and a mask_mod need (a plan with more than ROW_INTERVALS runs
of keys in a row needs the table mask_mod; only its heads get it):

- heads in the original order (dense, spatial, radial, ...) run their
  candidate's whole mask, sink included, in one call with a per-head BlockMask;
- heads whose candidate runs in another order (temporal in token-major, sta in
  tile-major) have their Q, K, V rows gathered into that order on the device
  and run its run-order mask with the key segment (Wan's first-frame sink,
  every F-th key in token-major order) gathered after the band's keys and kept
  as tiles of the same plan (one call, no LSE merge: tables.joined_tables);
- svg2 heads run their own clusters (clusters.py).

granularity="tile" rounds every mask out to whole tiles of the BlockMask's
blocks in its run order: full tiles only, no mask_mod in a compiled kernel.
tilesplash.flex.configure(strategy="per_head") runs every routed head in the
original order instead (no gathers, many more partial tiles; docs/gpu.md).
"""

from __future__ import annotations

import time
from collections import OrderedDict

import numpy as np
import torch

from .. import _core
from .._mask import Mask, core_mask
from .._methods import cluster_choice, method_flag
from .._layouts import from_bhnd, lse_to_layout, to_bhnd
from .._flex.attention import check_device, check_finite
from .kernels import KernelRefused, choose as choose_kernel, sdpa
from .._flex.masks import block_mask_for, joined_block_mask, joined_kv_len
from .report import call_report, head_report
from .route import decide, sampled_scores
from .lanes import RoutedLayer
from .compensation import CompensatedHeads, sampled_terms
from .row_rules import RowRules
from .._flex.settings import current as flex_settings
from .._flex.tables import joined_tables, plan_tables
from .tile_counts import TileCounts
from .._flex.tuning import kernel_options_for

GRANULARITIES = ("token", "tile")


def _upload(array, device):
    """A host array on `device` without waiting for it (pinned, non_blocking on CUDA)."""
    tensor = torch.from_numpy(np.ascontiguousarray(array))
    if torch.device(device).type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


class FlexVideo(TileCounts, CompensatedHeads):
    """The flex execution of one tilesplash.VideoAttention (its owner)."""

    def __init__(self, owner, *, dense_layers, dense_steps, force, density_budget, scale,
                 block_q, block_kv, error=None, granularity="token", compensate=False):
        self.compensate = compensate  # skipped tiles added (CompensatedHeads)
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity: expected 'token' or 'tile', got {granularity!r}")
        if granularity == "tile" and method_flag(owner.method, "data_driven"):
            raise ValueError(f"granularity: 'tile' is not available for method "
                             f"{owner.method!r} on the flex backend (its cluster BlockMasks are "
                             f"built on the device); use backend='cpu' or granularity='token'")
        self.granularity = granularity
        self.owner = owner
        self.dense_layers, self.dense_steps = dense_layers, dense_steps
        self.force, self.density_budget, self.scale = force, density_budget, scale
        self.error = error
        self.block = (block_q or 128, block_kv or 128)
        self.tokens = owner.geometry.tokens
        self.candidates = owner.candidates
        self.runs = {name: owner.candidate_run(name) for name, _ in self.candidates}
        # What a head that ran each candidate reports as its family, rung and row order
        # (svg2's heads run in their query clusters' order, as the native ones).
        self.families = {name: (family, rung, self.runs[name]["order_name"])
                         for name, family, rung in owner.candidate_families()}
        self.families[cluster_choice()] = (cluster_choice(), 0.0, "query clusters")
        self.density = dict(self.candidates)
        self._orders: dict = {}
        self._row_masks: OrderedDict = OrderedDict()
        self._routed_layers: dict = {}
        self._row_rules: dict = {}  # device -> RowRules, or None: host row masks
        self.kernels_used: dict = {}  # kernel name -> {kernel passed over: why}, this call
        self._visited_cache: dict = {}
        self._table_needs: dict = {}  # candidate name -> its plan needs the table mask_mod
        self.clusters = None
        if method_flag(owner.method, "data_driven"):
            from .clusters import DeviceClusters

            self.clusters = DeviceClusters(owner.geometry, owner.cluster_options)

    @property
    def strategy(self) -> str:
        """tilesplash.flex.configure's strategy, read at every call."""
        return flex_settings()["strategy"]

    @property
    def compile(self):
        """tilesplash.flex.configure's compile, read at every call."""
        return flex_settings()["compile"]

    # -- routing -----------------------------------------------------------------------------

    def _rows(self, layer, step, device):
        """(sampled rows int64 [r], keeps bool [C, r, N]) on the device for this layer and
        step: the native router's rows and each candidate's mask on them, made on the
        host (the library's mask, exact) and uploaded without waiting (pinned memory,
        non_blocking) for every new (layer, step); docs/gpu.md counts the cost."""
        key = (layer, step, str(device))
        found = self._row_masks.get(key)
        if found is None:
            rows = self.owner.sampled_rows(layer, step)
            rules = self._row_rules.get(str(device), False)
            if rules is False:  # once per device: each candidate's rule on the device
                rules = self._row_rules[str(device)] = RowRules.build(
                    [self.runs[name] for name, _ in self.candidates], self.tokens, device)
            if rules is not None:  # only the row indices travel
                uploaded = _upload(rows, device)
                found = (uploaded, rules.keeps(uploaded))
            else:  # a mask of many runs per row: evaluated by the library on the host
                masks = np.stack([self.owner.mask(name).rows(rows, self.tokens)
                                  for name, _ in self.candidates])
                found = (_upload(rows, device), _upload(masks, device))
            self._row_masks[key] = found
            while len(self._row_masks) > 4:  # CFG calls each layer and step twice
                self._row_masks.popitem(last=False)
        return found

    def route(self, qb, kb, vb, layer, step, scale, key_limit=None):
        """(index int64 [H], target met bool [H], sampled errors [H, C], MSEs [H, C]) of
        one batch entry, all on the device (nothing read back): router.decide's rule on
        the scores of sampled_scores. With key_limit, keys [key_limit, tokens) are padding:
        dropped from the dense reference and from every candidate, as the native router
        drops them."""
        rows, row_masks = self._rows(layer, step, qb.device)
        reference = torch.ones((1,) + tuple(row_masks.shape[1:]), dtype=torch.bool,
                               device=qb.device)
        if key_limit is not None:
            real = torch.arange(self.tokens, device=qb.device) < key_limit
            reference = reference & real
            row_masks = row_masks & real
        terms = sampled_terms(self, qb, kb, vb, rows, key_limit, scale) if self.compensate \
            else None  # compensation scored as it runs (_torch_video/compensation.py)
        mse, power = sampled_scores(qb, kb, vb, rows, torch.cat([reference, row_masks]), scale,
                                    terms)
        index, met, errors = decide([d for _, d in self.candidates], mse, power,
                                    self.density_budget, self.error)
        return index, met, errors, mse

    # -- execution ---------------------------------------------------------------------------

    def order_tensor(self, name, which, device):
        key = (name, which, str(device))
        found = self._orders.get(key)
        if found is None:
            run = self.runs[name]
            order = run["order"] if which == "q" or run["kv_order"] is None else run["kv_order"]
            found = self._orders[key] = torch.as_tensor(order, device=device)
        return found

    def call(self, q, k, v, block_mask, kv_len, need_lse, mask=None):
        """One FlexAttention call on a built BlockMask; `mask` names the tuned options' key
        (its family and shape; None: the device's first choice)."""
        options = None if mask is None else kernel_options_for(
            q.device, mask, self.tokens, kv_len, int(q.shape[3]), q.dtype, self.block)
        while True:  # the first kernel that runs the call (kernels/__init__.py)
            kernel, passed = choose_kernel(block_mask, q, need_lse)
            try:
                result = kernel.run(q, k, v, block_mask, self.scale, compile=self.compile,
                                    need_lse=need_lse, kernel_options=options)
            except KernelRefused:
                continue
            self.kernels_used[kernel.name] = dict(passed)
            return result

    def _flex(self, q, k, v, masks, kv_len, need_lse):
        bm = block_mask_for(list(masks), self.tokens, kv_len, *self.block, q.device)
        # Tuned kernel options (GPUs): those of the first head's mask family and shape.
        first = next((m for m in masks if m is not None), None)
        return self.call(q, k, v, bm, kv_len, need_lse, first)

    def group_of_candidates(self, choices):
        """{group key: [heads]}: ("original",) or ("order", name-of-order, extra) or
        (cluster_choice(),), with "table" appended for the heads whose mask needs the table
        mask_mod (more than ROW_INTERVALS runs of keys in a row): those heads, and only
        those, run in their own call with it; every other head keeps the per-row rule."""
        groups: dict = {}
        for h, choice in enumerate(choices):
            key = self._order_key(choice)
            if key[0] != cluster_choice() and choice != "dense" and self._needs_table(choice, key):
                key = key + ("table",)
            groups.setdefault(key, []).append(h)
        return groups

    def _needs_table(self, name, key) -> bool:
        """Whether candidate `name`'s plan (its segment's joined, if any) has a row of more
        than ROW_INTERVALS runs of keys; once per candidate (key padding only shortens
        rows, so the unpadded plan decides)."""
        found = self._table_needs.get((name, key))
        if found is None:
            n, block = self.tokens, self.block
            calls = self.group_calls(key, [0], [name])
            tables = plan_tables(calls[0][0][0], n, n, *block)
            if len(calls) > 1:
                tables = joined_tables(tables, plan_tables(calls[1][0][0], n, calls[1][1], *block))
            found = self._table_needs[(name, key)] = tables.row_starts is None
        return found

    def _order_key(self, choice):
        """The row order a head with this choice runs in (group_of_candidates' key)."""
        if choice == cluster_choice():
            return (cluster_choice(),)
        if choice == "dense" or self.strategy == "per_head":
            return ("original",)
        run = self.runs[choice]
        if run["order"] is None and run["kv_order"] is None:
            return ("original",)
        extra = run["extra"]
        return ("order", run["order_name"],
                None if extra is None else (extra["first"], extra["count"], extra["stride"]))

    def _padded_in_place(self, name, key_limit) -> None:
        """The candidate's key order must leave keys [key_limit, tokens) where they are
        (every order keeps trailing text in place), so that the run-order masks can drop
        them as a key range; the native backend checks the same."""
        run = self.runs[name]
        order = run["kv_order"] if run["kv_order"] is not None else run["order"]
        if order is None:
            return
        tail = np.asarray(order[key_limit:])
        moved = np.nonzero(tail != np.arange(key_limit, self.tokens))[0]
        if moved.size:
            raise ValueError(f"key_lengths: the {run['order_name']} order moves padded key "
                             f"{key_limit + int(moved[0])} (only orders that keep trailing "
                             f"text in place can drop it)")

    def group_calls(self, key, group, choices, key_limit=None):
        """The masks of one group of heads (a key of _groups but svg2's): [(masks,
        kv_len)], one mask per head of the batch entry (None for the heads of other
        groups), the first over every key in the group's row order, a second (a
        candidate with a separate key segment, e.g. the first-frame sink of token-major
        heads) over the segment's keys. The two run as one kernel call, the segment's
        plan joined after the band's (masks.joined_block_mask).

        key_limit: keys [key_limit, tokens) are padding; every mask is ANDed with the
        real keys (Mask.key_range), so their tiles drop out of the plan and a tile across
        the limit is partial, exact through the plan's bitmask table."""
        n, heads = self.tokens, len(choices)
        members = set(group)
        keys = None if key_limit is None else Mask.key_range(0, key_limit)

        def padded(mask):
            # granularity "tile": rounded out to this BlockMask's blocks in the run order,
            # then the padding dropped exactly.
            if self.granularity == "tile":
                mask = mask.tile_granular(n, n, *self.block)
            return mask if keys is None else mask & keys

        if key[0] == "original":
            def mask(h):
                if choices[h] == "dense":
                    return Mask.dense() if keys is None else keys
                run = self.runs[choices[h]]
                if self.granularity == "tile" and run["extra"] is not None:
                    return padded_keys(self.tile_segment_mask(run))
                return padded(run["mask"])

            def padded_keys(mask):
                return mask if keys is None else mask & keys

            return [([mask(h) if h in members else None for h in range(heads)], n)]
        if keys is not None:
            for name in {choices[h] for h in group}:
                self._padded_in_place(name, key_limit)
        calls = [([padded(self.runs[choices[h]]["run_mask"]) if h in members else None
                   for h in range(heads)], n)]
        extra = self.runs[choices[group[0]]]["extra"]
        if extra is not None:
            count = extra["count"]
            # Segment key j is run-order key first + j * stride: padded from this j on.
            real = count if key_limit is None else min(count, max(
                0, -(-(key_limit - extra["first"]) // extra["stride"])))
            segment_keys = None if real == count else Mask.key_range(0, real)
            segment = []
            for h in range(heads):
                if h not in members:
                    segment.append(None)
                    continue
                mask = self.runs[choices[h]]["extra"]["mask"]
                if self.granularity == "tile":
                    # Rounded out, less what the head's rounded band keeps: the two merge
                    # through their LSEs, so no key may be in both.
                    mask = Mask(_core.Mask.segment_minus(
                        core_mask(mask.tile_granular(n, count, *self.block)),
                        core_mask(calls[0][0][h]), extra["first"], extra["stride"]))
                segment.append(mask if segment_keys is None else mask & segment_keys)
            calls.append((segment, count))
        return calls

    def block_masks(self, choices, device, key_limit=None):
        """The BlockMasks one batch entry with these per-head choices runs on (svg2's,
        built from the data, aside), in call order: what a layer of the flex backend
        builds (bench/flex_plans.py times it)."""
        found = []
        for key, group in self.group_of_candidates(choices).items():
            if key[0] == cluster_choice():
                continue
            calls = self.group_calls(key, group, choices, key_limit)
            if len(calls) == 1:
                found.append(block_mask_for(list(calls[0][0]), self.tokens, self.tokens,
                                            *self.block, torch.device(device)))
            else:  # the key segment joined to the band (one call)
                (bands, n), (segments, count) = calls
                found.append(joined_block_mask(bands, segments, n, n, count, *self.block,
                                               torch.device(device)))
        return found

    def run_batch_entry(self, qb, kb, vb, choices, need_lse, info, key_limit=None, layer=0):
        """Every head of one batch entry ([1, H, N, d] views) under its choice, keys
        [key_limit, tokens) dropped when key_limit is not None. Returns (out [1, H, N,
        dv], lse [1, H, N] or None).

        Every FlexAttention call takes all H heads, the heads of other groups
        under an empty mask (no tile visited): the calls' shapes never depend
        on how the router split the heads, so a compiled kernel serves every
        layer and step of a shape instead of recompiling for each split."""
        heads = int(qb.shape[1])
        n = self.tokens
        parts = []
        groups = self.group_of_candidates(choices)
        for key, group in groups.items():
            if key[0] == cluster_choice():
                o, l = self.clusters.run(self, qb, kb, vb, group, need_lse, info, key_limit,
                                         layer)
            elif key[0] == "original":
                ((masks, _),) = self.group_calls(key, group, choices, key_limit)
                o, l = self._flex(qb, kb, vb, masks, n, need_lse)
                for h in group:
                    info[h]["tiles_visited"], info[h]["skipped"] = self._tiles_visited(
                        self.runs.get(choices[h]), masks[h], key_limit)
            else:
                o, l = self._run_permuted(qb, kb, vb, choices, group,
                                          self.group_calls(key, group, choices, key_limit),
                                          need_lse, info)
            parts.append((group, o, l))
        for h, choice in enumerate(choices):
            skipped = info[h].pop("skipped", 0.0)  # by the sink segment (head_runs.cc)
            if self.granularity == "tile" and choice not in ("dense", cluster_choice()):
                # rounded masks' density: the pairs they keep
                info[h]["density"] = info[h]["tiles_visited"] - skipped
        if len(parts) == 1:
            return parts[0][1], parts[0][2]
        out, lse = parts[0][1], parts[0][2]
        for group, o, l in parts[1:]:
            chosen = torch.zeros(heads, dtype=torch.bool, device=qb.device)
            chosen[group] = True
            out = torch.where(chosen[None, :, None, None], o.to(out.dtype), out)
            if need_lse:
                lse = torch.where(chosen[None, :, None], l, lse)
        return out, lse

    def _run_permuted(self, q, k, v, choices, group, calls, need_lse, info):
        """The heads in `group` (one row order, one key segment) on rows gathered into
        their order; every head travels, the others under empty masks. calls: their
        group_calls()."""
        n = self.tokens
        name = choices[group[0]]
        start = time.perf_counter()
        q_order = self.order_tensor(name, "q", q.device)
        kv_order = self.order_tensor(name, "kv", q.device)
        qr = q.index_select(2, q_order)
        kr, vr = k.index_select(2, kv_order), v.index_select(2, kv_order)
        permute = time.perf_counter() - start
        extra = self.runs[name]["extra"]
        masks, _ = calls[0]
        if extra is None:
            o, l = self._flex(qr, kr, vr, masks, n, need_lse)
        else:  # the key segment as tiles of the same plan: keys [band, padding, segment]
            segments, count = calls[1]
            total = joined_kv_len(n, count, self.block[1])
            keys = torch.cat([torch.zeros(total - n - count, dtype=torch.int64, device=q.device),
                              torch.arange(count, device=q.device) * extra["stride"]
                              + extra["first"]])
            kj, vj = (torch.cat([x, x.index_select(2, keys)], dim=2) for x in (kr, vr))
            bm = joined_block_mask(masks, segments, n, n, count, *self.block, q.device)
            first = next(m for m in masks if m is not None)
            o, l = self.call(qr, kj, vj, bm, total, need_lse, first)
        for h in group:
            info[h]["tiles_visited"] = self._visited(masks[h], n, n) / (n * n)
            if extra is not None:
                info[h]["tiles_visited"] += self._visited(segments[h], n, count) / (n * n)
                info[h]["skipped"] = self._segment_skipped(segments[h], count)
        start = time.perf_counter()
        out = torch.empty_like(o, dtype=q.dtype).index_copy_(2, q_order, o.to(q.dtype))
        lse = torch.empty_like(l).index_copy_(2, q_order, l) if need_lse else None
        permute += time.perf_counter() - start
        for h in group:
            info[h]["permute_seconds"] = permute / len(group)
        return out, lse

    # -- the call ----------------------------------------------------------------------------

    def forward(self, q, k, v, layer, step, layout, return_lse, key_lengths=None):
        """key_lengths: None, or one int per batch entry (checked by VideoAttention):
        that entry's keys from it on are padding."""
        start = time.perf_counter()
        check_device(q)
        qb, kb, vb = (to_bhnd(x, layout) for x in (q, k, v))
        for name, x in (("q", qb), ("k", kb), ("v", vb)):
            if int(x.shape[2]) != self.tokens:
                raise ValueError(f"{name}: expected the geometry's {self.tokens} tokens, got "
                                 f"{int(x.shape[2])}")
            if x.shape[1] != qb.shape[1] or x.shape[0] != qb.shape[0]:
                raise ValueError(f"{name}: expected q's batch and heads {tuple(qb.shape[:2])}, "
                                 f"got {tuple(x.shape[:2])}")
        if kb.shape[3] != qb.shape[3]:
            raise ValueError(f"k: expected q's head dim {qb.shape[3]}, got {kb.shape[3]}")
        check_finite(q, k, v)
        batch, heads, d = (int(s) for s in (qb.shape[0], qb.shape[1], qb.shape[3]))
        scale = self.scale if self.scale is not None else d ** -0.5
        warmup = _core.warmup_is_dense(self.dense_layers, self.dense_steps, layer, step)
        routed = not warmup and self.force is None and len(self.candidates) > 1
        report = {"heads": [], "method": self.owner.method, "band": self.owner.band,
                  "warmup": warmup, "block_q": self.block[0], "block_kv": self.block[1],
                  "blocks_tuned": False, "backend": "flex", "strategy": self.strategy,
                  "granularity": self.granularity}
        totals = dict.fromkeys(("routing_seconds", "plan_seconds", "cluster_seconds",
                                "permute_seconds", "attention_seconds"), 0.0)
        if batch == 0 or heads == 0:  # nothing to run: an empty output, as native gives
            report.update(totals)
            report["total_seconds"] = report["seconds"] = time.perf_counter() - start
            out = q.new_zeros(tuple(q.shape[:-1]) + (v.shape[-1],))
            if not return_lse:
                return out, report
            lse = torch.full(tuple(qb.shape[:3]), float("-inf"), dtype=torch.float32,
                             device=q.device)
            return out, lse_to_layout(lse, layout), report
        outs, lses, heads_of = [], [], []
        self.kernels_used = {}
        dense = warmup or self.force == "dense"
        for b in range(batch):
            qe, ke, ve = qb[b:b + 1], kb[b:b + 1], vb[b:b + 1]
            key_limit = None if key_lengths is None or key_lengths[b] == self.tokens \
                else key_lengths[b]
            if routed:
                routing_start = time.perf_counter()
                decision = self.route(qe[0], ke[0], ve[0], layer, step, scale, key_limit)
                totals["routing_seconds"] += time.perf_counter() - routing_start
                attention_start = time.perf_counter()
                plan = self._routed_layer(key_limit, q.device)
                out, lse = plan.run(self, qe, ke, ve, decision[0],
                                    return_lse or self.compensate)
                out, lse = self.compensated(qe, ke, ve, out, lse, decision[0], key_limit,
                                            scale, plan)
                heads_of.append((b, decision, plan))
            else:
                if dense:
                    choices = ["dense"] * heads
                elif self.clusters is not None:
                    choices = [cluster_choice()] * heads
                else:
                    choices = [self.force or self.candidates[0][0]] * heads
                info = [head_report(self.candidates, b, h, choices[h], False, None, self.families)
                        for h in range(heads)]
                attention_start = time.perf_counter()
                if dense and not return_lse:
                    # Dense work on SDPA (cuDNN / flash on a GPU), not through a BlockMask.
                    out, lse = self._dense_sdpa(qe, ke, ve, scale, key_limit, info), None
                    self.kernels_used["sdpa"] = {}
                else:
                    out, lse = self.run_batch_entry(qe, ke, ve, choices,
                                                    return_lse or self.compensate, info,
                                                    key_limit, layer)
                    out, lse = self.compensated(qe, ke, ve, out, lse, choices, key_limit,
                                                scale, info)
                heads_of.append(info)
            # Host time to queue the work: a GPU runs it later (no synchronisation here).
            totals["attention_seconds"] += time.perf_counter() - attention_start
            outs.append(out)
            lses.append(lse)
        out = outs[0] if batch == 1 else torch.cat(outs)
        report.update(totals)
        # The kernels that ran the call's FlexAttention calls and, per kernel, those passed
        # over with why ("sdpa": dense work on torch's SDPA).
        report["kernels"] = dict(self.kernels_used)
        report["total_seconds"] = report["seconds"] = time.perf_counter() - start
        seconds = totals["attention_seconds"] / (batch * heads)
        report = call_report(report, heads_of, seconds, routed, self.candidates,
                             self.granularity, self.families)
        result = from_bhnd(out.to(q.dtype), layout)
        if not return_lse:
            return result, report
        lse = lses[0] if batch == 1 else torch.cat(lses)
        return result, lse_to_layout(lse, layout), report

    def _routed_layer(self, key_limit, device) -> RoutedLayer:
        key = (key_limit, str(device), self.strategy)
        found = self._routed_layers.get(key)
        if found is None:
            found = self._routed_layers[key] = RoutedLayer(self, key_limit, device)
        return found

    def _dense_sdpa(self, q, k, v, scale, key_limit, info):
        """Every head dense on torch's SDPA ([1, H, N, d]), keys from key_limit on dropped."""
        n = self.tokens
        for h in info:
            h["tiles_visited"] = 1.0 if key_limit is None else \
                self._visited(Mask.key_range(0, key_limit), n, n) / (n * n)
        return sdpa.dense(q, k, v, scale, key_limit)
