"""Comparing two FlexAttention BlockMasks' block lists: what bench/flex_plans.py
and bench/gpu_check.py check before they compare the time to build them."""

from __future__ import annotations


def block_lists(bm):
    """Per (head, q-block): (set of visited kv-blocks, set of full kv-blocks)."""
    rows = []
    num, idx = bm.kv_num_blocks.cpu(), bm.kv_indices.cpu()
    fnum, fidx = bm.full_kv_num_blocks.cpu(), bm.full_kv_indices.cpu()
    for h in range(num.shape[1]):
        for i in range(num.shape[2]):
            partial = set(idx[0, h, i, :int(num[0, h, i])].tolist())
            full = set(fidx[0, h, i, :int(fnum[0, h, i])].tolist())
            rows.append((partial | full, full))
    return rows


def same_lists(a, b, q_len, kv_len, block) -> bool:
    """The same tiles visited, and the same full tiles away from the ragged edges:
    tilesplash counts a ragged edge tile full when every in-range pair is kept,
    create_block_mask (compiled) counts its padding, so it calls the tile partial;
    both run it right (FlexAttention masks out-of-range pairs itself)."""
    q_blocks = -(-q_len // block)
    ragged_q = q_len % block != 0
    last_kv = -(-kv_len // block) - 1 if kv_len % block else None
    for r, ((visited_a, full_a), (visited_b, full_b)) in enumerate(
            zip(block_lists(a), block_lists(b))):
        if visited_a != visited_b:
            return False
        if ragged_q and r % q_blocks == q_blocks - 1:
            continue
        if full_a - {last_kv} != full_b - {last_kv}:
            return False
    return len(block_lists(a)) == len(block_lists(b))
