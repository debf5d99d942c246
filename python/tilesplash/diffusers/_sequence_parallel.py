"""Sequence parallelism inside a diffusers transformer (``enable(..., process_group=)``) whose
spec names the "rope_patch_proj" hooks (ModelSpec.sequence: Wan's layout).

Every rank calls the transformer with the same full inputs. Three hooks split
the work along the sequence and join it again, leaving the model's code as it
is:

- ``rope`` (forward hook): the rotary tables are cut to this rank's tokens;
- ``patch_embedding`` (forward hook): the patched video [B, C, F, H, W],
  which the model flattens to [B, F * H * W, C], becomes this rank's
  contiguous shard [B, C, 1, 1, n_local], which flattens the same way;
- ``proj_out`` (forward hook): the shards of the final projection's output
  are gathered into the whole sequence, so every rank unpatchifies and
  returns the same full output. The output norm (its shift and scale are
  per batch entry) and the projection are per token, so gathering after
  them equals gathering before, and moves out_channels * prod(patch_size)
  values a token instead of the inner dimension (64 against 1,536 for Wan
  1.3B), as diffusers' own context-parallel plan for Wan does.

In between, everything but self-attention is per token (norms, feed-forward,
timestep modulation) and cross-attention's keys are the text, held whole by
every rank, so they run on the shard unchanged. Self-attention goes through
the tilesplash processor to ``VideoAttention(group=...)``: Ulysses, heads
routed as one process would route them.

Shards are balanced and in rank order (``torch.tensor_split``): the first
N mod P ranks hold one token more.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect

import torch

from .. import _dist

_WHO = "tilesplash.diffusers"


def shard_sizes(tokens: int, world: int) -> list[int]:
    """Tokens per rank of a balanced contiguous split, as torch.tensor_split makes it."""
    return [tokens // world + (1 if r < tokens % world else 0) for r in range(world)]


def forward_description(settings, transformer, inputs: dict) -> dict[str, str]:
    """What every rank's call of the transformer must share, by field: enable()'s
    settings (every field but the PER_RANK ones), the model (its class, its
    config but the private "_" keys such as the path it was loaded from, and a
    sample of its weights) and every input of the call (tensors by shape,
    dtype and a digest of all their bytes)."""
    described = {f"enable.{field.name}": _dist.describe(getattr(settings, field.name))
                 for field in dataclasses.fields(settings) if field.name not in _dist.PER_RANK}
    described["model"] = f"{type(transformer).__module__}.{type(transformer).__qualname__}"
    for key, value in dict(getattr(transformer, "config", {})).items():
        if not key.startswith("_"):
            described[f"model config {key}"] = _dist.describe(value)
    described["model weights (8 values a tensor)"] = _weights_sample(transformer)
    for name, value in inputs.items():
        described[f"input {name}"] = _dist.describe(value)
    return described


def _weights_sample(transformer) -> str:
    """A digest of every parameter's name, shape and dtype and of 8 values spread over
    it: another checkpoint or a fused LoRA changes it, at the cost of a few
    small reads per tensor (a digest of every weight would read the whole model
    on every call)."""
    names, samples = [], []
    for name, parameter in transformer.named_parameters():
        names.append(f"{name}{tuple(parameter.shape)}{parameter.dtype}")
        flat = parameter.detach().reshape(-1)
        if flat.numel() == 0 or flat.is_meta:
            continue
        last = flat.numel() - 1
        picks = sorted({i * last // 7 for i in range(8)})
        samples.append(flat[torch.tensor(picks, device=flat.device)].to(torch.float64))
    digest = hashlib.blake2b("\n".join(names).encode(), digest_size=16)
    if samples:
        digest.update(torch.cat(samples).cpu().numpy().tobytes())
    return f"{len(names)} tensors, digest {digest.hexdigest()}"


class SequenceParallel:
    """The process group of an enabled transformer and the hooks that shard its sequence."""

    def __init__(self, process_group, timeout) -> None:
        _, dist = _dist.torch_modules()
        if not isinstance(process_group, dist.ProcessGroup):
            raise TypeError(
                f"{_WHO}.enable: process_group must be a torch.distributed ProcessGroup "
                f"(torch.distributed.group.WORLD for every process) or None; got "
                f"{type(process_group).__name__}")
        self.ctx = _dist.Group(process_group, timeout, f"{_WHO} (process_group)")
        self.group = process_group
        self.timeout = self.ctx.seconds
        self.sizes: list[int] | None = None
        self.range: tuple[int, int] | None = None
        self._hooks: list = []

    @property
    def local_tokens(self) -> int | None:
        return None if self.range is None else self.range[1] - self.range[0]

    def install(self, transformer, hooks: str) -> None:
        """Hooks of the kind the model's spec names (ModelSpec.sequence)."""
        if hooks != "rope_patch_proj":
            raise ValueError(f"{_WHO}: unknown sequence-parallel hooks {hooks!r}")
        self._hooks += [
            transformer.rope.register_forward_hook(self._slice_rotary),
            transformer.patch_embedding.register_forward_hook(self._slice_patches),
            transformer.proj_out.register_forward_hook(self._gather),
        ]

    def remove(self) -> None:
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        self.sizes = self.range = None

    def begin_forward(self, video: tuple[int, int, int], timestep, settings, transformer,
                      args: tuple, kwargs: dict) -> None:
        """Before a call of the transformer (its forward's args and kwargs): the ranks
        agree that they make the same call (forward_description; all raise, naming
        what differs, otherwise), and this rank's shard of the video's tokens is fixed."""
        inputs = inspect.signature(transformer.forward).bind_partial(*args, **kwargs).arguments
        _dist.agree_description(
            self.ctx, "all_gather of the transformer call's settings, model and inputs",
            forward_description(settings, transformer, inputs))
        if torch.as_tensor(timestep).ndim == 2:
            raise ValueError(
                f"{_WHO}: per-token timesteps (Wan 2.2 TI2V, timestep [batch, tokens]) are not "
                "supported with process_group: their modulation would need the same split")
        frames, height, width = video
        self.sizes = shard_sizes(frames * height * width, self.ctx.size)
        begin = sum(self.sizes[:self.ctx.rank])
        self.range = (begin, begin + self.sizes[self.ctx.rank])

    def _slice_rotary(self, module, args, output):
        begin, end = self._current()
        freqs_cos, freqs_sin = output  # [1, N, 1, d] each
        return freqs_cos[:, begin:end], freqs_sin[:, begin:end]

    def _slice_patches(self, module, args, output):
        begin, end = self._current()
        if output.flatten(2).shape[2] != sum(self.sizes):
            raise ValueError(f"{_WHO}: the patch embedding gave {output.flatten(2).shape[2]} "
                             f"tokens, the input's shape {sum(self.sizes)}")
        # [B, C, F, H, W] -> [B, C, 1, 1, n_local]: the model's flatten(2) then
        # gives this rank's tokens.
        return output.flatten(2)[:, :, begin:end].unsqueeze(2).unsqueeze(2)

    def _gather(self, module, args, shard):
        _, dist = _dist.torch_modules()
        # shard: [B, n_local, C]
        longest = max(self.sizes)
        padded = shard.new_zeros(shard.shape[0], longest, shard.shape[2])
        padded[:, :shard.shape[1]] = shard
        rows = [torch.empty_like(padded) for _ in self.sizes]
        self.ctx.run("all_gather of proj_out's output",
                     lambda: dist.all_gather(rows, padded, group=self.group, async_op=True))
        return torch.cat([row[:, :n] for row, n in zip(rows, self.sizes)], dim=1)

    def _current(self) -> tuple[int, int]:
        if self.range is None:
            raise RuntimeError(f"{_WHO}: call the transformer itself, not its parts: its forward "
                               "hook splits the sequence")
        return self.range
