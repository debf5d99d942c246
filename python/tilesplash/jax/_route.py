"""route(): Sparse VideoGen's online routing in jax.numpy, on the arrays' device.

The candidates, their masks and the sampled query rows come from a
tilesplash.VideoAttention built with the same options (the CPU front door is
only asked questions here, it runs nothing), so a JAX pipeline routes exactly
as tilesplash does: for every head, the sampled rows' exact attention under
the dense mask and under each candidate (scale 1/sqrt(d) by default), the MSE
of each against dense (mean over rows and channels) and the dense rows' mean
square, computed on the device; the choice is the library's rule (routing.h
decide_route, through _core.decide_routes), run on the host by
jax.pure_callback on the small [heads, candidates] table, so jit and scan
trace it and no rule is written here. Memory: the scores of one head's
sampled rows at a time, [samples, N], never N x N. Compensated routing
(route(compensate=True), VideoSplashAttention(compensate=True)) sets
Router.compensation (Router.compensate_with): each
candidate's compensation term (_compensation.sampled_terms) is merged into its
sampled rows through the LSEs before the MSE, so the router scores what runs.
"""

from __future__ import annotations

import math
from functools import cached_property, lru_cache, partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .. import _core
from .._checks import check_bool, check_float, check_int
from .._methods import DEFAULT_METHOD, check_method
from .._method_options import check_error_target
from .._video import VideoAttention
from ._compensation import candidate_tables, router_tables, sampled_terms


class Routing:
    """One routing decision for every head of a layer.

    index: int32 jax.Array [heads] (into `candidates`, on the arrays' device);
    mse: float32 jax.Array [heads, len(candidates)], each candidate's sampled
    MSE against dense; choices: the names per head (a host copy of index);
    run_orders: the row order each head's choice runs in ("original",
    "token-major" for temporal, "tile-major" for sta); token_major: bool
    [heads]; permutation / inverse: int64 [N], x_token_major =
    x[:, permutation], x = x_token_major[:, inverse] (text rows stay); rows:
    the sampled query rows.
    """

    def __init__(self, index, mse, candidates, orders, rows, geometry, target_met=None):
        self.index = index
        self.mse = mse
        self.target_met = target_met  # bool [heads]: an error target met (None: no target)
        self.candidates = tuple(candidates)
        self._orders = tuple(orders)
        self.rows = rows
        self.permutation, self.inverse = token_major_permutation(geometry)

    @cached_property
    def choices(self) -> tuple[str, ...]:
        return tuple(self.candidates[i] for i in np.asarray(self.index))

    @property
    def run_orders(self) -> tuple[str, ...]:
        return tuple(self._orders[self.candidates.index(c)] for c in self.choices)

    @property
    def token_major(self) -> np.ndarray:
        return np.array([o == "token-major" for o in self.run_orders], bool)

    def __repr__(self) -> str:
        return f"Routing({list(self.choices)})"


def token_major_permutation(geometry) -> tuple[np.ndarray, np.ndarray]:
    """(permutation, inverse): video token (f, p) moves from f * P + p to p * F + f
    (after any text before it); text rows stay in place."""
    if not isinstance(geometry, _core.VideoGeometry):
        raise TypeError(f"geometry: expected a tilesplash.VideoGeometry, got "
                        f"{type(geometry).__name__}")
    return _permutation(str(geometry))


@lru_cache(maxsize=16)
def _permutation(spec: str):
    g = _core.VideoGeometry.parse(spec)
    begin = g.text_tokens if g.text_at == "before" else 0
    frames, per_frame = g.frames, g.tokens_per_frame
    run = np.arange(g.tokens, dtype=np.int64)
    video = np.arange(frames * per_frame, dtype=np.int64)  # token-major position - begin
    run[begin:begin + len(video)] = begin + (video % frames) * per_frame + video // frames
    inverse = np.empty_like(run)
    inverse[run] = np.arange(g.tokens, dtype=np.int64)
    for array in (run, inverse):
        array.flags.writeable = False
    return run, inverse


