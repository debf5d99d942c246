"""FlexAttention BlockMasks from tilesplash plans, on any device.

A BlockMask has the plan's structure already: empty tiles absent, full tiles
in full_kv_* (no mask function called), partial tiles in kv_* with a
mask_mod. What a plan adds is the mask_mod, exact on every pair, not only
inside partial tiles (eager FlexAttention ignores the block lists and calls
mask_mod on every pair). Two kinds, chosen per BlockMask:

- `row_mask_mod` ("rows", where every plan's rows are at most ROW_INTERVALS
  runs of keys: bands, causal, local, sinks, text rows and columns): loads
  each query row's intervals and compares the key index with them. Indexed by
  the query alone, its loads are [BLOCK_M] vectors in the Triton template,
  so it costs about what an analytic mask_mod costs;
- `table_mask_mod` ("table", every other mask: svg2 clusters, random, any
  SPEC tree): reads the tile kind and the bitmask table, a [BLOCK_M, BLOCK_N]
  gather per pipeline stage, which is why its kernel options must leave room
  for it (options.py).

A plan with no partial tile (granularity="tile": tile_granular masks planned
at the BlockMask's own blocks) needs no mask_mod in a compiled kernel: its
BlockMask carries a twin with the same full-tile lists and PyTorch's noop
mask_mod (options.FULL_ONLY_TAG), which run_flex compiles instead, so no
table is gathered and the kernel runs at the speed of a dense tile.

Each BlockMask made here carries its kind (options.mask_mod_kind reads it);
run_flex sizes the kernel options for it. Heads that run the same mask share one plan's tables: a layer whose
40 heads run two masks holds two tile tables, not forty, and a `head_plan`
vector maps each head to its tables.

The tables are padded (plans to at least MIN_PLANS, then powers of two;
distinct partial tiles to powers of two) so that a compiled FlexAttention
sees few distinct table shapes: a new routing choice of the same lengths is
new data, not a new kernel.
"""

from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np
import torch
from torch.nn.attention.flex_attention import BlockMask

from .options import FULL_ONLY_TAG, MASK_MOD_TAG, NO_MASK, ROWS, TABLE
from .._tile_tables import FULL, PARTIAL_BASE
from .tables import ROW_INTERVALS, PlanTables, joined_tables, plan_tables

_DEVICE_CACHE: OrderedDict = OrderedDict()  # key -> (DeviceTables, bytes)
_MASK_CACHE: OrderedDict = OrderedDict()  # key -> (BlockMask, bytes)
CACHE_BYTES = 256 << 20
"""Device memory each of the two caches (plan tables, BlockMasks) may hold, in bytes
(default 256 MiB; TILESPLASH_FLEX_CACHE_BYTES or set_cache_bytes() change it). At Wan
720p with 40 heads one BlockMask and its tables are about 110 MB, so a count of
entries bounds nothing useful; the least recently used entries go first, and the newest
stays even when it alone is larger."""


def _budget_from_environment() -> int:
    text = os.environ.get("TILESPLASH_FLEX_CACHE_BYTES")
    if text is None:
        return CACHE_BYTES
    try:
        value = int(text)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        raise ValueError(f"TILESPLASH_FLEX_CACHE_BYTES: expected an int >= 0 (bytes), got "
                         f"{text!r}") from None


_budget = [_budget_from_environment()]
_COMPUTE_Q_BLOCKS = "compute_q_blocks" in BlockMask.from_kv_blocks.__code__.co_varnames


