"""The sequence-parallel toolkit behind tilesplash.distributed (the public
functions) and the other modules that run work over a process group
(_video_group, diffusers' sequence split). Private: its names may change;
import the public ones from tilesplash.distributed."""

from __future__ import annotations

from .agreement import PER_RANK, describe
from .agreement import agree as agree_description
from .call import Call, agree, check_local, start
from .group import (DEFAULT_TIMEOUT, MAX_TIMEOUT, Group, check_timeout, release_buffers,
                    torch_modules, workspace)
from .ring import ring_attention
from .shards import SequenceShards, head_range
from .ulysses import UlyssesExchange, single, ulysses_attention, ulysses_exchange

__all__ = [
    "Call",
    "DEFAULT_TIMEOUT",
    "Group",
    "MAX_TIMEOUT",
    "PER_RANK",
    "SequenceShards",
    "UlyssesExchange",
    "agree",
    "agree_description",
    "check_local",
    "check_timeout",
    "describe",
    "head_range",
    "release_buffers",
    "ring_attention",
    "single",
    "start",
    "torch_modules",
    "ulysses_attention",
    "ulysses_exchange",
    "workspace",
]