class Router:
    """The router of one tilesplash.VideoAttention's options (candidates, rows)."""

    def __init__(self, front: VideoAttention, density_budget=None, scale=None, error=None):
        candidates = front.candidates
        if not candidates:
            raise ValueError(f"method: {front.method!r} does not route (svg2 runs each head's own "
                             "clusters); route needs a method with candidates")
        self.front = front
        self.names = tuple(name for name, _ in candidates)
        densities = np.array([d for _, d in candidates])
        self.masks = tuple(front.mask(name) for name in self.names)
        self.orders = tuple(front.candidate_run(name)["order_name"] for name in self.names)
        self.scale = scale
        self._policy = ([float(d) for d in densities], density_budget, error)
        self.error = error
        # (router_tables() device dict, block_q, block_kv): score compensated candidates.
        self.compensation = None

    def compensate_with(self, block_q: int, block_kv: int):
        """Score the compensated candidates from now on: each run's skipped tiles in
        block_q x block_kv tiles (the heads' kernel's). Returns the CandidateTables, or
        None when no candidate skips a tile (nothing to add; scoring unchanged)."""
        runs = [self.front.candidate_run(name) for name in self.names]
        tables = candidate_tables(runs, self.front.geometry.tokens, block_q, block_kv)
        if not tables.skips.any():
            return None
        self.compensation = (router_tables(tables), block_q, block_kv)
        return tables

    def samples(self, layer: int = 0, step: int = 0, device=None) -> Samples:
        """The host's part, which depends only on (seed, layer, step): the sampled
        rows and every candidate's mask on them (bit-packed), on `device`."""
        n = self.front.geometry.tokens
        rows = self.front.sampled_rows(check_int(layer, "layer", 0), check_int(step, "step", 0))
        keep = np.stack([m.rows(rows, n) for m in self.masks])
        packed = np.packbits(keep, axis=-1, bitorder="little")
        return Samples(jax.device_put(rows.astype(np.int32), device),
                       jax.device_put(packed, device), rows)

    def decide(self, q, k, v, samples: Samples):
        """The device's part, traceable (jit, scan): (index int32 [heads], mse
        float32 [heads, candidates]) for q, k, v [heads, N, d]."""
        index, _, mse = self.decide_all(q, k, v, samples)
        return index, mse

    def decide_all(self, q, k, v, samples: Samples):
        """decide() and whether the error target was met: (index int32 [heads],
        target met bool [heads], mse float32 [heads, candidates])."""
        check_heads(q, k, v, self.front.geometry.tokens)
        scale = self.scale if self.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        terms = None
        if self.compensation is not None:
            tables, block_q, block_kv = self.compensation
            terms = sampled_terms(q, k, v, samples.rows, tables, block_q=block_q,
                                  block_kv=block_kv, scale=float(scale))
        mse, power = _sampled_mse(q, k, v, samples.rows, samples.keep, terms,
                                  n=self.front.geometry.tokens, scale=float(scale))
        heads = q.shape[0]
        index, met = jax.pure_callback(
            partial(_host_decide, self._policy),
            (jax.ShapeDtypeStruct((heads,), jnp.int32), jax.ShapeDtypeStruct((heads,), jnp.bool_)),
            mse, power, vmap_method="sequential")
        return index, met, mse

    def __call__(self, q, k, v, layer: int = 0, step: int = 0) -> Routing:
        check_heads(q, k, v, self.front.geometry.tokens)
        check_finite(q, k, v)
        samples = self.samples(layer, step, device_of(q))
        index, met, mse = self.decide_all(q, k, v, samples)
        return Routing(index, mse, self.names, self.orders, samples.host_rows,
                       self.front.geometry, None if self.error is None else met)


class Samples(NamedTuple):
    """A router's sampled rows (int32 [r]) and candidate masks on them (uint8
    [candidates, r, ceil(N / 8)], bit-packed little-endian) on the device, and
    the rows on the host."""

    rows: jax.Array
    keep: jax.Array
    host_rows: np.ndarray


