"""tilesplash.VideoAttention: routed sparse attention (Sparse VideoGen, Radial, STA, SVG2) for one
video geometry."""

from __future__ import annotations

import threading

from . import _core
from ._backends import BACKENDS, check_backend, resolve
from ._checks import (
    MAX_THREADS,
    check_blocks,
    check_bool,
    check_float,
    check_granularity,
    check_int,
    check_precision,
    check_scale,
)
from ._dist.agreement import DERIVED, PER_RANK
from ._flex.settings import current as flex_settings
from ._dist.group import check_timeout
from ._mask import Mask
from ._method_options import check_error_target, check_method_options
from ._methods import DEFAULT_METHOD, check_method, method_flag, method_names
from ._threading import check_context, core_of
from ._video_group import GroupForward
from ._tensors import call_arrays, check_layout, check_qkv, torch_module


METHODS = method_names()
"""The registered method names (tilesplash.methods()), kept for callers of this constant."""


class VideoAttention(GroupForward):
    """Routed sparse attention over every head of a layer of a video model.

    method chooses the masks, one of tilesplash.methods() (docs/masks.md defines each):
      "svg" (default): Sparse VideoGen. Each call samples `samples` video query
        rows per head (0, the default: one per 1,024 video tokens, from 16 to
        64; docs/masks.md), computes their exact attention under the dense, spatial
        and temporal masks, and runs the head with the mask whose output is
        closer to dense (temporal heads are permuted to token-major order and
        back).
      "spatial", "temporal": one of the two for every head, on its own band.
      "radial": Radial Attention's static energy-decay mask, decay chosen for
        `density` (radial keeps at least d <= 1 frames and windows of 128
        tokens, so it has a floor: about 27% of Wan 480p).
      "sta": Sliding Tile Attention, tiles of 6 x 8 x 8 run tile-major; the
        router picks one window per head among one per temporal extent.
      "mix": the router picks per head among spatial, temporal, radial and
        the sta windows.
      "svg2": Sparse VideoGen 2. Every head runs its own k-means clusters of Q
        and K (warm-started from the previous call for the same layer) and the
        cluster pairs that meet `density`; no routing.
      "pooled": pooled scores (SpargeAttn, XAttention). Every head keeps, per
        64-token query tile, the key tiles of highest pooled Q.K mass until
        `density` is met (or their cumulative mass reaches `p`; with `error`,
        the smallest p of its ladder that meets the error), at least `floor`
        per query tile, plus its diagonal, sink, text and non-self-similar
        key tiles (mean cosine to their mean key below `gate`); no routing;
        the native backend only (docs/masks.md).
    Layers below `dense_layers` and steps below `dense_steps` run dense, and
    `force` fixes every head's mask instead: "dense" or a candidate's name
    (see `candidates`; "svg2" for method "svg2", "pooled" for "pooled").

    geometry: a tilesplash.VideoGeometry (tokens = text + frames * height * width).
    density: target density of every candidate (sink and text included), in
    (0, 1]; for "svg", used when `band` (half-width in tokens) is not given.
    density_budget: route only among candidates of at most this density (the
    least dense one when none is); None: all of them. With "mix" or "sta" at low
    densities a budget (e.g. 1.25 * density) keeps the router from picking a
    denser candidate such as radial at its floor. sink: keep frame 0's keys
    for every video query (Wan; not in sta or svg2); text_full: text rows and
    columns attend everything in the spatial and temporal masks (radial, sta
    and svg2 always keep text whole). threads: 0 uses every core (or the
    context's thread count). context: a tilesplash.ThreadingContext to run on
    (kernel, permutations, k-means); None: the object's own. block_q /
    block_kv: tiles; by default the tuned choice for this geometry's band plan,
    head dim and dtype (`tilesplash tune --preset ...`), else 256 x 256 (svg2
    plans its clusters in 64 x 64 tiles whatever these say). scale: default
    1/sqrt(d). precision: "default" or "int8" (Q.K^T in 8 bits on the native
    kernel, as tilesplash.attention(precision="int8"); every kernel call,
    the router's included; not on the flex backend).

    granularity: "token" (default) runs every mask exactly; "tile" rounds each mask a
    head runs out to whole tiles of the kernel that runs it (the native kernel's
    block_q x block_kv, the flex backend's BlockMask blocks), in the head's run order:
    no tile is partial and no per-pair mask runs, as Sparse VideoGen, Radial and STA do
    on GPUs (docs/masks.md measures the error it adds). The router still scores the
    token-exact masks; key padding stays exact; a head's "density" is the rounded one.

    error: an error target instead of one density (docs/masks.md): every family of
    the method is offered at each density of `densities` (strictly increasing, in
    (0, 1]; None: 0.05, 0.1, 0.15, 0.25, 0.4), as candidates named
    "<name>@<density>", and each routed head runs the least dense one whose sampled
    error (relative L2 of the sampled output rows against dense) is at most `error`;
    when none is, the lowest-error one, and the head's report says "target_met":
    False. Combines with density_budget; not with band or svg2.

    p, floor, gate: pooled's options, for "pooled" and for "mix" with "pooled" among
    its families (None: the library's defaults, p 0.98 (only without density's
    target: p given, it replaces density), floor 1, gate 0.6; docs/masks.md). p in
    (0, 1] (not with `error`, whose ladder is p), floor an int >= 0, gate in [-1, 1].
    order: the row order pooled heads cut their tiles in: "frame" (frame-major),
    "token" (token-major: a temporal head's keys sit near the diagonal) or "auto" /
    None (each head the order whose selection scores better on the sampled rows).
    families: for "mix", the methods it routes among (None: "spatial", "temporal",
    "radial" and "sta"); naming "pooled" scores each routed head on its own pooled
    selection too (at `density` or `p`; with `error`, every rung of p) and runs it
    when the rule picks it; the head reports choice and family "pooled" (its rung: the
    p with `error`). Native backend only with "pooled".

    compensate: False (default) drops what each sparse head's plan skips; True
    approximates it (tilesplash.attention(compensate=True), docs/masks.md
    "Compensation"): every empty tile of the head's plan, in the order and
    tiles it runs, adds its keys through their mean key and value (the sink's
    keys, attended exactly, and padded keys left out). With `error` the router
    scores the compensated outputs, so a head whose skipped part is well
    approximated runs a lower density. Each head's report says "compensated".
    Native and flex backends (docs/gpu.md, "Compensation").

    One object serves one call at a time (calls from several threads queue);
    keep it across layers and steps so plans are built once (and, for svg2,
    clusters are warm-started; call reset_clusters() for a new video). Objects
    with their own contexts run side by side from different threads.

    group: a torch.distributed process group (torch.distributed.group.WORLD
    for every process), for sequence parallelism: every rank of the group builds a
    VideoAttention with the same arguments and calls it with its contiguous
    shard of the sequence (torch tensors, all heads, shards in rank order,
    any lengths that add up to geometry.tokens) at the same layer and step.
    One all-to-all gives each rank the whole sequence for its heads
    (tilesplash.distributed.head_range), it routes and runs them as one
    process would (decisions keyed on the global head index: bit-identical
    choices, outputs equal within f32 rounding), and a second all-to-all
    returns its shard of the output. The report's "heads" is the whole list,
    in global head order, on every rank; "group" says {"rank", "size",
    "heads": (begin, end) run here, "shards": tokens by rank}, and the
    timings are this rank's. timeout: seconds any collective waits (default
    tilesplash.distributed.DEFAULT_TIMEOUT); a rank that fails makes every
    rank raise. With no group, timeout is unused.

    backend: "auto" (the native kernel for NumPy arrays and CPU tensors,
    FlexAttention for tensors on other devices), "cpu" or "flex" (FlexAttention
    on any device, the CPU included). The flex backend makes the native
    router's decisions with torch ops on the tensors' device (only the table
    of sampled MSEs goes to the host), runs temporal and sta heads with their
    rows gathered into their order on the device and the sink's tiles in the
    same kernel call, and svg2 heads with clusters computed on the device
    (docs/gpu.md). Its tiles are block_q x block_kv, 128 x 128 by default;
    threads and context do not apply to it. How it executes (row gathers or
    per-head masks, compiling) is the flex backend's own setting:
    tilesplash.flex.configure(strategy=..., compile=...).
    """

    def __init__(self, geometry, *, method=DEFAULT_METHOD, density=0.25, band=None, sink=False,
                 text_full=True, density_budget=None, dense_layers=0, dense_steps=0, samples=0,
                 seed=0, force=None, threads=0, block_q=None, block_kv=None, scale=None,
                 context=None, group=None, timeout=None, backend="auto",
                 precision="default", error=None, densities=None,
                 granularity="token", compensate=False, p=None, floor=None, gate=None,
                 families=None, order=None):
        arguments = dict(locals())  # with a group, all but the PER_RANK ones must agree
        if not isinstance(geometry, _core.VideoGeometry):
            raise TypeError(f"geometry: expected a tilesplash.VideoGeometry, got "
                            f"{type(geometry).__name__}")
        check_method(method)
        if force is not None and not isinstance(force, str):
            raise TypeError(f"force: expected None or a mask name ('dense', 'spatial', "
                            f"'temporal', ...), got {type(force).__name__}")
        if density_budget is not None:
            density_budget = check_float(density_budget, "density_budget",
                                         "a float in (0, 1] or None")
        error, densities = check_error_target(error, densities, method)
        method_options = check_method_options(p, floor, gate, families, order)
        arguments["families"] = method_options.families
        # Ranks compare what the library made of these: a list and a NumPy array of the
        # same densities agree.
        arguments["error"], arguments["densities"] = error, densities
        self._core = _core.VideoAttention(
            geometry, method, check_float(density, "density", "a float in (0, 1]"),
            check_int(band, "band", 0, allow_none=True), check_bool(sink, "sink"),
            check_bool(text_full, "text_full"), density_budget,
            check_int(dense_layers, "dense_layers", 0),
            check_int(dense_steps, "dense_steps", 0), check_int(samples, "samples", 0),
            check_int(seed, "seed", 0, maximum=2**64 - 1), force,
            check_int(threads, "threads", 0, maximum=MAX_THREADS),
            *check_blocks(block_q, block_kv), check_scale(scale),
            core_of(check_context(context)), check_precision(precision),
            error, densities, granularity=check_granularity(granularity),
            compensate=check_bool(compensate, "compensate"), **method_options.core_kwargs())
        self._group = group
        self._timeout = check_timeout(timeout)
        self._backend = check_backend(backend)
        self._precision = precision
        self._compensate = compensate
        if self._backend in BACKENDS:  # named: its capabilities answer now, not at the call
            BACKENDS[self._backend].check_precision(precision)
            BACKENDS[self._backend].check_compensate(compensate)
        self._runners = {}  # backend name -> its video runner (None: the core's forward)
        self._last_runner = None  # the runner of the last call (None: the core), for head_mask
        self._runner_settings = dict(
            dense_layers=dense_layers, dense_steps=dense_steps, force=force,
            density_budget=density_budget, error=error, scale=scale, block_q=block_q,
            block_kv=block_kv, granularity=granularity, compensate=compensate)
        self._last_heads = None  # with a group: the global heads [begin, end) of the last call
        # What ranks of a group must agree on: the arguments, and what the
        # library made of them (the band, the candidates' masks).
        self._agreed = {f"VideoAttention.{name}": value for name, value in arguments.items()
                        if name not in PER_RANK}
        self._agreed["VideoAttention band" + DERIVED] = self.band
        self._agreed["VideoAttention candidates" + DERIVED] = tuple(
            (name, density, str(self._core.mask(name))) for name, density in self.candidates)
        self._calls_since_reset = 0  # svg2 warm-starts from the calls since reset_clusters()
        # The flex backend's calls queue here, as the native core's queue on its own mutex:
        # its caches and svg2's per-layer warm starts are the object's state.
        self._lock = threading.RLock()

    @property
    def error(self):
        """The error target (sampled relative L2 against dense), or None."""
        return self._core.error

    @property
    def pooled_options(self):
        """The options heads ranking their own pooled key tiles run with ("pooled", or
        "mix" with "pooled" among its families): {"p", "floor", "gate", "density" (None
        when p replaces it)}; None when no head ranks them."""
        return self._core.pooled_options

    @property
    def cluster_options(self):
        """svg2: the core's cluster options for this geometry and density (a dict:
        "density", "top_p", "min_kc_ratio", "block_q", "block_kv", and "query" / "key":
        each side's k-means "clusters", "first_iterations", "warm_iterations",
        "tolerance", "seed"); None for the other methods. What a backend clustering
        on its device runs."""
        return self._core.cluster_options

    @property
    def backend(self) -> str:
        """The backend asked for: "auto", "cpu" or "flex"."""
        return self._backend

    @property
    def group(self):
        """The process group given to the constructor (None: one process)."""
        return self._group

    @property
    def geometry(self):
        return self._core.geometry

    @property
    def method(self) -> str:
        return self._core.method

    @property
    def band(self) -> int:
        """The band half-width W in tokens of method "svg" (given, or resolved from density)."""
        return self._core.band

    @property
    def candidates(self) -> list[tuple[str, float]]:
        """(name, density) of every mask the router chooses from, in the order of a
        head's "mse" report; empty for svg2."""
        return list(self._core.candidates)

    def mask(self, choice: str) -> Mask:
        """The mask a head with this choice ("dense" or a candidate's name) runs, on the
        original token order."""
        if not isinstance(choice, str):
            raise TypeError(f"choice: expected 'dense' or a candidate's name, got {choice!r}")
        return Mask(self._core.mask(choice))

    def head_mask(self, head: int) -> Mask:
        """svg2: the cluster mask head `head` ran in the last call (its last batch entry),
        on the original token order; with granularity="tile", rounded out as it ran (to
        whole tiles of its run order). It classifies tiles by scanning: for checks.
        With a group, `head` is global and must be one this rank ran."""
        head = check_int(head, "head", 0)
        if self._last_heads is not None:
            begin, end = self._last_heads
            if not begin <= head < end:
                raise ValueError(f"head: this rank ran heads [{begin}, {end}) of the last call, "
                                 f"got {head}")
            head -= begin
        with self._lock:
            if self._last_runner is not None:
                clusters = self._last_runner.clusters
                found = None if clusters is None else clusters.head_mask(head)
                if found is None:
                    raise ValueError(f"head_mask: head {head} ran no cluster mask in the last "
                                     "call")
                return Mask(found)
        return Mask(self._core.head_mask(head))

    def sampled_rows(self, layer=0, step=0):
        """The query rows (sorted video token indices, numpy int64) the router samples at
        this layer and step, shared by every head: what a router on another backend
        samples to make the same decisions."""
        return self._core.sampled_rows(check_int(layer, "layer", 0), check_int(step, "step", 0))

    def candidate_families(self) -> list[tuple[str, str, float]]:
        """(name, family, rung) of every candidate: the "family" and "rung" a head
        that ran it reports (the rung: its error-target ladder density, else 0)."""
        return [tuple(x) for x in self._core.candidate_families()]

    def candidate_run(self, name: str) -> dict:
        """How the candidate `name` executes, for a backend that runs it itself: "name",
        "density", "mask" (on the original order), "order" (numpy int64: run position r
        holds original row order[r]; None for the original order) and "order_name",
        "run_mask" (the mask over run-order indices), "kv_order" (K and V's own order,
        svg2 only; None: as "order") and "extra" (None, or the separate key segment
        merged through the log-sum-exps, e.g. the first-frame sink: {"mask": over
        run-order queries x j, "first", "count", "stride"}: keys first + j * stride in
        run order)."""
        if not isinstance(name, str):
            raise TypeError(f"name: expected a candidate's name, got {type(name).__name__}")
        run = self._core.candidate_run(name)
        run["mask"] = Mask(run["mask"])
        run["run_mask"] = Mask(run["run_mask"])
        if run["extra"] is not None:
            run["extra"]["mask"] = Mask(run["extra"]["mask"])
        return run

    def reset_clusters(self) -> None:
        """svg2: forget the clusters of earlier calls (a new video); the next call clusters
        every head from scratch. With a group, every rank resets before the same call."""
        self._core.reset_clusters()
        with self._lock:
            for runner in self._runners.values():
                if runner is not None and runner.clusters is not None:
                    runner.clusters.reset()
            self._calls_since_reset = 0

    def _agreement(self) -> dict:
        """Everything of this object that changes a call's result, by name, which the
        ranks of a group compare on every call: the constructor's arguments but the
        PER_RANK ones, the band and candidates the library made of them, and for
        svg2 (whose clusters warm-start from earlier calls) the calls since
        reset_clusters(), and the flex backend's settings (tilesplash.flex.configure)."""
        agreed = dict(self._agreed)
        for name, value in flex_settings().items():
            agreed[f"tilesplash.flex.configure {name}"] = value
        if method_flag(self.method, "data_driven"):
            agreed["VideoAttention calls since reset_clusters()"] = self._calls_since_reset
        return agreed

    def __call__(self, q, k, v, layer=0, step=0, layout="bnhd", return_lse=False, key_lengths=None):
        """Attention of every head of q, k, v ([.., tokens, ..] in `layout`, tokens =
        geometry.tokens, original frame-major order) at this layer and denoising step.

        key_lengths: None, or one int per batch entry: that entry's keys
        [key_lengths[b], tokens) are padding (prompts of different lengths padded to
        geometry.text slots after the video). Every head's mask, dense included, drops
        them (the plan never visits their tiles); padded queries attend the real keys
        like any other row. Needs text after the video and values in
        [frames * height * width, tokens]; a list, tuple, NumPy or torch integer array.

        Returns (out, report), or (out, lse, report) with return_lse=True; out has
        q's type, dtype and layout. report: {"heads": [one dict per (batch entry,
        head): "batch", "head", "choice" ("dense", a candidate's name such as
        "spatial", "temporal", "radial", "sta:3x3x3", or "svg2"), "family" (its
        mask family: "spatial" for "spatial@0.05", "sta" for "sta:3x3x3"),
        "rung" (an error target's ladder density, a pooled head's p; 0 off a ladder),
        "order" (the row order its rows ran in: "original", "token-major" for temporal
        heads and pooled heads whose selection was cheaper token-major, ...), "routed",
        "mse_spatial", "mse_temporal" (None when not routed or not a candidate),
        "mse" ({candidate name: sampled MSE against dense}, empty when not
        routed), "error" (the choice's sampled relative L2 error against dense;
        None when not routed), "target_met", "density", "tiles_visited" (pairs inside the tiles the kernel
        visited, over tokens x tokens), "seconds", "permute_seconds",
        "cluster_seconds" and "plan_seconds" (svg2's k-means and per-head plan,
        parts of "seconds"), "compensated" (compensate=True and the head's plan skipped
        tiles it added) and "compensation_seconds" (of "seconds")], "method", "band", "warmup", "block_q", "block_kv",
        "blocks_tuned", "granularity", "routing_seconds", "plan_seconds", "cluster_seconds",
        "permute_seconds", "attention_seconds", "total_seconds" (sums over batch
        entries), "seconds" (the whole call)}.
        """
        if self._group is not None:
            # Checked inside the ranks' agreement: a bad argument on one rank makes every
            # rank raise at once, naming it, instead of leaving the others to time out.
            return self._group_forward(self._group, self._timeout, q, k, v, layer, step, layout,
                                       return_lse, key_lengths)
        layout, layer, step, return_lse, key_lengths = self._check_call(
            q, k, v, layer, step, layout, return_lse, key_lengths)
        result = self._forward_local(q, k, v, layer, step, layout, return_lse, key_lengths)
        with self._lock:
            self._calls_since_reset += 1
        return result

    def _check_call(self, q, k, v, layer, step, layout, return_lse, key_lengths):
        """A call's arguments but the tensors' shapes, checked: (layout, layer, step,
        return_lse, key_lengths)."""
        layout = check_layout(layout)
        layer = check_int(layer, "layer", 0)
        step = check_int(step, "step", 0)
        return_lse = check_bool(return_lse, "return_lse")
        shape = getattr(q, "shape", None)
        batch = None if shape is None or len(shape) != len(layout) else (
            1 if layout == "hnd" else int(shape[0]))
        return layout, layer, step, return_lse, self._key_lengths(key_lengths, batch)

    def _key_lengths(self, key_lengths, batch=None):
        """key_lengths as a list of ints in range, one per batch entry (`batch`, when
        known), or None when nothing is padded."""
        if key_lengths is None:
            return None
        if hasattr(key_lengths, "tolist"):  # NumPy or torch (any device)
            key_lengths = key_lengths.tolist()
        if not isinstance(key_lengths, (list, tuple)):
            raise TypeError(f"key_lengths: expected None or a sequence of ints (one per batch "
                            f"entry), got {type(key_lengths).__name__}")
        geometry = self.geometry
        first = geometry.video_tokens
        lengths = [check_int(n, f"key_lengths[{b}]", 0) for b, n in enumerate(key_lengths)]
        if batch is not None and len(lengths) != batch:  # also when nothing is padded
            raise ValueError(f"key_lengths: expected one per batch entry ({batch}), got "
                             f"{len(lengths)}")
        for b, n in enumerate(lengths):
            if n == geometry.tokens:
                continue
            if geometry.text_at != "after":
                raise ValueError(f"key_lengths[{b}]: only text after the video can be padding and "
                                 f"this geometry has text {geometry.text_at!r}; expected "
                                 f"{geometry.tokens}, got {n}")
            if not first <= n <= geometry.tokens:
                raise ValueError(f"key_lengths[{b}]: expected an int in [{first}, {geometry.tokens}] "
                                 f"(the video tokens and at most every text token), got {n}")
        return None if all(n == geometry.tokens for n in lengths) and lengths else lengths

    def _forward_local(self, q, k, v, layer, step, layout, return_lse, key_lengths=None):
        q, k, v = detached(q, k, v)
        backend = resolve(self._backend, q)
        backend.check_precision(self._precision)
        backend.check_compensate(self._compensate)
        kind = check_qkv(q, k, v, layout, any_device=backend.any_device)
        if key_lengths is not None:
            batch = 1 if layout == "hnd" else q.shape[0]
            if len(key_lengths) != batch:
                raise ValueError(f"key_lengths: expected one per batch entry ({batch}), got "
                                 f"{len(key_lengths)}")
        if kind == "torch":
            from ._torch_video.grad import wants_grad

            if wants_grad(q, k, v):
                return self._forward_with_grad(backend, q, k, v, layer, step, layout,
                                               return_lse, key_lengths)
        with self._lock:
            runner = self._runner(backend)
            self._last_runner = runner
            if runner is not None:
                return runner.forward(q, k, v, layer, step, layout, return_lse, key_lengths)
        descs, lse_address, out, lse, held = call_arrays(kind, q, k, v, layout)
        report = self._core.forward(*descs, lse_address, layout, layer, step, key_lengths)
        del held  # copies of odd views stay alive until the core has returned
        return (out, lse, report) if return_lse else (out, report)

    def _forward_with_grad(self, backend, q, k, v, layer, step, layout, return_lse, key_lengths):
        """Inputs that require grad (torch/_torch_video/grad.py): the flex backend on a GPU
        keeps FlexAttention's graph; elsewhere the forward runs without one and the
        output's backward raises naming the backend."""
        from ._torch_video.grad import forward_only, no_backward

        refuse = not backend.any_device or q.device.type == "cpu"
        with forward_only(refuse):
            result = self._forward_local(q.detach() if refuse else q, k.detach() if refuse else k,
                                         v.detach() if refuse else v, layer, step, layout,
                                         return_lse, key_lengths)
        if not refuse:
            return result
        who = f"VideoAttention on backend {backend.name!r} with {q.device.type} tensors"
        return (no_backward(result[0], who, q, k, v),) + tuple(result[1:])

    def _runner(self, backend):  # under self._lock
        if backend.name not in self._runners:
            self._runners[backend.name] = backend.video_runner(self, self._runner_settings)
        return self._runners[backend.name]

    def __repr__(self) -> str:
        if method_flag(self.method, "takes_band"):
            return f"tilesplash.VideoAttention({self.geometry}, band={self.band})"
        return f"tilesplash.VideoAttention({self.geometry}, method={self.method!r})"


def detached(q, k, v):
    """q, k, v detached when grad mode is off: no graph is recorded either way, and
    FlexAttention on the CPU refuses inputs that require grad even under
    torch.no_grad(). In grad mode they stay as they are (_forward_with_grad)."""
    torch = torch_module()
    if torch is None or torch.is_grad_enabled():
        return q, k, v
    return tuple(x.detach() if isinstance(x, torch.Tensor) and x.requires_grad else x
                 for x in (q, k, v))
