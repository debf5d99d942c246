"""The flex backend's own settings (tilesplash.flex.configure): how VideoAttention's
flex runner executes, as opposed to what it computes.

These were VideoAttention arguments (flex_strategy, flex_compile); they mean
nothing to the other backends, so they live with the flex backend, read at
every call. Torch-free: VideoAttention's group agreement reads them without
importing torch.
"""

from __future__ import annotations

STRATEGIES = ("permute", "per_head")
_UNSET = object()
_settings = {"strategy": "permute", "compile": None}


def current() -> dict:
    """{"strategy": "permute" or "per_head", "compile": None, True or False}."""
    return dict(_settings)


class Configured:
    """What configure() returns: the settings before it, restored on leaving a `with`."""

    def __init__(self, before: dict):
        self.before = before

    def __enter__(self) -> "Configured":
        return self

    def __exit__(self, *exc) -> None:
        _settings.update(self.before)


def configure(*, strategy=_UNSET, compile=_UNSET) -> Configured:
    """Set the flex backend's settings for the calls that follow (every VideoAttention
    of the process); an argument left out keeps its value. Usable as a context manager,
    which restores the previous settings on exit.

    strategy: "permute" (the default: temporal and sta heads run on rows gathered
    into their order) or "per_head" (every head in the original order, for
    measurements; docs/gpu.md). compile: None (compile FlexAttention on every device
    but the CPU), True or False (force it)."""
    if strategy is not _UNSET and strategy not in STRATEGIES:
        raise ValueError(f"strategy: expected 'permute' or 'per_head', got {strategy!r}")
    if compile is not _UNSET and compile not in (None, True, False):
        raise ValueError(f"compile: expected None, True or False, got {compile!r}")
    before = current()
    if strategy is not _UNSET:
        _settings["strategy"] = strategy
    if compile is not _UNSET:
        _settings["compile"] = compile
    return Configured(before)