def _power_of_two(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


MIN_PLANS = 4
"""Plan tables are stacked at least this deep (then by powers of two): a routed layer
holds one plan per candidate in use plus the empty one, so whether a step's heads use
one candidate or three, the compiled kernel sees the same shapes and does not recompile."""


def _plan_slots(count: int) -> int:
    return max(MIN_PLANS, _power_of_two(count))


def table_mask_mod(head_plan, tiles, words, block_q: int, block_kv: int, head_step: int):
    """The generic mask_mod over plan tables.

    head_plan: int32 [H] (the plan index of each head; head_step 0 for a mask
    shared by every head); tiles: int32 [plans, q_blocks, kv_blocks] with 0
    empty, 1 full, 2 + id partial (ids global over `words`); words: int32
    [distinct, block_q, words32]. Kept = the tile is full, or partial with
    the pair's bit set.
    """
    q_blocks, kv_blocks = int(tiles.shape[1]), int(tiles.shape[2])

    def mask_mod(b, h, q_idx, kv_idx):
        plan = head_plan[h * head_step]
        q_block = torch.clamp(q_idx // block_q, max=q_blocks - 1)
        kv_block = torch.clamp(kv_idx // block_kv, max=kv_blocks - 1)
        tile = tiles[plan, q_block, kv_block]
        column = kv_idx - kv_block * block_kv
        word = words[torch.clamp(tile - PARTIAL_BASE, min=0), q_idx - q_block * block_q,
                     column // 32]
        bit = (word >> (column % 32)) & 1
        return (tile == FULL) | ((tile >= PARTIAL_BASE) & (bit != 0))

    return mask_mod


def row_mask_mod(head_plan, starts, ends, q_len: int, head_step: int):
    """The per-row mask_mod: starts, ends int32 [plans, ROW_INTERVALS, q_len]; the key
    is kept when it lies in one of its row's intervals [start, end)."""
    count = int(starts.shape[1])

    def mask_mod(b, h, q_idx, kv_idx):
        plan = head_plan[h * head_step]
        row = torch.clamp(q_idx, max=q_len - 1)  # padding rows of a ragged last block
        keep = (kv_idx >= starts[plan, 0, row]) & (kv_idx < ends[plan, 0, row])
        for i in range(1, count):
            keep = keep | ((kv_idx >= starts[plan, i, row]) & (kv_idx < ends[plan, i, row]))
        return keep

    return mask_mod


MASK_MOD_CHOICES = ("auto", ROWS, TABLE)


class DeviceTables:
    """One plan's tables on one device."""

    __slots__ = ("host", "partial_num", "partial_idx", "full_num", "full_idx", "tiles", "words",
                 "row_starts", "row_ends")

    def __init__(self, host: PlanTables, device):
        self.host = host
        put = lambda a: torch.from_numpy(np.array(a, order="C")).to(device)  # noqa: E731
        self.partial_num = put(host.partial_num)
        self.partial_idx = put(host.partial_idx)
        self.full_num = put(host.full_num)
        self.full_idx = put(host.full_idx)
        self.tiles = put(host.tiles)
        self.words = put(host.words)
        rows = host.row_starts is not None
        self.row_starts = put(host.row_starts) if rows else None
        self.row_ends = put(host.row_ends) if rows else None


def _lru_get(cache: OrderedDict, key):
    found = cache.get(key)
    if found is not None:
        cache.move_to_end(key)
        return found[0]
    return None


def tensor_bytes(value) -> int:
    """Bytes of the tensors an object holds: its attributes, one level of containers and
    the tensors its mask_mod's closure captures (the plan tables), each counted once."""
    seen, total = set(), 0

    def add(x):
        nonlocal total
        if isinstance(x, torch.Tensor) and id(x) not in seen:
            seen.add(id(x))
            total += x.untyped_storage().nbytes()

    slots = getattr(type(value), "__slots__", ())
    for x in list(getattr(value, "__dict__", {}).values()) + [getattr(value, n, None)
                                                              for n in slots]:
        if isinstance(x, (list, tuple)):
            for y in x:
                add(y)
        else:
            add(x)
        for cell in getattr(x, "__closure__", None) or ():
            add(cell.cell_contents)
    twin = getattr(value, FULL_ONLY_TAG, None)
    return total + (0 if twin is None else tensor_bytes(twin))


def _lru_put(cache: OrderedDict, key, value):
    cache[key] = (value, tensor_bytes(value))
    held = sum(size for _, size in cache.values())
    while held > _budget[0] and len(cache) > 1:
        _, (_, size) = cache.popitem(last=False)
        held -= size
    return value


def cache_bytes() -> dict:
    """{"budget": bytes each cache may hold, "tables": bytes held, "block_masks": bytes held}."""
    return {"budget": _budget[0],
            "tables": sum(size for _, size in _DEVICE_CACHE.values()),
            "block_masks": sum(size for _, size in _MASK_CACHE.values())}


def set_cache_bytes(budget: int) -> None:
    """The byte budget of each cache (entries beyond it leave at the next store)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 0:
        raise ValueError(f"budget: expected an int >= 0 (bytes), got {budget!r}")
    _budget[0] = budget


def device_tables(mask, q_len, kv_len, block_q, block_kv, window, device) -> DeviceTables:
    key = (mask, q_len, kv_len, block_q, block_kv, tuple(window), str(device))
    found = _lru_get(_DEVICE_CACHE, key)
    if found is None:
        host = plan_tables(mask, q_len, kv_len, block_q, block_kv, window)
        found = _lru_put(_DEVICE_CACHE, key, DeviceTables(host, device))
    return found


def joined_device_tables(band, segment, q_len, kv_len, count, block_q, block_kv,
                         device) -> DeviceTables:
    """The DeviceTables of band mask `band` (kv_len keys) and segment mask `segment`
    (count keys; None: no key of the segment) joined into one plan
    (tables.joined_tables), cached like device_tables."""
    key = ("joined", band, segment, q_len, kv_len, count, block_q, block_kv, str(device))
    found = _lru_get(_DEVICE_CACHE, key)
    if found is None:
        host = joined_tables(plan_tables(band, q_len, kv_len, block_q, block_kv),
                             plan_tables(segment, q_len, count, block_q, block_kv))
        found = _lru_put(_DEVICE_CACHE, key, DeviceTables(host, device))
    return found


def joined_kv_len(kv_len: int, count: int, block_kv: int) -> int:
    """Keys of a joined call: the band's padded to whole kv blocks, then the segment's."""
    return -(-kv_len // block_kv) * block_kv + count


def _padded_stack(plans, name: str, device):
    """[power of two >= len(plans), ...] of one per-plan tensor (zeros beyond)."""
    first = getattr(plans[0], name)
    out = torch.zeros((_plan_slots(len(plans)),) + tuple(first.shape), dtype=first.dtype,
                      device=device)
    for i, p in enumerate(plans):
        out[i] = getattr(p, name)
    return out


def _table_mod(plans, head_table, block_q, block_kv, head_step, device):
    words_rows, bases = 0, []
    for p in plans:
        bases.append(words_rows)
        words_rows += int(p.words.shape[0])
    first = plans[0]
    words = torch.zeros((_power_of_two(max(words_rows, 1)),) + tuple(first.words.shape[1:]),
                        dtype=torch.int32, device=device)
    tiles = torch.zeros((_plan_slots(len(plans)),) + tuple(first.tiles.shape),
                        dtype=torch.int32, device=device)
    for i, (p, base) in enumerate(zip(plans, bases)):
        if p.words.shape[0]:
            words[base:base + p.words.shape[0]] = p.words
        tiles[i] = torch.where(p.tiles >= PARTIAL_BASE, p.tiles + base, p.tiles)
    return table_mask_mod(head_table, tiles, words, block_q, block_kv, head_step)


def stacked_mask_mod(plans: list, block_q: int, block_kv: int, q_len: int, device):
    """(slots -> the mask_mod of heads running plans[slots[h]], its kind): the plans'
    tables stacked once, each call's mask_mod reading its heads' slots (an int tensor
    [H] on the device; routed.py), so a new routing choice is new data."""
    if all(p.row_starts is not None for p in plans):
        starts = _padded_stack(plans, "row_starts", device)
        ends = _padded_stack(plans, "row_ends", device)
        return (lambda slots: row_mask_mod(slots, starts, ends, q_len, 1)), ROWS
    return (lambda slots: _table_mod(plans, slots, block_q, block_kv, 1, device)), TABLE


def assemble(plans: list, head_plan, block_q: int, block_kv: int, q_len: int, kv_len: int,
             device, per_head: bool, mask_mod: str = "auto", grad: bool = False) -> BlockMask:
    """A BlockMask from distinct plans' DeviceTables and each head's plan index.

    per_head False: one plan for every head (arrays [1, 1, ...]); else
    [1, H, ...] with head h running plans[head_plan[h]]. mask_mod "auto": the
    per-row mask_mod when every plan has row intervals, else the table's.
    """
    first = plans[0]
    if per_head:
        index = torch.as_tensor(np.asarray(head_plan, dtype=np.int64), device=device)
        stack = lambda name: torch.stack([getattr(p, name) for p in plans])[index][None]  # noqa: E731
        head_step = 1
    else:
        stack = lambda name: getattr(first, name)[None, None]  # noqa: E731
        head_step = 0
    head_table = torch.as_tensor(np.asarray(head_plan if per_head else [0], dtype=np.int32),
                                 device=device)
    rows = mask_mod != TABLE and all(p.row_starts is not None for p in plans)
    if mask_mod == ROWS and not rows:
        raise ValueError(f"mask_mod: 'rows' needs every row to keep at most {ROW_INTERVALS} "
                         f"runs of keys; this mask has more (use 'auto' or 'table')")
    if rows:
        function = row_mask_mod(head_table, _padded_stack(plans, "row_starts", device),
                                _padded_stack(plans, "row_ends", device), q_len, head_step)
    else:
        function = _table_mod(plans, head_table, block_q, block_kv, head_step, device)
    # The q-block lists serve FlexAttention's backward only (grad mode).
    extra = {"compute_q_blocks": grad} if _COMPUTE_Q_BLOCKS else {}
    block_mask = BlockMask.from_kv_blocks(
        stack("partial_num"), stack("partial_idx"), stack("full_num"), stack("full_idx"),
        BLOCK_SIZE=(block_q, block_kv), mask_mod=function, seq_lengths=(q_len, kv_len), **extra)
    setattr(block_mask, MASK_MOD_TAG, ROWS if rows else TABLE)
    if all(not p.host.partial_num.any() for p in plans):
        # Full tiles only (tile-granular plans): what compiled FlexAttention runs, with no
        # mask_mod; the exact one above stays for eager calls, which ignore the blocks.
        no_mask = BlockMask.from_kv_blocks(
            stack("partial_num"), stack("partial_idx"), stack("full_num"), stack("full_idx"),
            BLOCK_SIZE=(block_q, block_kv), mask_mod=None, seq_lengths=(q_len, kv_len), **extra)
        setattr(no_mask, MASK_MOD_TAG, NO_MASK)
        setattr(block_mask, FULL_ONLY_TAG, no_mask)
    return block_mask


def block_mask_for(masks, q_len: int, kv_len: int, block_q: int, block_kv: int, device,
                   window=(0, 0, 0, 0), per_head: bool | None = None,
                   mask_mod: str = "auto") -> BlockMask:
    """The cached BlockMask of one mask (every head) or a per-head list of masks
    (None for a head that keeps nothing: its output is 0 and its LSE -inf, at no
    cost in compiled FlexAttention, which visits no tile of it). mask_mod: "auto"
    (per-row where the rows allow it), "rows" or "table"."""
    if mask_mod not in MASK_MOD_CHOICES:
        raise ValueError(f"mask_mod: expected one of {MASK_MOD_CHOICES}, got {mask_mod!r}")
    if per_head is None:
        per_head = isinstance(masks, (list, tuple))
    heads = list(masks) if per_head else [masks]
    grad = torch.is_grad_enabled()  # a backward needs the BlockMask's q-block lists
    key = (tuple(heads), per_head, q_len, kv_len, block_q, block_kv, tuple(window), str(device),
           mask_mod, grad)
    found = _lru_get(_MASK_CACHE, key)
    if found is not None:
        return found
    distinct: dict = {}
    head_plan = [distinct.setdefault(m, len(distinct)) for m in heads]
    plans = [device_tables(m, q_len, kv_len, block_q, block_kv, window, device) for m in distinct]
    return _lru_put(_MASK_CACHE, key, assemble(plans, head_plan, block_q, block_kv, q_len, kv_len,
                                               device, per_head, mask_mod, grad))


def joined_block_mask(bands, segments, q_len: int, kv_len: int, count: int, block_q: int,
                      block_kv: int, device) -> BlockMask:
    """The cached per-head BlockMask of band masks `bands` and segment masks `segments`
    (None: a head that keeps nothing) joined into one plan each: the call runs keys
    [band keys, padding, segment keys] (joined_kv_len of them)."""
    grad = torch.is_grad_enabled()
    key = ("joined", tuple(bands), tuple(segments), q_len, kv_len, count, block_q, block_kv,
           str(device), grad)
    found = _lru_get(_MASK_CACHE, key)
    if found is not None:
        return found
    distinct: dict = {}
    head_plan = [distinct.setdefault(pair, len(distinct)) for pair in zip(bands, segments)]
    total = joined_kv_len(kv_len, count, block_kv)
    plans = [device_tables(None, q_len, total, block_q, block_kv, (0, 0, 0, 0), device)
             if band is None else
             joined_device_tables(band, segment, q_len, kv_len, count, block_q, block_kv, device)
             for band, segment in distinct]
    return _lru_put(_MASK_CACHE, key, assemble(plans, head_plan, block_q, block_kv, q_len, total,
                                               device, True, "auto", grad))


def clear_caches() -> None:
    _DEVICE_CACHE.clear()
    _MASK_CACHE.clear()
