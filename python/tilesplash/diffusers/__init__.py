"""Switch a diffusers video transformer's self-attention to tilesplash.

    import tilesplash.diffusers
    handle = tilesplash.diffusers.enable(pipe, density=0.25)   # or pipe.transformer
    video = pipe(...).frames
    print(tilesplash.diffusers.summary_table(handle.report()))
    handle.remove()

tilesplash registers itself as a diffusers attention backend ("tilesplash",
added to diffusers' registry at run time) and ``enable`` points the
self-attention modules over the video tokens at it, guided by a per-model
table (``_models``): which modules, the video's frames, height and width
after patching (read from the transformer's input on every call), the text's
place in the joint sequence, key padding, token orders. The denoising step
comes from the pipeline's scheduler (every transformer of the pipeline, such
as Wan 2.2's two experts, on one count) or, for a bare transformer, from the
timesteps it is called with. ``docs/diffusers.md`` lists the models served,
the ones refused and why.

With ``process_group=`` every rank of a torch.distributed group calls the
transformer with the same inputs and gets the same output, while the
sequence is split across the ranks inside it (the models whose spec names
``sequence`` hooks): see ``_sequence_parallel`` and docs/diffusers.md. Models
with diffusers' own context-parallel plan also run under
``transformer.enable_parallelism(...)``: tilesplash's backend joins it.
"""

from __future__ import annotations

import copy

try:
    import diffusers  # noqa: F401  (fail here, with the fix, rather than inside enable)
    import torch
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("tilesplash.diffusers needs PyTorch and diffusers: pip install torch diffusers") from error

import tilesplash

from .. import _core
from ._dispatch import ModelState, add_runtime, drop_runtime
from ._install import Installed, carries_tilesplash, check_processors, installed_on, strip
from ._models import model_specs, spec_for
from .._backends import BACKENDS, check_backend
from .._checks import (MAX_THREADS, check_bool, check_fraction, check_granularity, check_int,
                       check_precision, prefixed)
from .._dist import check_timeout
from .._method_options import check_error_target, check_method_options
from .._methods import DEFAULT_METHOD, check_method, method_flag
from .._threading import check_context
from ._fidelity import Fidelity
from ._fidelity_run import fidelity, plot_fidelity
from ._report import plot, summarize, summary_table
from ._runtime import Runtime, Settings
from ._sequence_parallel import SequenceParallel
from ._steps import Steps

__all__ = ["enable", "handle_of", "remove", "TilesplashHandle", "plot", "summarize",
           "summary_table", "supported_models", "fidelity", "plot_fidelity", "Fidelity"]

_WHO = "tilesplash.diffusers.enable"


def supported_models() -> dict[str, str | None]:
    """Every diffusers transformer class tilesplash knows: name -> None when served, else why not."""
    return {spec.name: spec.refusal for spec in model_specs()}


class TilesplashHandle:
    """What ``enable`` returns: step override, report, and the way back."""

    def __init__(self, runtime: Runtime, runtime_id: int, installed: list[Installed],
                 names: list[str]) -> None:
        self._runtime = runtime
        self._runtime_id = runtime_id
        self._installed = installed
        self._names = names

    @property
    def active(self) -> bool:
        """True between ``enable`` and ``remove``."""
        return bool(self._installed)

    @property
    def transformers(self) -> list[str]:
        """What was switched: a pipeline's component names ("transformer", "transformer_2"),
        or the class name of a transformer given alone."""
        return list(self._names)

    def set_step(self, step: int) -> None:
        """Make the next transformer call denoising step ``step`` (and the calls at its timestep);
        counting goes on from there."""
        self._runtime.steps.pin(check_int(step, "step", 0))

    def report(self) -> list[dict]:
        """One dict per self-attention call since ``enable``, in call order.

        Keys: ``transformer`` (the pipeline's component, e.g. "transformer_2", or the class
        name of a transformer enabled alone), ``layer``, ``module`` (e.g. "blocks.3.attn1"),
        ``step``, ``warmup`` (the call ran dense: warm-up layer, first or last steps),
        ``heads`` (one dict per batch entry and head: ``choice`` "dense" / "spatial" /
        "temporal" / a candidate of the method such as "radial" or "sta:3x3x3" / "svg2",
        ``family`` (its mask family, "sta" for "sta:3x3x3@0.1") and ``rung`` (its
        ladder density with an error target, else 0),
        ``mse_spatial``, ``mse_temporal``, ``mse`` (every candidate's), ``density``,
        ``seconds``, ...), ``seconds`` (the whole call), ``geometry`` (``frames``,
        ``height``, ``width`` after patching, ``text``, ``text_at``, ``key_lengths``) and
        the rest of ``tilesplash.VideoAttention``'s report (method, layer timings). A deep
        copy: editing it leaves the handle's own records as they were.
        """
        return copy.deepcopy(self._runtime.records)

    def clear_report(self) -> None:
        """Forget the calls reported so far (a long run's report grows per layer and step)."""
        self._runtime.records.clear()

    def remove(self) -> None:
        """Restore the original processors of every switched transformer; each then computes
        exactly what it did before ``enable``. A second call does nothing."""
        for installed in reversed(self._installed):
            installed.remove()
        if self._runtime.sequence is not None and self._installed:
            self._runtime.sequence.remove()
        self._installed = []
        self._runtime.clear()
        drop_runtime(self._runtime_id)

    def _forget(self, installed: Installed) -> None:
        """remove(model) took one transformer back; the handle ends with its last."""
        if installed not in self._installed:
            return
        self._installed.remove(installed)
        if not self._installed:
            if self._runtime.sequence is not None:
                self._runtime.sequence.remove()
            self.remove()

    def __repr__(self) -> str:
        state = "active" if self.active else "removed"
        return f"TilesplashHandle({', '.join(self._names)}, {len(self._runtime.sites)} layers, {state})"


