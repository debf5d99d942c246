"""precision="int8" (8-bit Q.K^T, docs/kernel.md) through the Python entry points:
tilesplash.attention (NumPy and torch), VideoAttention and diffusers.enable. The
int8 output is close to the float64 reference (cosine >= 0.999, small relative L2)
and is not the default path's output (the int8 path really ran), also on the
hard inputs of issue 27 (outlier channels, outlier entries, a sharp softmax, an
offset on Q); bad values raise ValueError naming `precision`. The exact checks of the int8 path per SIMD target
are the C++ tests (tests/int8_attention_test.cc)."""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import VideoAttention, VideoGeometry
from conftest import mask_matrix, reference_attention


def _inputs(seed, heads=2, n=200, d=64, offset=3.0):
    """[1, H, N, d] f32; K with a per-channel offset (what the smoothing removes)."""
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, heads, n, d)).astype(np.float32)
    k = rng.standard_normal((1, heads, n, d)).astype(np.float32)
    k += (offset * np.cos(np.arange(d))).astype(np.float32)
    v = rng.standard_normal((1, heads, n, d)).astype(np.float32)
    return q, k, v


def _cosine_and_rel_l2(got, want):
    got = np.asarray(got, dtype=np.float64).ravel()
    want = np.asarray(want, dtype=np.float64).ravel()
    cosine = got @ want / np.sqrt((got @ got) * (want @ want))
    return cosine, np.linalg.norm(got - want) / np.linalg.norm(want)


@pytest.mark.parametrize("spec", ["dense", "causal", "local:left=50,right=30"])
def test_numpy_int8_is_close_to_the_float64_reference(spec):
    q, k, v = _inputs(1)
    out, lse = tilesplash.attention(q, k, v, mask=spec, precision="int8", return_lse=True,
                                    block_q=64, block_kv=64)
    default = tilesplash.attention(q, k, v, mask=spec, block_q=64, block_kv=64)
    keep = mask_matrix(tilesplash.Mask.parse(spec), 200, 200)
    want, want_lse = reference_attention(q[0], k[0], v[0], keep)
    cosine, rel = _cosine_and_rel_l2(out[0], want)
    assert cosine >= 0.999, cosine
    assert rel <= 0.05, rel
    # The LSE is that of the original scores (the smoothing added back).
    np.testing.assert_allclose(lse[0], want_lse, rtol=0, atol=0.05)
    assert not np.array_equal(out, default)  # the 8-bit path ran, not the default one
    # Bit-identical whatever the thread count.
    for threads in (1, 2):
        again = tilesplash.attention(q, k, v, mask=spec, precision="int8", threads=threads,
                                     block_q=64, block_kv=64)
        assert np.array_equal(again, out)


def _hard(kind, n=512, d=128, seed=5):
    """[1, 1, N, d] f32 inputs of issue 27's accuracy table."""
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, 1, n, d)).astype(np.float32) for _ in range(3))
    if kind == "key_channels_20x":
        k[..., :4] *= 20
    elif kind == "query_channels_20x":
        q[..., :4] *= 20
    elif kind == "key_entries_25x":
        k[rng.random(k.shape) < 0.002] *= 25
    elif kind == "sharp_10x":
        q *= 10
        k *= 10
    elif kind == "query_offset_100":
        q += 100
    elif kind == "opposed_channels_50x":
        q[..., :2] *= 50
        k[..., 2:4] *= 50
    return q, k, v


@pytest.mark.parametrize("kind", ["gaussian", "key_channels_20x", "query_channels_20x",
                                  "key_entries_25x", "sharp_10x", "query_offset_100",
                                  "opposed_channels_50x"])
def test_int8_keeps_its_accuracy_on_hard_inputs(kind):
    q, k, v = _hard(kind)
    out, lse = tilesplash.attention(q, k, v, mask="dense", precision="int8", return_lse=True)
    want, want_lse = reference_attention(q[0], k[0], v[0], np.ones((512, 512), dtype=bool))
    cosine, _ = _cosine_and_rel_l2(out[0], want)
    assert cosine >= 0.999, cosine
    if kind == "sharp_10x":  # too sharp for 8 bits: its tiles run in f32, the LSE with them
        np.testing.assert_allclose(lse[0], want_lse, rtol=0, atol=0.01)


@pytest.mark.parametrize("bad", ["fp8", "INT8", "", None, 8])
def test_bad_precision_names_the_argument(bad):
    q, k, v = _inputs(2, n=16, d=16)
    with pytest.raises(ValueError, match="precision"):
        tilesplash.attention(q, k, v, precision=bad)
    with pytest.raises(ValueError, match="precision"):
        VideoAttention(VideoGeometry(2, 2, 4), precision=bad)


def test_video_attention_int8_is_close_to_its_default():
    geometry = VideoGeometry(4, 3, 5)  # 60 tokens
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, geometry.tokens, 2, 32)).astype(np.float32)
               for _ in range(3))
    k += np.float32(2.0)
    outs = []
    for precision in ("default", "int8"):
        attention = VideoAttention(geometry, force="dense", precision=precision)
        out, _ = attention(q, k, v)
        outs.append(out)
    cosine, rel = _cosine_and_rel_l2(outs[1], outs[0])
    assert cosine >= 0.999, cosine
    assert rel <= 0.05, rel
    assert not np.array_equal(outs[0], outs[1])


def test_torch_int8_matches_numpy_and_refuses_flex():
    torch = pytest.importorskip("torch")
    q, k, v = _inputs(4, n=130)
    got = tilesplash.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                               mask="causal", precision="int8")
    want = tilesplash.attention(q, k, v, mask="causal", precision="int8")
    assert np.array_equal(got.numpy(), want)  # the torch op runs the same kernel call
    with pytest.raises(ValueError, match="precision"):
        tilesplash.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                             precision="int8", backend="flex")
    with pytest.raises(ValueError, match="precision"):
        tilesplash.attention(torch.from_numpy(q), torch.from_numpy(k), torch.from_numpy(v),
                             precision="half")


def test_diffusers_enable_takes_precision():
    torch = pytest.importorskip("torch")
    pytest.importorskip("diffusers")
    tsd = pytest.importorskip("tilesplash.diffusers")
    from diffusers_tiny import relative_error, run_wan, tiny_wan, wan_inputs

    model = tiny_wan(layers=1)
    for bad in ("fp8", None):
        with pytest.raises(ValueError, match="precision"):
            tsd.enable(model, precision=bad)
    with pytest.raises(ValueError, match="precision"):
        tsd.enable(model, precision="int8", backend="flex")
    hidden, text = wan_inputs()
    outputs = []
    for precision in ("default", "int8"):
        handle = tsd.enable(model, force="dense", dense_layers=0, precision=precision)
        try:
            outputs.append(run_wan(model, hidden, text))
        finally:
            handle.remove()
    assert relative_error(outputs[1], outputs[0]) < 0.05
    assert not torch.equal(outputs[1], outputs[0])
