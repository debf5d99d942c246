"""What bench/wan_block.py measures a block with: hooks that time the block, its
self-attention module and every attention call (self and cross apart) and keep
their outputs; whether the kernel read q, k, v in place; and the machine's CPU
model and load, printed beside every figure."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time

import torch


class Timers:
    """Wall time of the block, its self-attention module and each attention call; the outputs."""

    def __init__(self, model, spec) -> None:
        self.reset()
        self.block_output: torch.Tensor | None = None
        self.attn1_output: torch.Tensor | None = None
        self.in_place: dict[str, bool] = {}
        block = spec.block(model)
        attention = getattr(block, spec.attention)
        self._starts: dict[str, float] = {}
        self._hooks = [
            block.register_forward_pre_hook(lambda *_: self._start("block")),
            block.register_forward_hook(self._block_end),
            attention.register_forward_pre_hook(lambda *_: self._start("attn1")),
            attention.register_forward_hook(self._attn1_end),
        ]
        # The processors call the dispatcher by the name their module imported.
        self._module = sys.modules[type(attention.processor).__module__]
        self._dispatch = self._module.dispatch_attention_fn
        self._module.dispatch_attention_fn = self._timed_dispatch

    def reset(self) -> None:
        self.block = self.attn1 = self.self_attention = self.cross_attention = 0.0

    def close(self) -> None:
        self._module.dispatch_attention_fn = self._dispatch
        for hook in self._hooks:
            hook.remove()

    def _start(self, name: str) -> None:
        self._starts[name] = time.perf_counter()

    def _block_end(self, module, args, output):
        self.block += time.perf_counter() - self._starts["block"]
        self.block_output = _first(output).double().flatten()

    def _attn1_end(self, module, args, output):
        self.attn1 += time.perf_counter() - self._starts["attn1"]
        self.attn1_output = _first(output).double().flatten()

    def _timed_dispatch(self, query, key, value, *args, **kwargs):
        start = time.perf_counter()
        out = self._dispatch(query, key, value, *args, **kwargs)
        seconds = time.perf_counter() - start
        if key.shape[1] == query.shape[1]:
            self.self_attention += seconds
        else:
            self.cross_attention += seconds
        return out

    def watch_layout(self, runtime_class) -> None:
        """Record whether the kernel reads tilesplash's q, k, v in place (no packing copy)."""
        import tilesplash._core as core
        from tilesplash._tensors import torch_desc

        attend = runtime_class.attend
        timers = self

        def attend_and_check(runtime, site, q, k, v, *args):
            for name, x in (("q", q), ("k", k), ("v", v)):
                timers.in_place[name] = bool(core.reads_in_place(torch_desc(x, name), "bnhd"))
            return attend(runtime, site, q, k, v, *args)

        runtime_class.attend = attend_and_check
        self._hooks.append(_Restore(runtime_class, "attend", attend))


def _first(output):
    return output[0] if isinstance(output, tuple) else output


class _Restore:
    def __init__(self, owner, name, value) -> None:
        self.owner, self.name, self.value = owner, name, value

    def remove(self) -> None:
        setattr(self.owner, self.name, self.value)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