def enable(
    target,
    *,
    method: str = DEFAULT_METHOD,
    density: float = 0.25,
    density_budget: float | None = None,
    sink: bool | None = None,
    dense_layers: int = 1,
    dense_steps: int | None = None,
    dense_last_steps: int = 0,
    total_steps: int | None = None,
    force: str | None = None,
    samples: int = 0,
    process_group=None,
    threads: int = 0,
    context: tilesplash.ThreadingContext | None = None,
    timeout: float | None = None,
    backend: str = "auto",
    precision: str = "default",
    error: float | None = None,
    densities=None,
    granularity: str = "token",
    compensate: bool = False,
    p: float | None = None,
    floor: int | None = None,
    gate: float | None = None,
    families=None,
    order: str | None = None,
) -> TilesplashHandle:
    """Run the self-attention of `target`'s video transformer(s) through tilesplash; returns a handle.

    target: a diffusers pipeline (every transformer in it is switched: Wan 2.2 A14B's
        ``transformer`` and ``transformer_2``; the step comes from its scheduler) or one
        transformer (``pipe.transformer``; the step comes from its timesteps).
    method: the masks sparse heads run (docs/masks.md): "svg" (default: Sparse
        VideoGen, each head routed to a spatial or temporal mask), "spatial",
        "temporal", "radial" (Radial Attention), "sta" (Sliding Tile Attention,
        a window routed per head), "mix" (routed among spatial, temporal,
        radial and the sta windows) or "svg2" (Sparse VideoGen 2's per-head
        k-means clusters, warm-started across steps and reset for a new video).
    density: target fraction of the attention map each sparse head keeps, in (0, 1].
    density_budget: route only among candidates of at most this density (for
        "mix" and "sta"; e.g. 1.25 * density); None: all of them.
    sink: keep the first-frame sink (every video query sees frame 0; not in sta
        or svg2); None: the model's default (on for the Wan family, off elsewhere).
    dense_layers: layers ``< dense_layers`` run dense.
    dense_steps: steps ``< dense_steps`` run dense; None: the first 20% of the steps
        when their number is known (a pipeline's scheduler, or total_steps), else 0.
    dense_last_steps: the last ``dense_last_steps`` steps run dense (needs the number
        of steps: a pipeline, or total_steps).
    total_steps: the number of denoising steps, for a transformer given without its
        pipeline; None: the scheduler's.
    force: None (route each head), "dense", or a mask of the method for every
        head: "spatial" or "temporal" for "svg"; for the other methods a
        candidate's name ("radial", "sta:3x3x3", ..., "svg2"), checked when
        the first call reveals the geometry.
    samples: query rows sampled per layer call by the router; 0 (the default): one
        per 1,024 video tokens, from 16 to 64 (docs/masks.md).
    process_group: None, or a torch.distributed ProcessGroup to split the sequence
        across its ranks (the models docs/diffusers.md lists for it; for the others with
        diffusers' context-parallel plan, call ``transformer.enable_parallelism`` instead:
        tilesplash joins it).
    threads: kernel threads, 0 for all hardware threads (with a group: give
        each rank its share of the cores).
    timeout: with process_group, the seconds any collective waits for the
        other ranks (default tilesplash.distributed.DEFAULT_TIMEOUT).
    context: a tilesplash.ThreadingContext every layer of this handle runs on;
        None: the handle's VideoAttention objects own theirs.
    backend: "auto" (the native kernel for a CPU transformer, FlexAttention
        for one on a GPU), "cpu" or "flex" (FlexAttention on any device, the
        CPU included); see tilesplash.VideoAttention and docs/gpu.md.
    precision: "default" or "int8" (Q.K^T in 8 bits on the native CPU kernel,
        docs/kernel.md; not with the flex backend).
    error: an error target instead of one density: each routed head runs the least
        dense candidate of the ladder whose sampled relative L2 error against dense is
        at most ``error`` (the lowest-error one when none is, "target_met" False in the
        report); combines with density_budget (docs/masks.md). None: ``density``.
    densities: the ladder with ``error`` (increasing, in (0, 1]); None: 0.05, 0.1,
        0.15, 0.25, 0.4.
    granularity: "token" (exact masks) or "tile" (every sparse head's mask rounded out
        to whole tiles of the kernel that runs it: no partial tile, no per-pair mask;
        tilesplash.VideoAttention and docs/masks.md).
    compensate: False (default) drops what each sparse head skips; True adds every
        skipped tile through its keys' mean key and value (tilesplash.VideoAttention,
        docs/masks.md "Compensation"; with ``error`` the router scores what runs, so
        lower densities meet the target). Native and flex backends.
    p, floor, gate: pooled's options (method "pooled", or "mix" with "pooled" among
        ``families``; tilesplash.VideoAttention): cumulative mass in (0, 1] kept per query
        tile instead of ``density`` (not with ``error``), key tiles kept per query tile at
        least (>= 0), the self-similarity below which a key tile is always kept
        ([-1, 1]); None: the library's defaults. Checked for type and range here, for the
        method when the first call reveals the geometry.
    families: with "mix", the methods it routes among (None: every mask family);
        "pooled" among them scores each head's own pooled selection too (native backend).
    order: the row order pooled heads cut their tiles in, "frame", "token" or "auto"
        (None: "auto", each head the order that scores better; tilesplash.VideoAttention).
    """
    targets, scheduler = _targets(target)
    with prefixed(_WHO):  # the library's checks and wording, "tilesplash.diffusers.enable: " first
        timeout = check_timeout(timeout)  # checked with or without a group
        method = check_method(method)
        dense_last_steps = check_int(dense_last_steps, "dense_last_steps", 0)
        total_steps = check_int(total_steps, "total_steps", 1, allow_none=True)
        if dense_last_steps and total_steps is None and scheduler is None:
            raise ValueError("dense_last_steps needs the number of steps: pass the pipeline "
                             "(its scheduler knows it) or total_steps=")
        backend = check_backend(backend)
        error, densities = check_error_target(error, densities, method)
        granularity = check_granularity(granularity)
        runs = _backend_of(backend, targets)
        if runs == "flex" and granularity == "tile" and method_flag(method, "data_driven"):
            raise ValueError(f"granularity: 'tile' is not available for method {method!r} on "
                             f"the flex backend (its cluster BlockMasks are built on the "
                             f"device); use backend='cpu' or granularity='token'")
        settings = Settings(
            method=method,
            density=check_fraction(density, "density"),
            density_budget=check_fraction(density_budget, "density_budget", allow_none=True),
            sink=None if sink is None else check_bool(sink, "sink"),
            dense_layers=check_int(dense_layers, "dense_layers", 0),
            dense_steps=check_int(dense_steps, "dense_steps", 0, allow_none=True),
            dense_last_steps=dense_last_steps,
            total_steps=total_steps,
            force=_force(force, method, error, densities),
            samples=check_int(samples, "samples", 0),
            threads=check_int(threads, "threads", 0, maximum=MAX_THREADS),
            context=check_context(context),
            backend=backend,
            precision=(BACKENDS[runs].check_precision(precision) if runs in BACKENDS
                       else check_precision(precision)),
            error=error,
            densities=None if densities is None else tuple(densities),
            granularity=granularity,
            compensate=(BACKENDS[runs].check_compensate(compensate) if runs in BACKENDS
                        else check_bool(compensate, "compensate")),
            method_options=check_method_options(p, floor, gate, families, order),
        )
    for _, model, spec in targets:
        check_processors(model, spec, _WHO)
    sequence = None
    if process_group is not None:
        for _, model, spec in targets:
            _check_sequence(model, spec)
        sequence = SequenceParallel(process_group, timeout)
    runtime = Runtime(settings, Steps(scheduler), sequence)
    runtime_id = add_runtime(runtime)
    installed = []
    for index, (name, model, spec) in enumerate(targets):
        one = Installed(model, spec, ModelState(spec, name, index), runtime, runtime_id, sequence)
        one.install()
        installed.append(one)
    handle = TilesplashHandle(runtime, runtime_id, installed, [name for name, _, _ in targets])
    for one in installed:
        one.handle = handle
    return handle


