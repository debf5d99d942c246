"""tilesplash.jax.mask_info against Splash's own process_mask.

For every mask family, square, rectangular and ragged lengths and several
block sizes, mask_info() must give exactly what process_mask gives for the
same mask handed to Splash as a NumpyMask (zero-padded to whole blocks when
the lengths are ragged): block kinds, next-block indices, partial-block ids
and the partial blocks, dtypes included. Splash's own computable masks
(FullMask, CausalMask, LocalMask, ChunkedCausalMask) give the same kinds and
next indices. The routed runner's run-order masks (sta tile-major) and sink
segments are among the masks. Also: per-head lists, errors, and that
`import tilesplash` never imports JAX.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

jax = pytest.importorskip(
    "jax", reason="JAX is not installed (pip install 'tilesplash[jax]'; scripts/setup --tests "
    "installs it)")

import tilesplash  # noqa: E402
import tilesplash.jax as tsj  # noqa: E402
from jax.experimental.pallas.ops.tpu.splash_attention import (  # noqa: E402
    splash_attention_mask as splash_mask,
    splash_attention_mask_info as splash_info,
)
from tilesplash import Mask, VideoAttention, VideoGeometry  # noqa: E402

G = VideoGeometry(3, 4, 8, text=16, text_at="after")  # 112 tokens
G_BEFORE = VideoGeometry(4, 3, 5, text=9, text_at="before")  # 69 tokens


def keep_matrix(mask, q_len, kv_len):
    return mask.rows(np.arange(q_len), kv_len, q_len)


def padded(keep, block_q, block_kv):
    out = np.zeros((-(-keep.shape[0] // block_q) * block_q,
                    -(-keep.shape[1] // block_kv) * block_kv), bool)
    out[:keep.shape[0], :keep.shape[1]] = keep
    return out


def process_mask(keeps, block_q, block_kv):
    heads = [splash_mask.NumpyMask(padded(k, block_q, block_kv)) for k in keeps]
    info, _ = splash_info.process_mask(splash_mask.MultiHeadMask(heads), (block_q, block_kv))
    return info


def assert_same(mine, theirs, fields=("data_next", "mask_next", "block_mask",
                                      "partial_mask_blocks", "q_sequence"), what=""):
    for field in fields:
        a, b = getattr(mine, field), getattr(theirs, field)
        if a is None or b is None:
            assert a is None and b is None, (what, field)
            continue
        assert a.dtype == b.dtype and a.shape == b.shape, (what, field, a.dtype, b.dtype,
                                                           a.shape, b.shape)
        np.testing.assert_array_equal(a, b, err_msg=f"{what}: {field}")


def video_masks(g):
    return [
        Mask.spatial(g, 10, sink=True, text_full=True),
        Mask.spatial(g, 7, text_full=False),
        Mask.temporal(g, 9, sink=True, text_full=True),
        Mask.temporal(g, 12, text_full=False),
        Mask.radial(g, 0.5, block=8, sink=True),
        Mask.sta(g, window=(1, 3, 3), tile=(1, 2, 4)),
        Mask.spatial(g, 6) | Mask.temporal(g, 4),
    ]


def run_masks(g):
    """What the routed runner plans: each candidate's run-order mask and its sink
    segment (queries x frame-0 keys), as tilesplash's front door runs them."""
    layer = VideoAttention(g, method="mix", density=0.4, sink=True)
    out = []
    for name, _ in layer.candidates:
        run = layer.candidate_run(name)
        out.append((run["run_mask"], g.tokens, g.tokens))
        if run["extra"] is not None:
            out.append((run["extra"]["mask"], g.tokens, run["extra"]["count"]))
    return out


GENERIC = [Mask.dense(), Mask.causal(), Mask.causal(-9), Mask.causal(20), Mask.local(9, 30),
           Mask.local(None, 7, offset=3), Mask.local(5, None), Mask.chunked(24),
           Mask.random(0.3, 7), Mask.local(16, 16) & Mask.causal(),
           Mask.chunked(8) | Mask.local(0, 40)]

BLOCKS = [(16, 32), (32, 128), (64, 64), (8, 40), (24, 16)]


@pytest.mark.parametrize("block_q,block_kv", BLOCKS)
def test_every_family_equals_process_mask(block_q, block_kv):
    cases = [(m, G.tokens, G.tokens) for m in GENERIC + video_masks(G)]
    cases += [(m, G_BEFORE.tokens, G_BEFORE.tokens) for m in video_masks(G_BEFORE)]
    cases += [(m, 96, 160) for m in GENERIC] + [(m, 130, 64) for m in GENERIC[:6]]
    cases += run_masks(G) + run_masks(G_BEFORE)
    for mask, q_len, kv_len in cases:
        keep = keep_matrix(mask, q_len, kv_len)
        if not keep.any():
            continue  # process_mask cannot shrink an all-empty mask
        mine = tsj.mask_info(mask, q_len, kv_len, block_q=block_q, block_kv=block_kv)
        assert_same(mine, process_mask([keep], block_q, block_kv),
                    what=f"{mask} {q_len}x{kv_len} {block_q}x{block_kv}")


@pytest.mark.parametrize("q_len,kv_len,block_q,block_kv", [(128, 128, 16, 32), (64, 256, 32, 64),
                                                           (192, 96, 64, 32)])