def check_heads(q, k, v, n: int) -> None:
    for name, x in (("q", q), ("k", k), ("v", v)):
        if len(getattr(x, "shape", ())) != 3 or x.shape[1] != n:
            raise ValueError(f"{name}: expected [heads, {n}, d] (the geometry's tokens), got "
                             f"shape {tuple(getattr(x, 'shape', ()))}")
    if k.shape[:2] != q.shape[:2] or v.shape[:2] != q.shape[:2] or k.shape[2] != q.shape[2]:
        raise ValueError(f"k, v: expected the heads and tokens of q {tuple(q.shape)}, got "
                         f"{tuple(k.shape)} and {tuple(v.shape)}")


def check_finite(q, k, v) -> None:
    """NaN or Inf in q, k or v is refused, naming the argument, as the native
    VideoAttention does: a NaN score would otherwise route silently (every MSE NaN,
    argmin picking the first candidate). One reduction per array on its device; under
    a jax transformation (tracers) the values are unknown and the check is skipped."""
    for name, x in (("q", q), ("k", k), ("v", v)):
        if isinstance(x, jax.core.Tracer):
            continue
        if not bool(jnp.isfinite(jnp.asarray(x)).all()):
            raise ValueError(f"{name}: NaN or Inf in the input; expected finite values")


def _host_decide(policy, mse, power):
    """The library's rule on the host (pure_callback): (index int32, met bool) per head."""
    densities, budget, error = policy
    index, met, _ = _core.decide_routes(np.ascontiguousarray(mse, np.float64),
                                        np.ascontiguousarray(power, np.float64), densities,
                                        budget, error)
    return np.asarray(index, np.int32), np.asarray(met, np.bool_)


def device_of(x):
    devices = getattr(x, "devices", None)
    if callable(devices):
        found = devices()
        if len(found) == 1:
            return next(iter(found))
    return None


@partial(jax.jit, static_argnames=("n", "scale"))
def _sampled_mse(q, k, v, rows, packed, terms, *, n, scale):
    """(mse [heads, C], dense power [heads]); terms: None or sampled_terms()'s (lse
    [H, C, r], out [H, C, r, dv]), merged into each candidate's rows through the LSEs."""
    keep = jnp.unpackbits(packed, axis=-1, count=n, bitorder="little").astype(bool)  # [C, r, N]
    highest = jax.lax.Precision.HIGHEST

    def head(args):
        qh, kh, vh, term = args
        s = jnp.dot(qh[rows].astype(jnp.float32) * scale, kh.astype(jnp.float32).T,
                    precision=highest)
        vf = vh.astype(jnp.float32)
        dense = _masked_attention(s, None, vf)

        def candidate(args):
            kc, term_c = args
            out = _masked_attention(s, kc, vf)
            if term_c is not None:
                out = _merged(out, _masked_lse(s, kc), *term_c)
            return jnp.mean(jnp.square(out - dense))

        return jax.lax.map(candidate, (keep, term)), jnp.mean(jnp.square(dense))

    return jax.lax.map(head, (q, k, v, terms))  # terms: [H, C, r, ..] -> per head [C, r, ..]


def _masked_lse(s, keep):
    """Natural log-sum-exp of s [r, N] over the kept keys; -inf where none is kept."""
    return jax.scipy.special.logsumexp(jnp.where(keep, s, -jnp.inf), axis=-1)


def _merged(out, lse, term_lse, term_out):
    """Two normalised softmax parts (out [r, dv] with lse [r]; a term's) as one."""
    top = jnp.maximum(lse, term_lse)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    a, b = jnp.exp(lse - top), jnp.exp(term_lse - top)
    total = a + b
    return jnp.where(total[:, None] > 0, (a[:, None] * out + b[:, None] * term_out)
                     / jnp.where(total > 0, total, 1.0)[:, None], 0.0)


