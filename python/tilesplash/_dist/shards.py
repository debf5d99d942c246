"""Where each rank's tokens and heads lie under sequence parallelism."""

from __future__ import annotations

from dataclasses import dataclass

from .._checks import check_int


@dataclass(frozen=True)
class SequenceShards:
    """Where each rank's contiguous shard lies: sizes in rank order."""

    sizes: tuple[int, ...]

    @property
    def total(self) -> int:
        return sum(self.sizes)

    def range(self, rank: int) -> tuple[int, int]:
        """The global [begin, end) of rank `rank`'s shard."""
        begin = sum(self.sizes[:rank])
        return begin, begin + self.sizes[rank]


def head_range(heads: int, rank: int, world: int) -> tuple[int, int]:
    """The global heads [begin, end) that rank `rank` of `world` runs under Ulysses.

    A balanced contiguous split: every rank gets floor(H / P) or ceil(H / P)
    heads, in rank order; with P > H some ranks get none. Global head index =
    begin + local index, which is what per-head decisions (routing, per-head
    masks) must be keyed on to match one process. Needs heads >= 0, world >= 1
    and 0 <= rank < world.
    """
    world = check_int(world, "world", 1)
    rank = check_int(rank, "rank", 0, maximum=world - 1)
    heads = check_int(heads, "heads", 0)
    return rank * heads // world, (rank + 1) * heads // world