def test_splash_computable_masks_give_the_same_kinds_and_next_indices(q_len, kv_len, block_q,
                                                                      block_kv):
    shape = (q_len, kv_len)
    pairs = [(Mask.dense(), splash_mask.FullMask(shape)),
             (Mask.causal(), splash_mask.CausalMask(shape)),
             (Mask.causal(17), splash_mask.CausalMask(shape, offset=17)),
             (Mask.local(20, 5), splash_mask.LocalMask(shape, (20, 5), 0)),
             (Mask.local(None, 9, offset=-4), splash_mask.LocalMask(shape, (None, 9), -4)),
             (Mask.chunked(32), splash_mask.ChunkedCausalMask(shape, 32))]
    for ours, theirs in pairs:
        reference, _ = splash_info.process_mask(splash_mask.MultiHeadMask([theirs]),
                                                (block_q, block_kv))
        mine = tsj.mask_info(ours, q_len, kv_len, block_q=block_q, block_kv=block_kv)
        assert_same(mine, reference, ("data_next", "block_mask"), what=str(ours))


@pytest.mark.parametrize("block_q,block_kv", [(16, 32), (32, 64), (8, 128)])
def test_per_head_lists_equal_multi_head_masks(block_q, block_kv):
    n = G.tokens
    spatial, temporal = Mask.spatial(G, 10, sink=True), Mask.temporal(G, 10, sink=True)
    lists = [
        [spatial, temporal, temporal, spatial, Mask.dense()],
        [temporal] * 3,                                       # one distinct mask: shrunk
        [Mask.causal(), Mask.local(8, 8), Mask.random(0.2, 1), Mask.causal()],
        [Mask.causal(-40), Mask.causal(), Mask.causal(-40)],  # a head empty at the start
        [Mask.local(0, 0), str(Mask.local(0, 0)), Mask.dense()],  # SPEC strings work too
    ]
    for masks in lists:
        keeps = [keep_matrix(tilesplash._mask.as_mask(m), n, n) for m in masks]
        mine = tsj.mask_info(masks, n, block_q=block_q, block_kv=block_kv)
        assert_same(mine, process_mask(keeps, block_q, block_kv), what=str(masks))


def test_equal_contents_under_different_masks_share_one_distinct_mask():
    # process_mask compares NumpyMasks by content; so does mask_info (causal and
    # local(None, 0) are the same pairs).
    n = 96
    masks = [Mask.causal(), Mask.local(None, 0)]
    mine = tsj.mask_info(masks, n, block_q=16, block_kv=32)
    assert mine.block_mask.shape[0] == 1
    assert_same(mine, process_mask([keep_matrix(m, n, n) for m in masks], 16, 32))


def test_golden_causal_plan():
    info = tsj.mask_info(Mask.causal(), 64, block_q=16, block_kv=16)
    assert info.block_mask.tolist() == [[[1, 0, 0, 0], [2, 1, 0, 0], [2, 2, 1, 0], [2, 2, 2, 1]]]
    assert info.data_next.tolist() == [[[0, 0, 0, 0], [0, 1, 0, 0], [0, 1, 2, 0], [0, 1, 2, 3]]]
    assert info.partial_mask_blocks.shape == (1, 16, 16)
    assert np.array_equal(info.partial_mask_blocks[0], np.tril(np.ones((16, 16), bool)))
    assert not info.block_mask.flags.writeable  # cached: shared between callers


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="mask"):
        tsj.mask_info(3, 64, block_q=16, block_kv=16)
    with pytest.raises(ValueError, match="masks"):
        tsj.mask_info([], 64, block_q=16, block_kv=16)
    with pytest.raises(ValueError, match="q_len"):
        tsj.mask_info("causal", 0, block_q=16, block_kv=16)
    with pytest.raises(ValueError, match="block_kv"):
        tsj.mask_info("causal", 64, block_q=16, block_kv=0)
    with pytest.raises(TypeError, match="block_q"):
        tsj.mask_info("causal", 64, block_q=16.0, block_kv=16)
    with pytest.raises(ValueError, match="keeps no pair"):
        tsj.mask_info(Mask.causal(-100), 64, block_q=16, block_kv=16)
    with pytest.raises(ValueError):  # a video mask covers exactly its geometry's tokens
        tsj.mask_info(Mask.spatial(G, 4), G.tokens + 1, block_q=16, block_kv=16)


def test_import_tilesplash_never_imports_jax():
    code = ("import sys, tilesplash\n"
            "assert not any(m.split('.')[0] in ('jax', 'jaxlib') for m in sys.modules)\n"
            "import tilesplash.jax\n"
            "assert 'jax' in sys.modules\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr


def test_tilesplash_jax_without_jax_says_how_to_install():
    code = ("import importlib.abc, sys\n"
            "class Block(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path, target=None):\n"
            "        if name.split('.')[0] in ('jax', 'jaxlib'):\n"
            "            raise ImportError(name + ' is blocked')\n"
            "sys.meta_path.insert(0, Block())\n"
            "import tilesplash\n"
            "try:\n"
            "    import tilesplash.jax\n"
            "except ImportError as error:\n"
            "    assert \"pip install 'tilesplash[jax]'\" in str(error), error\n"
            "else:\n"
            "    raise AssertionError('imported without JAX')\n")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
