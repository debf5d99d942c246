"""Switch a diffusers video transformer's self-attention to tilesplash.

    import tilesplash.diffusers
    handle = tilesplash.diffusers.enable(pipe.transformer, density=0.25, dense_steps=10)
    video = pipe(...).frames
    print(tilesplash.diffusers.summary_table(handle.report()))
    handle.remove()

``enable`` swaps the processor of every block's self-attention (``attn1``) for
a tilesplash one; cross-attention and everything else stay as they are. A
forward pre-hook on the transformer reads, on every call, the latent video's
frames, height and width after patching (from the input's shape and the
model's patch size) and the denoising step (from the timesteps: a new value
starts a new step, so classifier-free guidance's two calls at one timestep are
one step). Each processor knows its layer. Supported: ``WanTransformer3DModel``
(Wan 2.1 / 2.2), ``WanVACETransformer3DModel`` and
``CogVideoXTransformer3DModel``; see docs/diffusers.md for what does not fit
(HunyuanVideo) and why.

With ``process_group=`` every rank of a torch.distributed group calls the
transformer with the same inputs and gets the same output, while the
sequence is split across the ranks inside it (sequence parallelism, Ulysses
for self-attention; ``WanTransformer3DModel`` only): see
``_sequence_parallel`` and docs/diffusers.md.
"""

from __future__ import annotations

import copy
import numbers

try:
    import diffusers  # noqa: F401  (fail here, with the fix, rather than inside enable)
    import torch
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("tilesplash.diffusers needs PyTorch and diffusers: pip install torch diffusers") from error

import tilesplash

from .. import _dist
from ._processors import ModelKind, model_kinds
from ._runtime import Runtime, Settings, summarize, summary_table
from ._sequence_parallel import SequenceParallel

__all__ = ["enable", "TilesplashHandle", "summarize", "summary_table"]



class TilesplashHandle:
    """What ``enable`` returns: step override, report, and the way back."""

    def __init__(self, transformer: torch.nn.Module, kind: ModelKind, runtime: Runtime,
                 sequence: SequenceParallel | None = None) -> None:
        self._transformer = transformer
        self._kind = kind
        self._runtime = runtime
        self._sequence = sequence
        self._originals: list[tuple[torch.nn.Module, object]] = []
        self._hook = None
        self._signature = None

    @property
    def active(self) -> bool:
        """True between ``enable`` and ``remove``."""
        return self._hook is not None

    def set_step(self, step: int) -> None:
        """Make the transformer's next call denoising step ``step``; counting goes on from there."""
        self._runtime.steps.pin(_non_negative_int(step, "step"))

    def report(self) -> list[dict]:
        """One dict per self-attention call since ``enable``, in call order: a deep
        copy, so editing it leaves the handle's own records as they were.

        Keys: ``layer``, ``module`` (e.g. "blocks.3.attn1"), ``step``, ``heads`` (one dict per head: ``choice``
        "dense" / "spatial" / "temporal" / a candidate of the method such as "radial" or
        "sta:3x3x3" / "svg2", ``mse_spatial``, ``mse_temporal``, ``mse`` (every candidate's),
        ``density``, ``seconds``, ...), ``seconds`` (the whole call), ``geometry``
        and the rest of ``tilesplash.VideoAttention``'s report (method, layer timings).
        """
        return copy.deepcopy(self._runtime.records)

    def clear_report(self) -> None:
        """Forget the calls reported so far (a long run's report grows per layer and step)."""
        self._runtime.records.clear()

    def remove(self) -> None:
        """Restore the original processors; the model then computes exactly what it did before ``enable``."""
        for module, original in reversed(self._originals):
            module.set_processor(original)
        self._originals.clear()
        if self._hook is not None:
            self._hook.remove()
            self._hook = None
        if self._sequence is not None:
            self._sequence.remove()
        self._runtime.clear()

    def _install(self) -> None:
        import inspect

        self._signature = inspect.signature(self._transformer.forward)
        for layer, name, module in self._kind.attention_modules(self._transformer):
            self._originals.append((module, module.processor))
            module.set_processor(self._kind.processor(self._runtime, layer, name))
        self._hook = self._transformer.register_forward_pre_hook(self._before_forward, with_kwargs=True)
        if self._sequence is not None:
            self._sequence.install(self._transformer)

    def _before_forward(self, module, args, kwargs):
        bound = self._signature.bind_partial(*args, **kwargs).arguments
        hidden_states = bound.get("hidden_states")
        timestep = bound.get("timestep")
        if hidden_states is None or timestep is None:
            raise ValueError(f"tilesplash: {self._kind.name} was called without hidden_states or timestep")
        video = self._kind.video_shape(module, hidden_states)
        if self._sequence is not None:
            self._sequence.begin_forward(video, timestep, self._runtime.settings, module, bound)
        self._runtime.begin_forward(video, timestep)
        return None

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"TilesplashHandle({self._kind.name}, {len(self._originals)} layers, {state})"


