"""What the ranks of a call must agree on, compared in the call's first all_gather.

A call's description is {field: canonical text} of everything that changes
its result and must be equal on every rank: the arguments of the public
function (all of them but the PER_RANK ones, so an argument added later is
compared without anyone remembering to), the shapes and dtype they imply,
and the caller's own configuration (VideoAttention's, enable()'s). Every
rank gathers a 128-bit digest of its description with its other numbers;
only when the digests differ do the ranks gather the descriptions
themselves, so the error can name each field that differs with its value on
every rank. Every rank sees the same rows, so every rank takes the same
branch and raises at the same point: none is left waiting.
"""

from __future__ import annotations

import hashlib
import numbers
import pickle
from collections.abc import Mapping

import numpy as np

from .. import _core
from .._mask import Mask
from .._tensors import torch_module
from .group import Group, torch_modules

PER_RANK = frozenset({"self", "q", "k", "v", "group", "timeout", "threads", "context"})
"""Arguments that may differ between ranks: this rank's data (its shard), its
handle of the group, how long it waits and the threads it runs on (results
do not depend on the thread count). Every other argument must be equal."""

DERIVED = " (derived)"
"""The end of the name of a field that follows from others (a band the library
resolved from the density): named in an error only when no other field differs."""

DIGEST_WORDS = 2  # int64 words of the digest (128 bits)
_SHOWN = 80  # characters of a value an error message shows (its start and its end)


def describe(value) -> str:
    """Canonical text of one value: equal values give equal texts on every rank.

    Numbers by value (1 and 1.0 alike, floats exactly), strings quoted, masks
    and geometries as their SPEC, tensors and arrays by shape, dtype and a
    digest of their bytes, containers item by item. Objects of other types
    are described by their type alone.
    """
    if value is None or isinstance(value, bool):
        return repr(value)
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        x = float(value)
        return str(int(x)) if x.is_integer() and abs(x) < 2**53 else repr(x)
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, Mask):
        return str(value)
    if isinstance(value, Mapping):
        items = sorted((describe(k), describe(v)) for k, v in value.items())
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + "}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(describe(x) for x in value) + ")"
    torch = torch_module()
    if torch is not None and isinstance(value, torch.Tensor):
        return _describe_tensor(torch, value)
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return f"array{data.shape} {data.dtype} {_digest(data.reshape(-1).view(np.uint8))}"
    if isinstance(value, (_core.VideoGeometry, np.dtype)) or (
            torch is not None and isinstance(value, (torch.dtype, torch.device))):
        return str(value)
    return f"<{type(value).__module__}.{type(value).__qualname__}>"


def _describe_tensor(torch, x) -> str:
    data = x.detach()
    if data.layout != torch.strided:
        data = data.to_dense()
    raw = data.cpu().contiguous().reshape(-1).view(torch.uint8)
    return f"tensor{tuple(x.shape)} {str(x.dtype).removeprefix('torch.')} {_digest(raw.numpy())}"


def _digest(data) -> str:
    """128-bit digest of a bytes-like object (NumPy arrays without a copy)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def describe_arguments(arguments: Mapping) -> dict[str, str]:
    """{name: describe(value)} of a function's arguments (its locals() on entry),
    all but the PER_RANK ones."""
    return {name: describe(value) for name, value in arguments.items() if name not in PER_RANK}


def digest_words(description: Mapping[str, str]) -> list[int]:
    """DIGEST_WORDS signed int64 words of a description (order of fields does not matter)."""
    text = "\0".join(f"{k}\0{v}" for k, v in sorted(description.items())).encode()
    raw = hashlib.blake2b(text, digest_size=8 * DIGEST_WORDS).digest()
    return [int.from_bytes(raw[i:i + 8], "little", signed=True) for i in range(0, len(raw), 8)]


def gather_rows(ctx: Group, what: str, row: list[int]) -> list[list[int]]:
    """Every rank's int64 `row` (all of one length), in rank order: one all_gather
    (on the group's collective device: NCCL moves CUDA tensors only)."""
    torch, dist = torch_modules()
    mine = torch.tensor(row, dtype=torch.int64, device=ctx.device)
    rows = [torch.empty_like(mine) for _ in range(ctx.size)]
    ctx.run(what, lambda: dist.all_gather(rows, mine, group=ctx.group, async_op=True))
    return [x.tolist() for x in rows]


def gather_objects(ctx: Group, what: str, obj) -> list:
    """Every rank's picklable `obj`, in rank order, under the group's timeout."""
    torch, dist = torch_modules()
    data = torch.frombuffer(bytearray(pickle.dumps(obj)), dtype=torch.uint8).to(ctx.device)
    size = torch.tensor([data.numel()], dtype=torch.int64, device=ctx.device)
    sizes = [torch.empty_like(size) for _ in range(ctx.size)]
    ctx.run(f"all_gather of the sizes of {what}",
            lambda: dist.all_gather(sizes, size, group=ctx.group, async_op=True))
    longest = max(int(s) for s in sizes)
    padded = torch.zeros(longest, dtype=torch.uint8, device=ctx.device)
    padded[:data.numel()] = data
    rows = [torch.empty_like(padded) for _ in range(ctx.size)]
    ctx.run(f"all_gather of {what}",
            lambda: dist.all_gather(rows, padded, group=ctx.group, async_op=True))
    return [pickle.loads(row[:int(s)].cpu().numpy().tobytes()) for row, s in zip(rows, sizes)]


def check_same(ctx: Group, digests: list[list[int]], description: Mapping[str, str]) -> None:
    """Raises ValueError on every rank when the ranks' digests differ, naming each
    field that differs and its value on every rank (a second all_gather, of the
    descriptions, taken only then; DERIVED fields only when nothing else
    differs). `digests`: every rank's digest words."""
    if all(d == digests[0] for d in digests):
        return
    everyone = gather_objects(ctx, "the descriptions of the call", dict(description))
    fields = list(dict.fromkeys(name for d in everyone for name in d))  # in the callers' order
    differ = [name for name in fields if len({d.get(name) for d in everyone}) > 1]
    given = [name for name in differ if not name.endswith(DERIVED)]
    differ = given or differ  # what follows from a differing argument is shown only alone
    shown = "; ".join(f"{name}: [{', '.join(_shown(d.get(name)) for d in everyone)}]"
                      for name in differ)
    if len(differ) == 1:  # the short form: "... the same heads; by rank: [4, 4, 3]"
        shown = f"[{', '.join(_shown(d.get(differ[0])) for d in everyone)}]"
    names = ", ".join(differ) if differ else "(the same fields, different digests)"
    raise ValueError(f"{ctx.who}: every rank must pass the same {names}; by rank: {shown}")


def _shown(text: str | None) -> str:
    if text is None:
        return "(none)"
    if ", " in text:  # quoted, so that the list's commas stay the list's
        text = repr(text)
    if len(text) <= _SHOWN:
        return text
    # The end too: digests and the last terms of a long SPEC are where values differ.
    return text[:_SHOWN // 2] + "..." + text[-(_SHOWN // 2 - 3):]


def agree(ctx: Group, what: str, description: Mapping[str, str]) -> None:
    """One all_gather of the description's digest; raises on every rank when the ranks'
    descriptions differ (check_same)."""
    rows = gather_rows(ctx, what, digest_words(description))
    check_same(ctx, rows, description)
