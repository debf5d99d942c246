"""A call argument one rank of VideoAttention(group=) rejects (key_lengths, layer)
makes every rank raise at once, naming it, instead of leaving the others to wait
the group's timeout (issue 27, defect 4). One 2-rank gloo launch runs every case."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not dist.is_available() or not dist.is_gloo_available():
    pytest.skip("torch.distributed with gloo is not available", allow_module_level=True)

import dist_rel_cases as cases  # noqa: E402
from dist_harness import run_ranks, values  # noqa: E402

WORLD = 2
NAMED = {"key_lengths out of range": "key_lengths[0]",
         "key_lengths of another type": "key_lengths",
         "key_lengths longer than the batch": "key_lengths: expected one per batch entry (1)",
         "layer negative": "layer"}


def test_a_rejected_argument_on_one_rank_raises_on_every_rank_at_once():
    per_rank = values(run_ranks(WORLD, cases.rejected, list(cases.CASES), timeout=300))
    for name, named in NAMED.items():
        for rank in range(WORLD):
            kind, message, seconds = per_rank[rank][name]
            assert kind in ("ValueError", "TypeError"), (name, rank, kind, message)
            if rank != WORLD - 1:
                assert kind == "ValueError", (name, rank, kind, message)
            assert named in message, (name, rank, message)
            assert seconds < cases.TIMEOUT / 3, (name, rank, seconds, message)