def enable(
    transformer: torch.nn.Module,
    *,
    method: str = "svg",
    density: float = 0.25,
    density_budget: float | None = None,
    sink: bool = True,
    dense_layers: int = 1,
    dense_steps: int = 0,
    force: str | None = None,
    samples: int = 64,
    process_group=None,
    threads: int = 0,
    context: tilesplash.ThreadingContext | None = None,
    timeout: float | None = None,
    backend: str = "auto",
) -> TilesplashHandle:
    """Run ``transformer``'s self-attention through tilesplash; returns a handle.

    method: the masks sparse heads run (docs/masks.md): "svg" (default: Sparse
        VideoGen, each head routed to a spatial or temporal mask), "spatial",
        "temporal", "radial" (Radial Attention), "sta" (Sliding Tile Attention,
        a window routed per head), "mix" (routed among spatial, temporal,
        radial and the sta windows) or "svg2" (Sparse VideoGen 2's per-head
        k-means clusters, warm-started across steps and reset for a new video).
    density: target fraction of the attention map each sparse head keeps, in (0, 1].
    density_budget: route only among candidates of at most this density (for
        "mix" and "sta"; e.g. 1.25 * density); None: all of them.
    sink: keep Wan's first-frame sink (every video query sees frame 0; not in
        sta or svg2).
    dense_layers, dense_steps: layers ``< dense_layers`` and steps ``< dense_steps``
        run dense (Sparse VideoGen keeps about the first 20% of steps dense).
    force: None (route each head), "dense", or a mask of the method for every
        head: "spatial" or "temporal" for "svg"; for the other methods a
        candidate's name ("radial", "sta:3x3x3", ..., "svg2"), checked when
        the first call reveals the geometry.
    samples: query rows sampled per layer call by the router.
    process_group: None, or a torch.distributed ProcessGroup
        (``torch.distributed.group.WORLD`` for every process) to split the
        sequence across its ranks: every rank calls the transformer with the
        same full inputs and gets the same full output; inside, each rank
        holds a contiguous shard of the tokens after the patch embedding,
        self-attention runs over the group (Ulysses: each rank routes and runs
        whole-sequence heads, the same decisions one process makes),
        cross-attention and the rest run on the shard, and the shards of the
        final projection's output are gathered. ``WanTransformer3DModel`` only.
    threads: kernel threads, 0 for all hardware threads (with a group: give
        each rank its share of the cores).
    timeout: with process_group, the seconds any collective waits for the
        other ranks (default tilesplash.distributed.DEFAULT_TIMEOUT); a rank
        that fails makes the others raise instead of hang.
    context: a tilesplash.ThreadingContext every layer of this handle runs on;
        None: the handle's VideoAttention objects own theirs. Handles (or
        processes, ranks) with their own contexts run side by side.
    backend: "auto" (the native kernel for a CPU transformer, FlexAttention
        for one on a GPU), "cpu" or "flex" (FlexAttention on any device, the
        CPU included); see tilesplash.VideoAttention and docs/gpu.md.
    """
    kind = _model_kind(transformer)
    timeout = _timeout(timeout)  # checked with or without a group
    sequence = None
    if process_group is not None:
        if kind.name != "WanTransformer3DModel":
            raise NotImplementedError(
                f"tilesplash.diffusers.enable: process_group supports WanTransformer3DModel only, not "
                f"{kind.name} (docs/diffusers.md says why); pass process_group=None"
            )
        sequence = SequenceParallel(process_group, timeout)
    method = _method(method)
    settings = Settings(
        method=method,
        density=_density(density),
        density_budget=None if density_budget is None else _density(density_budget, "density_budget"),
        sink=_bool(sink, "sink"),
        dense_layers=_non_negative_int(dense_layers, "dense_layers"),
        dense_steps=_non_negative_int(dense_steps, "dense_steps"),
        force=_force(force, method),
        samples=_positive_int(samples, "samples"),
        threads=_non_negative_int(threads, "threads", maximum=tilesplash._core.MAX_THREADS),
        context=_context(context),
        backend=_backend(backend),
    )
    for _, name, module in kind.attention_modules(transformer):
        processor = module.processor
        if isinstance(processor, kind.processor):
            raise ValueError(
                "tilesplash.diffusers.enable: transformer already has tilesplash enabled; call handle.remove() first"
            )
        if type(processor) is not kind.native_processor:
            raise ValueError(
                f"tilesplash.diffusers.enable: {name} runs {type(processor).__name__}; "
                f"expected diffusers' {kind.native_processor.__name__} (tilesplash reproduces that one exactly)"
            )
    handle = TilesplashHandle(transformer, kind, Runtime(settings, sequence), sequence)
    handle._install()
    return handle


