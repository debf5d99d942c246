"""VideoSplashAttention: routed video attention for a JAX model on Splash's kernel.

Per call (a layer at a denoising step): route every head in jax.numpy
(_route.py), then run all heads in one Splash kernel call. Each candidate
runs as tilesplash's front door runs it (VideoAttention.candidate_run):
in its own row order (temporal heads token-major, where their mask is the
band that spatial heads run in frame-major order; sta heads tile-major),
with its run-order mask, and with the first-frame sink as a key segment of
its own (frame 0's keys appended after the sequence; in token-major order
they are every F-th key and would make every tile of the band partial).

Plans are built once per candidate: its tiles (sequence and segment side by
side) as a shrunk Splash grid, all candidates' partial blocks numbered
together (build_stacked_info). A call's MaskInfo is the entries of its heads'
choices gathered on the device, and each head's row order is a gather too,
so every choice pattern runs the same compiled function with no host round
trip between routing and attention. Warm-up calls (and force="dense") run a
dense kernel.

compensate=True adds, after the kernel and before the scatter back, every key
tile each head's main plan skips, pooled over its run-order keys less the sink
segment's (_compensation.py; as native's compensate_band), and the router
scores the compensated candidates, as the native and flex routers do.
"""

from __future__ import annotations

import dataclasses
import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask_info import MaskInfo

from .. import _core
from .._mask import Mask
from .._methods import DEFAULT_METHOD, method_flag
from .._checks import check_bool, check_int
from .._video import VideoAttention
from .._tile_tables import TileTable
from ._compensation import compensate, pooled_tiles
from ._kernel import check_kernel_blocks, kernel_output, make_kernel, scaled, splash_attention
from ._mask_info import build_stacked_info
from ._plans import mask_tiles
from ._route import Router, Routing, device_of


