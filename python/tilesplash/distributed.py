"""Sequence-parallel attention over torch.distributed process groups.

Every rank of a group holds a contiguous shard of the sequence (rank r the
tokens right after rank r - 1's; shards may differ in length, e.g. from
torch.tensor_split) for all heads, and gets the attention output of its own
shard back. Two schemes, both exact (equal to one process running
tilesplash.attention on the whole sequence, within float32 rounding):

- ulysses_attention: one all-to-all turns sequence shards into head shards
  (each rank gets the whole sequence for about H/P heads), tilesplash runs
  those heads with the global mask, a second all-to-all returns the sequence
  shards. Per rank and layer it moves about 4 N H d / P elements.
- ring_attention: the K/V shards travel around the ring; at each step a rank
  runs its queries against the visiting block under the window of the global
  mask (skipping blocks the mask leaves empty) and merges the partial
  results through their LSEs (tilesplash.merge_attention). For more ranks
  than heads, or when memory per rank must fall with P.

Works with any backend that has all_to_all_single and isend / irecv (gloo on
CPUs; tilesplash itself runs on the CPU). torch is imported on first use, not
with this module. Every collective waits at most `timeout` seconds (None:
DEFAULT_TIMEOUT; seconds or a timedelta in (0, MAX_TIMEOUT], rounded up to
whole milliseconds): a rank that raised, hung or exited makes the others raise
(TimeoutError or RuntimeError naming the step) instead of hanging. Arguments
are checked on every rank and compared across ranks before any data moves
(every argument but the rank's own tensors, group, timeout, threads and
context; the mask by its SPEC), so a bad argument on one rank, or ranks that
disagree, make every rank raise, naming what differs.

The pieces are public so that whole-sequence per-head work (VideoAttention's
routing, a diffusers processor) can run on head shards: ulysses_exchange()
gives the exchange of one sharding (to_heads / to_sequence), head_range()
maps a rank's local heads to global head indices, SequenceShards says where
each rank's tokens lie. They live in the private package tilesplash._dist;
this module is their public face.
"""

from __future__ import annotations

from ._dist import (
    DEFAULT_TIMEOUT,
    MAX_TIMEOUT,
    SequenceShards,
    UlyssesExchange,
    head_range,
    release_buffers,
    ring_attention,
    ulysses_attention,
    ulysses_exchange,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "MAX_TIMEOUT",
    "SequenceShards",
    "UlyssesExchange",
    "head_range",
    "release_buffers",
    "ring_attention",
    "ulysses_attention",
    "ulysses_exchange",
]
