"""VideoSplashAttention: routed video attention for a JAX model on Splash's kernel.

Per call (a layer at a denoising step): route every head in jax.numpy
(_route.py), then run all heads in one Splash kernel call. Each candidate
runs in its own order, as in tilesplash's front door: temporal heads are
permuted to token-major order, where their mask is the band that spatial
heads run in frame-major order, and the first-frame sink is a key segment
of its own (frame 0's keys appended after the sequence, _sink.py). Other
candidates (radial, sta) run their mask on the original order.

Plans are built once per candidate: its tiles as a shrunk Splash grid, all
candidates' partial blocks numbered together (build_stacked_info). A layer's
MaskInfo is the entries of its heads' choices gathered on the device, and
the token-major permutation is a per-head gather too, so every choice
pattern runs the same compiled function with no host round trip between
routing and attention. Warm-up calls (and force="dense") run a dense kernel.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental.pallas.ops.tpu.splash_attention.splash_attention_mask_info import MaskInfo

from .._mask import Mask
from .._tensors import check_bool, check_int
from .._video import VideoAttention
from ._kernel import check_kernel_blocks, kernel_output, make_kernel, scaled, splash_attention
from ._mask_info import build_stacked_info
from ._plans import mask_tiles
from ._route import Router, Routing, device_of, token_major_permutation
from ._sink import sink_tiles
from ._tiles import TileSet


class VideoSplashAttention:
    """Routed sparse attention over every head of a layer, on Splash's kernel.

    The options are tilesplash.VideoAttention's (method "svg", "spatial",
    "temporal", "radial", "sta" or "mix"; svg2 clusters per head need
    tilesplash.jax.splash_attention with each head's mask): same candidates,
    same sampled rows, same decisions. block_q / block_kv: Splash's tiles
    (block_kv a multiple of 128, block_q of 8); scale: default 1/sqrt(d);
    interpret=True runs Pallas' interpreter (CPU).

    Call it with q, k, v [heads, N, d] (or [batch, heads, N, d]) jax arrays in
    the original frame-major order (N = geometry.tokens): returns (out, routing),
    out like q with v's head dim, routing a tilesplash.jax.Routing (per batch
    entry and head, batch-major), or None for warm-up and forced calls. Inside
    jax.jit or lax.scan, where layer and step are not known on the host, call
    attend(q, k, v, samples) with samples(layer, step) made outside.
    """

    def __init__(self, geometry, *, method="svg", density=0.25, band=None, sink=False,
                 text_full=True, density_budget=None, dense_layers=0, dense_steps=0, samples=64,
                 seed=0, force=None, block_q=512, block_kv=512, scale=None, interpret=False):
        self.front = VideoAttention(geometry, method=method, density=density, band=band,
                                    sink=sink, text_full=text_full, density_budget=density_budget,
                                    dense_layers=dense_layers, dense_steps=dense_steps,
                                    samples=samples, seed=seed, force=force, threads=1)
        if method == "svg2":
            raise ValueError("method: 'svg2' clusters every head itself; run its per-head masks "
                             "with tilesplash.jax.splash_attention (docs/jax.md)")
        self.block_q = check_int(block_q, "block_q", 1)
        self.block_kv = check_int(block_kv, "block_kv", 1)
        check_kernel_blocks(self.block_q, self.block_kv)
        self.scale = None if scale is None else float(scale)
        self.interpret = check_bool(interpret, "interpret")
        self.dense_layers, self.dense_steps = dense_layers, dense_steps
        self.force = force
        self.router = Router(self.front, density_budget, self.scale)
        self._runs = [_candidate_run(self.geometry, m) for m in self.router.masks]
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
        if self.force == "dense" or layer < self.dense_layers or step < self.dense_steps:
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
                            samples.host_rows, self.geometry)

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
        g, bq, bkv = self.geometry, self.block_q, self.block_kv
        n = g.tokens
        with_sink = any(run[2] is not None for run in self._runs)
        tiles = []
        for mask, _, sink_stride, band in self._runs:
            main = mask_tiles(mask, n, n, bq, bkv)
            if with_sink:
                if sink_stride is None:
                    segment = _empty_tiles(main.q_blocks, -(-g.tokens_per_frame // bkv), bq, bkv)
                else:
                    segment = sink_tiles(_video_begin(g), g.frames, g.tokens_per_frame,
                                         band, sink_stride, n, bq, bkv)
                main = TileSet.concat([main, segment])
            tiles.append(main)
        block_mask, data_next, mask_next, partial_blocks = build_stacked_info(tiles)
        permutation, inverse = token_major_permutation(g)
        arrays = {
            "block_mask": jnp.asarray(block_mask), "data_next": jnp.asarray(data_next),
            "mask_next": None if mask_next is None else jnp.asarray(mask_next),
            "partial": None if partial_blocks is None else jnp.asarray(partial_blocks),
            "token_major": jnp.asarray(np.array([run[1] for run in self._runs], bool)),
            "permutation": jnp.asarray(permutation.astype(np.int32)),
            "inverse": jnp.asarray(inverse.astype(np.int32)),
        }
        static = {
            "block_q": bq, "block_kv": bkv, "interpret": self.interpret,
            "main_len": tiles[0].kv_blocks * bkv if not with_sink else
            (tiles[0].kv_blocks - -(-g.tokens_per_frame // bkv)) * bkv,
            "sink": (_video_begin(g), g.tokens_per_frame) if with_sink else None,
        }
        return arrays, static


def _candidate_run(geometry, mask: Mask):
    """(mask to plan in run order, runs token-major, sink segment stride or None,
    band of the sink segment)."""
    spec = str(mask)
    kind, _, rest = spec.partition(":")
    if kind in ("spatial", "temporal"):
        items = rest.split(",")
        band = next((int(x[5:]) for x in items if x.startswith("band=")), None)
        sink, text_full = "sink" in items, "text_full" in items
        make = Mask.spatial if kind == "spatial" else Mask.temporal
        if band is not None and make(geometry, band, sink=sink, text_full=text_full) == mask:
            # In its run order either kind is the band (text area included) ...
            run_mask = Mask.spatial(geometry, band, text_full=text_full)
            # ... and the sink, frame 0's keys, is a segment of its own.
            stride = (1 if kind == "spatial" else geometry.frames) if sink else None
            return run_mask, kind == "temporal", stride, band
    return mask, False, None, None


def _video_begin(geometry) -> int:
    return geometry.text_tokens if geometry.text_at == "before" else 0


def _empty_tiles(q_blocks, kv_blocks, block_q, block_kv) -> TileSet:
    empty = np.zeros(0, np.int64)
    return TileSet(q_blocks, kv_blocks, block_q, block_kv, empty, empty, np.zeros(0, np.uint8),
                   empty, np.zeros((0, block_q, -(-block_kv // 64)), np.uint64))


@partial(jax.jit, static_argnames=("scale", "block_q", "block_kv", "interpret", "main_len",
                                   "sink"))
def _routed_forward(arrays, index, q, k, v, *, scale, block_q, block_kv, interpret, main_len,
                    sink):
    heads, n, _ = q.shape
    info = MaskInfo(
        data_next=arrays["data_next"][index], block_mask=arrays["block_mask"][index],
        mask_next=None if arrays["mask_next"] is None else arrays["mask_next"][index],
        partial_mask_blocks=arrays["partial"], q_sequence=None)
    kernel = make_kernel(info, block_q, block_kv, interpret)
    # Token-major heads gather their rows; the others keep theirs.
    token_major = arrays["token_major"][index]
    rows = jnp.where(token_major[:, None], arrays["permutation"][None, :],
                     jnp.arange(n, dtype=jnp.int32)[None, :])
    back = jnp.where(token_major[:, None], arrays["inverse"][None, :],
                     jnp.arange(n, dtype=jnp.int32)[None, :])

    def run_order(x):
        return jnp.take_along_axis(x, rows[:, :, None], axis=1)

    q_run = jnp.pad(scaled(run_order(q), scale), ((0, 0), (0, -n % block_q), (0, 0)))
    k_run = jnp.pad(run_order(k), ((0, 0), (0, main_len - n), (0, 0)))
    v_run = jnp.pad(run_order(v), ((0, 0), (0, main_len - n), (0, 0)))
    if sink is not None:
        begin, per_frame = sink
        pad = -per_frame % block_kv
        k_run = jnp.concatenate(
            [k_run, jnp.pad(k[:, begin:begin + per_frame], ((0, 0), (0, pad), (0, 0)))], axis=1)
        v_run = jnp.concatenate(
            [v_run, jnp.pad(v[:, begin:begin + per_frame], ((0, 0), (0, pad), (0, 0)))], axis=1)
    out, _ = kernel_output(kernel, q_run, k_run, v_run, n)
    return jnp.take_along_axis(out, back[:, :, None], axis=1)