class VideoSplashAttention:
    """Routed sparse attention over every head of a layer, on Splash's kernel.

    The options are tilesplash.VideoAttention's (method "svg", "spatial",
    "temporal", "radial", "sta" or "mix"; svg2 clusters per head need
    tilesplash.jax.splash_attention with each head's mask): same candidates,
    same sampled rows, same decisions. block_q / block_kv: Splash's tiles
    (block_kv a multiple of 128, block_q of 8); scale: default 1/sqrt(d);
    interpret=True runs Pallas' interpreter (CPU). compensate=True adds what
    each head's plan skips through its tiles' mean key and value (as
    tilesplash.VideoAttention(compensate=True) with the same block_q and
    block_kv) and routes on the compensated candidates; warm-up and dense heads
    skip nothing.

    Call it with q, k, v [heads, N, d] (or [batch, heads, N, d]) jax arrays in
    the original frame-major order (N = geometry.tokens): returns (out, routing),
    out like q with v's head dim, routing a tilesplash.jax.Routing (per batch
    entry and head, batch-major), or None for warm-up and forced calls. Inside
    jax.jit or lax.scan, where layer and step are not known on the host, call
    attend(q, k, v, samples) with samples(layer, step) made outside.
    """

    def __init__(self, geometry, *, method=DEFAULT_METHOD, density=0.25, band=None, sink=False,
                 text_full=True, density_budget=None, dense_layers=0, dense_steps=0, samples=0,
                 seed=0, force=None, block_q=512, block_kv=512, scale=None, interpret=False,
                 error=None, densities=None, compensate=False):
        self.front = VideoAttention(geometry, method=method, density=density, band=band,
                                    sink=sink, text_full=text_full, density_budget=density_budget,
                                    dense_layers=dense_layers, dense_steps=dense_steps,
                                    samples=samples, seed=seed, force=force, threads=1,
                                    error=error, densities=densities)
        if method_flag(method, "data_driven"):
            raise ValueError(f"method: {method!r} clusters every head itself; run its per-head masks "
                             "with tilesplash.jax.splash_attention (docs/jax.md)")
        self.block_q = check_int(block_q, "block_q", 1)
        self.block_kv = check_int(block_kv, "block_kv", 1)
        check_kernel_blocks(self.block_q, self.block_kv)
        self.scale = None if scale is None else float(scale)
        self.interpret = check_bool(interpret, "interpret")
        self.dense_layers, self.dense_steps = dense_layers, dense_steps
        self.force = force
        self.compensate = check_bool(compensate, "compensate")
        self.router = Router(self.front, density_budget, self.scale, self.front.error)
        self._runs = [self.front.candidate_run(name) for name in self.router.names]
        if any(run["kv_order"] is not None for run in self._runs):
            raise ValueError(f"method: {method!r} has candidates with their own key order, "
                             "which VideoSplashAttention does not run")
        # CandidateTables when some candidate skips a tile; the router then scores the
        # compensated candidates too.
        self._compensation = self.router.compensate_with(self.block_q, self.block_kv) \
            if self.compensate else None
        self._stacked = None  # built on the first routed call
        self._dense = None

    geometry = property(lambda self: self.front.geometry)
    candidates = property(lambda self: self.front.candidates)

    def mask(self, choice: str) -> Mask:
        """The mask a head with this choice computes, on the original order."""
        return self.front.mask(choice)

    def __call__(self, q, k, v, layer=0, step=0):
        """(out, routing) for this layer and denoising step; routing is None for
        warm-up (dense) and forced calls."""
        layer = check_int(layer, "layer", 0)
        step = check_int(step, "step", 0)
        if self.force == "dense" or _core.warmup_is_dense(self.dense_layers, self.dense_steps,
                                                          layer, step):
            return self.attend(q, k, v, None)[0], None
        if self.force is not None:
            # Committed to q's device like a router's index, so it hits the same compiled call.
            heads = int(np.prod(q.shape[:-2]))
            index = jax.device_put(np.full(heads, self.router.names.index(self.force), np.int32),
                                   device_of(q))
            return self._heads(self._routed, q, k, v, index), None
        samples = self.samples(layer, step, device_of(q))
        out, index, mse = self.attend(q, k, v, samples)
        return out, Routing(index.reshape(-1), mse.reshape(-1, mse.shape[-1]), self.router.names,
                            self.router.orders, samples.host_rows, self.geometry)

    def samples(self, layer: int, step: int, device=None):
        """What routing needs from the host for (layer, step): the sampled rows
        and the candidates' masks on them, as device arrays (Router.samples)."""
        return self.router.samples(layer, step, device)

    def attend(self, q, k, v, samples):
        """Traceable (jit, lax.scan over layers): (out, index, mse) for q, k, v
        [heads, N, d] or [batch, heads, N, d]. samples: from samples(layer,
        step), or None for dense (warm-up; index and mse are then None). index
        int32 and mse float32 have q's leading axes ([.., candidates] for mse)."""
        if samples is None:
            return self._heads(lambda q, k, v: self._dense_kernel()(q, k, v), q, k, v), None, None
        self._check(q, k, v)
        lead = q.shape[:-2]
        q3, k3, v3 = (x.reshape(-1, *x.shape[-2:]) for x in (q, k, v))
        index, mse = self.router.decide(q3, k3, v3, samples)
        out = self._routed(q3, k3, v3, index)
        return (out.reshape(*lead, *out.shape[-2:]), index.reshape(lead),
                mse.reshape(*lead, mse.shape[-1]))

    def _heads(self, run, q, k, v, *args):
        """run on [heads, N, d] with a batch axis folded into the heads."""
        self._check(q, k, v)
        out = run(*(x.reshape(-1, *x.shape[-2:]) for x in (q, k, v)), *args)
        return out.reshape(*q.shape[:-2], *out.shape[-2:])

    def _check(self, q, k, v):
        n = self.geometry.tokens
        for name, x in (("q", q), ("k", k), ("v", v)):
            if len(getattr(x, "shape", ())) not in (3, 4) or x.shape[-2] != n:
                raise ValueError(f"{name}: expected [heads, {n}, d] or [batch, heads, {n}, d] "
                                 f"(the geometry's tokens), got shape "
                                 f"{tuple(getattr(x, 'shape', ()))}")
        if k.shape[:-1] != q.shape[:-1] or v.shape[:-1] != q.shape[:-1]:
            raise ValueError(f"k, v: expected the batch, heads and tokens of q {tuple(q.shape)}, "
                             f"got {tuple(k.shape)} and {tuple(v.shape)}")

    def _dense_kernel(self):
        if self._dense is None:
            n = self.geometry.tokens
            with jax.ensure_compile_time_eval():
                self._dense = splash_attention(Mask.dense(), n, block_q=self.block_q,
                                               block_kv=self.block_kv, scale=self.scale,
                                               interpret=self.interpret)
        return self._dense

    def _routed(self, q, k, v, index):
        if self._stacked is None:
            with jax.ensure_compile_time_eval():  # concrete even when first called in a trace
                self._stacked = self._build()
        arrays, static = self._stacked
        scale = self.scale if self.scale is not None else 1.0 / math.sqrt(q.shape[-1])
        return _routed_forward(arrays, index, q, k, v, scale=scale, **static)

    def _build(self):
        """Every candidate's run (order, run-order mask, key segment) as tiles of
        one stacked grid, and the per-candidate gathers; see the module doc."""
        n, bq, bkv = self.geometry.tokens, self.block_q, self.block_kv
        extras = [run["extra"] for run in self._runs]
        segment_len = max((extra["count"] for extra in extras if extra), default=0)
        segment_blocks = -(-segment_len // bkv)
        tiles, orders, segment_keys = [], [], []
        for run, extra in zip(self._runs, extras):
            main = mask_tiles(run["run_mask"], n, n, bq, bkv)
            orders.append(np.arange(n) if run["order"] is None else run["order"])
            if segment_blocks:
                if extra is None:
                    segment = TileTable.empty(main.q_len, segment_blocks * bkv, bq, bkv)
                    keys = np.zeros(segment_len, np.int64)  # never kept
                else:
                    # A shorter segment keeps nothing past its keys (zero bits, empty tiles).
                    segment = dataclasses.replace(
                        mask_tiles(extra["mask"], n, extra["count"], bq, bkv),
                        kv_len=segment_blocks * bkv)
                    keys = extra["first"] + extra["stride"] * np.arange(segment_len)
                    keys[extra["count"]:] = extra["first"]
                segment_keys.append(keys)
                main = TileTable.concat([main, segment])
            tiles.append(main)
        block_mask, data_next, mask_next, partial_blocks = build_stacked_info(tiles)
        orders = np.stack(orders).astype(np.int32)
        inverse = np.empty_like(orders)
        np.put_along_axis(inverse, orders, np.arange(n, dtype=np.int32)[None, :], axis=1)
        arrays = {
            "block_mask": jnp.asarray(block_mask), "data_next": jnp.asarray(data_next),
            "mask_next": None if mask_next is None else jnp.asarray(mask_next),
            "partial": None if partial_blocks is None else jnp.asarray(partial_blocks),
            "order": jnp.asarray(orders), "inverse": jnp.asarray(inverse),
            "segment_keys": jnp.asarray(np.stack(segment_keys).astype(np.int32))
            if segment_blocks else None,
            "visited": None, "keep": None,
        }
        if self._compensation is not None:
            arrays["visited"] = jnp.asarray(self._compensation.visited)
            arrays["keep"] = jnp.asarray(self._compensation.keep)
        static = {"block_q": bq, "block_kv": bkv, "interpret": self.interpret,
                  "main_len": -(-n // bkv) * bkv, "segment_len": segment_blocks * bkv}
        return arrays, static


@partial(jax.jit, static_argnames=("scale", "block_q", "block_kv", "interpret", "main_len",
                                   "segment_len"))
def _routed_forward(arrays, index, q, k, v, *, scale, block_q, block_kv, interpret, main_len,
                    segment_len):
    n = q.shape[1]
    info = MaskInfo(
        data_next=arrays["data_next"][index], block_mask=arrays["block_mask"][index],
        mask_next=None if arrays["mask_next"] is None else arrays["mask_next"][index],
        partial_mask_blocks=arrays["partial"], q_sequence=None)
    kernel = make_kernel(info, block_q, block_kv, interpret)
    # Each head gathers its rows into its candidate's run order, and back.
    rows, back = arrays["order"][index], arrays["inverse"][index]

    def gather(x, where):
        return jnp.take_along_axis(x, where[:, :, None], axis=1)

    q_run = jnp.pad(scaled(gather(q, rows), scale), ((0, 0), (0, -n % block_q), (0, 0)))
    k_run, v_run = gather(k, rows), gather(v, rows)
    k_all = jnp.pad(k_run, ((0, 0), (0, main_len - n), (0, 0)))
    v_all = jnp.pad(v_run, ((0, 0), (0, main_len - n), (0, 0)))
    if segment_len:
        # The key segment (the sink): run-order keys first + j * stride, appended.
        keys = arrays["segment_keys"][index]
        pad = ((0, 0), (0, segment_len - keys.shape[1]), (0, 0))
        k_all = jnp.concatenate([k_all, jnp.pad(gather(k_run, keys), pad)], axis=1)
        v_all = jnp.concatenate([v_all, jnp.pad(gather(v_run, keys), pad)], axis=1)
    out, lse = kernel_output(kernel, q_run, k_all, v_all, n)
    if arrays["visited"] is not None:
        # Each head's main plan's skipped tiles, pooled over its run-order keys less
        # its sink segment's; merging before the scatter back is the same sum.
        pooled = pooled_tiles(k_run, v_run, block_kv, arrays["keep"][index])
        out, lse = compensate(gather(q, rows), out, lse, pooled, arrays["visited"][index],
                              scale, block_q)
    return gather(out, back)