def handle_of(target) -> TilesplashHandle | None:
    """The handle that switched `target` (a transformer, or a pipeline: the handle of its
    first switched transformer), None when tilesplash is not enabled on it. A deep copy of
    a switched transformer has a handle of its own: this is how to reach it
    (report, set_step, remove)."""
    for model in _transformers(target):
        installed = installed_on(model)
        if installed is not None and installed.handle is not None:
            return installed.handle
    return None


def remove(target) -> None:
    """Take tilesplash off `target` (a transformer or a pipeline, enabled or a deep copy of
    an enabled one): every processor it installed is put back and its hooks dropped, so
    the model computes exactly what it did before ``enable``. A model without them is left
    as it is. Other transformers of the same handle stay switched."""
    for model in _transformers(target):
        installed = installed_on(model)
        if installed is not None and installed.model is model:
            installed.remove()
            if installed.handle is not None:
                installed.handle._forget(installed)
        if carries_tilesplash(model):
            strip(model)


def _transformers(target) -> list:
    components = getattr(target, "components", None)
    if isinstance(components, dict) and not isinstance(target, torch.nn.Module):
        return [module for name, module in components.items()
                if name.startswith("transformer") and isinstance(module, torch.nn.Module)]
    if not isinstance(target, torch.nn.Module):
        raise TypeError(f"tilesplash.diffusers: expected a diffusers pipeline or a transformer, "
                        f"got {type(target).__name__}")
    return [target]


