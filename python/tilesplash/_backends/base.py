"""The interface every compute backend implements, and the refusals its capabilities answer.

A backend receives decided plans and checked tensors and returns outputs; it
holds no rule (routing, warm-up, methods and tuning keys are the core's). The
front doors resolve `backend=` once (tilesplash._backends.resolve) and then
ask the object, never the name: which tile sizes it takes, which precisions,
whether it compensates skipped tiles,
which devices, how it runs one masked attention, how it merges two partial
results through their LSEs, and which runner serves a VideoAttention.
"""

from __future__ import annotations

from .._checks import BlockRule, check_blocks, check_bool, check_precision


class Backend:
    """One way to compute attention. Subclasses set the capabilities and implement
    attention(); merge() and video_runner() have defaults for backends without them."""

    name: str = ""
    summary: str = ""
    any_device: bool = False  # takes torch tensors on devices other than the CPU
    precisions: tuple[str, ...] = ("default",)  # what precision= may say on it
    compensates: bool = False  # runs compensate=True (skipped tiles approximated)
    blocks: BlockRule  # the block_q / block_kv it takes

    def is_default_for(self, q) -> bool:
        """Whether backend="auto" picks this backend for a call whose first tensor is q."""
        raise NotImplementedError

    def check_input(self, q) -> None:
        """Raise naming q (or backend) when this backend cannot run q's kind or device."""

    def check_blocks(self, block_q, block_kv):
        return check_blocks(block_q, block_kv, self.blocks)

    def check_precision(self, precision) -> str:
        """precision checked, then refused where this backend lacks it (one wording)."""
        precision = check_precision(precision)
        if precision not in self.precisions:
            raise ValueError(f"precision: {precision!r} runs on the native CPU kernel only; the "
                             f"{self.name} backend takes precision="
                             f"{' or '.join(map(repr, self.precisions))}")
        return precision

    def check_compensate(self, compensate) -> bool:
        """compensate checked, then refused where this backend lacks it (one wording)."""
        compensate = check_bool(compensate, "compensate")
        if compensate and not self.compensates:
            raise ValueError(f"compensate: True runs on the native CPU kernel only; the "
                             f"{self.name} backend takes compensate=False")
        return compensate

    def mask_argument(self, mask, kind):
        """The mask as attention() hands it to this backend (a Mask by default)."""
        from .._mask import as_mask

        return as_mask(mask)

    def attention(self, q, k, v, *, mask, layout, scale, block_q, block_kv, threads, window,
                  context, precision, kind, compensate=False):
        """(out in q's layout and dtype, float32 lse [batch, heads, N]) of checked arguments;
        compensate only where the backend compensates."""
        raise NotImplementedError

    def merge(self, out_a, lse_a, out_b, lse_b, layout):
        """Two partial results of the same queries over disjoint keys, merged through their
        LSEs: (out float32 in `layout`, lse float32)."""
        raise NotImplementedError

    def video_runner(self, owner, settings):
        """The object whose forward() runs a VideoAttention's calls on this backend, or None
        for the native core's own forward."""
        return None

    def __repr__(self) -> str:
        return f"<tilesplash backend {self.name!r}>"
