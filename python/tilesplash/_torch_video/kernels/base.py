"""The interface of a flex kernel: what it can run, and how it runs one call."""

from __future__ import annotations


class Kernel:
    name: str = ""

    def unavailable(self, block_mask, q, need_lse) -> str | None:
        """Why this kernel cannot run the call (None: it can): a missing install, a device,
        a mask or an output it does not serve."""
        raise NotImplementedError

    def run(self, q, k, v, block_mask, scale, *, compile, need_lse, kernel_options):
        """(out [B, H, Nq, dv] in q's dtype, lse float32 [B, H, Nq] or None)."""
        raise NotImplementedError


class KernelRefused(RuntimeError):
    """A kernel refused a call it said it could run: the runner moves to the next one
    (the kernel remembers, and says so in unavailable() from then on)."""