def _masked_attention(s, keep, v):
    """softmax(s) v over the kept keys; rows that keep none give 0."""
    if keep is not None:
        s = jnp.where(keep, s, -jnp.inf)
    m = jnp.max(s, axis=-1, keepdims=True)
    m = jnp.where(jnp.isfinite(m), m, 0.0)
    p = jnp.exp(s - m)
    if keep is not None:
        p = jnp.where(keep, p, 0.0)
    total = jnp.sum(p, axis=-1, keepdims=True)
    out = jnp.dot(p, v, precision=jax.lax.Precision.HIGHEST)
    return jnp.where(total > 0, out / jnp.where(total > 0, total, 1.0), 0.0)


@lru_cache(maxsize=16)
def router_for(geometry_spec: str, method: str, density: float, band, sink: bool,
               text_full: bool, density_budget, samples: int, seed: int, scale, error=None,
               densities=None, tiles=None) -> Router:
    geometry = _core.VideoGeometry.parse(geometry_spec)
    front = VideoAttention(geometry, method=method, density=density, band=band, sink=sink,
                           text_full=text_full, density_budget=density_budget, samples=samples,
                           seed=seed, threads=1, error=error, densities=densities)
    router = Router(front, density_budget, scale, front.error)
    if tiles is not None:  # (block_q, block_kv): compensated
        router.compensate_with(*tiles)
    return router


def route(q, k, v, geometry, *, method=DEFAULT_METHOD, density=0.25, band=None, sink=False,
          text_full=True, density_budget=None, samples=0, seed=0, layer=0, step=0,
          scale=None, error=None, densities=None, compensate=False, block_q=None,
          block_kv=None) -> Routing:
    """Sparse VideoGen's routing of every head of q, k, v ([heads, N, d] jax
    arrays in the original frame-major order, N = geometry.tokens), computed
    with jax.numpy on their device; the options mean what they mean for
    tilesplash.VideoAttention, and the same (seed, layer, step) sample the
    same rows, so the choices are the ones tilesplash makes. Returns a
    Routing (per-head choices, MSEs, the permutation of token-major heads).
    error / densities: an error target and its density ladder, as for
    tilesplash.VideoAttention (Routing.target_met then says per head whether
    a candidate met it). compensate=True scores each candidate with its
    skipped tiles added (VideoAttention(compensate=True)'s router), in the
    block_q x block_kv tiles its heads will run in (both required then).
    """
    if not isinstance(geometry, _core.VideoGeometry):
        raise TypeError(f"geometry: expected a tilesplash.VideoGeometry, got "
                        f"{type(geometry).__name__}")
    if scale is not None:
        scale = float(scale)
    # Checked (and made plain floats, ints and bools) before they key the router cache: a
    # NumPy array or a list is refused by name as VideoAttention refuses it, not reported
    # as unhashable, and 0.1 and np.float64(0.1) share one router.
    check_method(method)
    error, densities = check_error_target(error, densities, method)
    density = check_float(density, "density", "a float in (0, 1]")
    if density_budget is not None:
        density_budget = check_float(density_budget, "density_budget", "a float in (0, 1] or None")
    tiles = None
    if check_bool(compensate, "compensate"):
        if block_q is None or block_kv is None:
            raise ValueError("block_q, block_kv: compensate=True scores the tiles the heads "
                             "run in; give both (the kernel's block_q and block_kv)")
        tiles = (check_int(block_q, "block_q", 1), check_int(block_kv, "block_kv", 1))
    elif block_q is not None or block_kv is not None:
        raise ValueError("block_q, block_kv: they apply with compensate=True only")
    router = router_for(str(geometry), method, density, check_int(band, "band", 0, allow_none=True),
                        check_bool(sink, "sink"), check_bool(text_full, "text_full"),
                        density_budget, check_int(samples, "samples", 0),
                        check_int(seed, "seed", 0, maximum=2**64 - 1), scale, error,
                        None if densities is None else tuple(densities), tiles)
    return router(q, k, v, layer, step)