def _targets(target):
    """[(name, transformer, spec)] to switch, and the scheduler when a pipeline was given."""
    components = getattr(target, "components", None)
    if isinstance(components, dict) and not isinstance(target, torch.nn.Module):
        found = [(name, module) for name, module in components.items()
                 if name.startswith("transformer") and isinstance(module, torch.nn.Module)]
        if not found:
            raise TypeError(f"{_WHO}: {type(target).__name__} has no transformer component")
        targets = [(name, module, _spec(module)) for name, module in found]
        return targets, getattr(target, "scheduler", None)
    if not isinstance(target, torch.nn.Module):
        served = ", ".join(name for name, refusal in supported_models().items() if refusal is None)
        raise TypeError(f"{_WHO}: target must be a diffusers pipeline or one of its video "
                        f"transformers ({served}); got {type(target).__name__}")
    return [(type(target).__name__, target, _spec(target))], None


def _spec(model):
    spec = spec_for(model)
    if spec is None:
        served = ", ".join(name for name, refusal in supported_models().items() if refusal is None)
        raise TypeError(f"{_WHO}: {type(model).__name__} is not a video transformer tilesplash "
                        f"knows; supported: {served} (docs/diffusers.md)")
    if spec.refusal is not None:
        raise NotImplementedError(f"{_WHO}: {spec.name} cannot be served: {spec.refusal}")
    return spec


def _check_sequence(model, spec) -> None:
    """process_group= needs the spec's sequence hooks; a model with diffusers' own plan is
    pointed at diffusers' context parallelism, which tilesplash's backend joins."""
    if spec.sequence is not None:
        return
    served = ", ".join(s.name for s in model_specs() if s.sequence is not None)
    if getattr(type(model), "_cp_plan", None):
        raise NotImplementedError(
            f"{_WHO}: process_group is not supported for {spec.name} (tilesplash's own sequence "
            f"parallel has hooks for {served} only); it has diffusers' context-parallel plan: "
            "call transformer.enable_parallelism(config=ContextParallelConfig(ulysses_degree=N)) "
            "and enable() without process_group (docs/diffusers.md)")
    raise NotImplementedError(
        f"{_WHO}: process_group is not supported for {spec.name}: tilesplash's own sequence "
        f"parallel has hooks for {served} only (a Conv3d patch embedding, per-token rotary "
        "tables and output projection), and diffusers has no context-parallel plan for it; "
        "pass process_group=None (docs/diffusers.md)")


def _backend_of(backend: str, targets) -> str:
    """The backend the layers' calls will run on, as far as enable can tell: "auto"
    resolves by the transformers' device now (a model moved later decides then)."""
    if backend != "auto":
        return backend
    for _, model, _ in targets:
        parameter = next(model.parameters(), None)
        if parameter is not None and parameter.device.type != "cpu":
            return "flex"
    return "auto"


def _force(value, method: str, error=None, densities=None) -> str | None:
    if value is None:
        return None
    names = tuple(tilesplash.methods()[method]["mask_names"])
    if error is not None:  # the ladder's candidates, named as the library names them
        ladder = _core.default_density_ladder() if densities is None else densities
        names = tuple(_core.ladder_name(name, d) for d in ladder for name in names)
    names = ("dense",) + names
    if not isinstance(value, str):
        raise TypeError(f"force: expected None or a string ('dense' or a candidate's name), got "
                        f"{type(value).__name__}")
    if len(names) == 1:
        # The mask names depend on the geometry (sta windows): VideoAttention checks them.
        if value == "":
            raise ValueError("force: expected None, 'dense' or a candidate's name, got ''")
        return value
    if value not in names:
        raise ValueError(f"force: expected None or one of {', '.join(map(repr, names))}, got "
                         f"{value!r}")
    return value