def _model_kind(transformer) -> ModelKind:
    kinds = model_kinds()
    for kind in kinds:
        if isinstance(transformer, kind.model_class):
            return kind
    names = ", ".join(kind.name for kind in kinds)
    raise TypeError(
        f"tilesplash.diffusers.enable: transformer must be one of {names} (a pipeline's .transformer); "
        f"got {type(transformer).__name__}"
    )


def _method(value) -> str:
    names = tuple(tilesplash.methods())
    if not isinstance(value, str):
        raise TypeError(f"tilesplash.diffusers.enable: method must be a string; got {type(value).__name__}")
    if value not in names:
        raise ValueError(f"tilesplash.diffusers.enable: method must be one of {', '.join(map(repr, names))}; got {value!r}")
    return value


def _density(value, name: str = "density") -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"tilesplash.diffusers.enable: {name} must be a number in (0, 1]; got {type(value).__name__}")
    value = float(value)
    if not 0.0 < value <= 1.0:
        raise ValueError(f"tilesplash.diffusers.enable: {name} must be in (0, 1]; got {value}")
    return value


def _bool(value, name: str) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"tilesplash.diffusers.enable: {name} must be True or False; got {value!r}")
    return value


def _integer(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"tilesplash: {name} must be an integer; got {type(value).__name__}")
    return int(value)


def _context(context):
    if context is not None and not isinstance(context, tilesplash.ThreadingContext):
        raise TypeError(
            f"tilesplash.diffusers.enable: context must be a tilesplash.ThreadingContext or None, got {type(context).__name__}"
        )
    return context


def _backend(value) -> str:
    if value not in ("auto", "cpu", "flex"):
        raise ValueError(f"tilesplash.diffusers.enable: backend must be 'auto', 'cpu' or 'flex'; got {value!r}")
    return value


_INT64_MAX = 2**63 - 1


def _non_negative_int(value, name: str, maximum: int = _INT64_MAX) -> int:
    value = _integer(value, name)
    if not 0 <= value <= maximum:
        raise ValueError(f"tilesplash: {name} must be in [0, {maximum}]; got {value}")
    return value


def _timeout(value):
    """None, seconds or a timedelta in (0, 365 days], rounded up to whole milliseconds
    (c10d reads 0 ms as no timeout); checked with or without a group."""
    return _dist.check_timeout(value)


def _positive_int(value, name: str) -> int:
    value = _integer(value, name)
    if not 1 <= value <= _INT64_MAX:
        raise ValueError(f"tilesplash: {name} must be in [1, {_INT64_MAX}]; got {value}")
    return value


def _force(value, method: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TypeError(f"tilesplash.diffusers.enable: force must be None or a string; got {type(value).__name__}")
    names = ("dense",) + tuple(tilesplash.methods()[method]["mask_names"])
    if len(names) == 1:
        # The mask names depend on the geometry (sta windows): VideoAttention checks them.
        if value == "":
            raise ValueError("tilesplash.diffusers.enable: force must be None, 'dense' or a candidate's name; got ''")
        return value
    if value not in names:
        raise ValueError(f"tilesplash.diffusers.enable: force must be None or one of {', '.join(map(repr, names))}; got {value!r}")
    return value
