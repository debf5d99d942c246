"""Every bad input gives ValueError or TypeError naming the argument and what
was expected, never a crash; zero-size inputs follow the documented rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask, VideoAttention, VideoGeometry


def qkv(shape=(2, 3, 20, 16), kv_shape=None, dtype=np.float32):
    rng = np.random.default_rng(0)
    kv_shape = kv_shape or shape
    return (rng.standard_normal(shape).astype(dtype), rng.standard_normal(kv_shape).astype(dtype),
            rng.standard_normal(kv_shape).astype(dtype))


def raises(kind, *words):
    """pytest.raises whose message must contain every word."""
    class Checker:
        def __enter__(self):
            self.ctx = pytest.raises(kind)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            result = self.ctx.__exit__(*exc)
            message = str(self.info.value)
            for word in words:
                assert word in message, f"{word!r} not in {message!r}"
            return result
    return Checker()


def test_wrong_rank():
    q, k, v = qkv()
    with raises(ValueError, "q:", "4-d", "bhnd"):
        tilesplash.attention(q[0], k, v)
    with raises(ValueError, "k:", "3-d", "hnd"):
        tilesplash.attention(q[0], k, v[0], layout="hnd")


@pytest.mark.parametrize("change,words", [
    (lambda q, k, v: (q, k[:, :2], v[:, :2]), ("k:", "heads 2", "q (3)")),
    (lambda q, k, v: (q, k[:1], v), ("k:", "batch 1", "q (2)")),
    (lambda q, k, v: (q, k, v[:, :, :7]), ("v:", "sequence length 7", "k (20)")),
    (lambda q, k, v: (q, k[..., :8], v), ("k:", "head dim 8", "q (16)")),
])
def test_mismatched_shapes(change, words):
    with raises(ValueError, *words):
        tilesplash.attention(*change(*qkv()))


def test_mismatched_and_unsupported_dtypes():
    q, k, v = qkv()
    with raises(TypeError, "k:", "float16", "float32"):
        tilesplash.attention(q, k.astype(np.float16), v)
    for bad in (np.int32, np.int64, np.uint8, np.float64, np.complex64, np.bool_):
        with raises(TypeError, "q:", "not supported", "float32, float16 or bfloat16"):
            tilesplash.attention(q.astype(bad), k.astype(bad), v.astype(bad))


def test_wrong_types():
    q, k, v = qkv()
    with raises(TypeError, "q:", "numpy.ndarray or a torch.Tensor", "list"):
        tilesplash.attention(q.tolist(), k, v)
    with raises(TypeError, "mask:", "SPEC string or a tilesplash.Mask"):
        tilesplash.attention(q, k, v, mask=3)
    torch = pytest.importorskip("torch")
    with raises(TypeError, "k:", "numpy.ndarray like q"):
        tilesplash.attention(q, torch.from_numpy(k), v)


def test_non_cpu_tensors():
    torch = pytest.importorskip("torch")
    # Tensors off the CPU run FlexAttention (backend="auto"; tests/python/test_flex.py);
    # the native kernel refuses them by name.
    q, k, v = (torch.empty(1, 2, 8, 16, device="meta") for _ in range(3))
    with raises(ValueError, "q:", "backend 'cpu' runs CPU tensors", "meta"):
        tilesplash.attention(q, k, v, backend="cpu")
    cpu = torch.zeros(1, 2, 8, 16)
    with raises(ValueError, "v:", "CPU tensor"):
        tilesplash.attention(cpu, cpu, v)
    sparse = torch.zeros(1, 2, 8, 16).to_sparse()
    with raises(TypeError, "q:", "dense (strided) tensor"):
        tilesplash.attention(sparse, cpu, cpu)
    if torch.cuda.is_available():
        with raises(ValueError, "q:", "CPU tensor", "cuda"):
            tilesplash.attention(cpu.cuda(), cpu.cuda(), cpu.cuda(), backend="cpu")


@pytest.mark.parametrize("d", [12, 4, 264, 7])
def test_head_dim_not_supported(d):
    with raises(ValueError, "head dim", "multiple of 8 in [8, 256]", str(d)):
        tilesplash.attention(*qkv((1, 2, 10, d)))


@pytest.mark.parametrize("name", ["q", "k", "v"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_nan_and_inf(name, value):
    q, k, v = qkv()
    {"q": q, "k": k, "v": v}[name][1, 2, 5, 3] = value
    # bhnd runs both batch entries as one kernel call, bnhd one call per entry:
    # either way the message names the entry, the head and the row.
    with raises(ValueError, f"{name} contains NaN or Inf (head 2, row 5)", "expected finite values",
                "in batch entry 1"):
        tilesplash.attention(q, k, v, mask="causal")
    with raises(ValueError, f"{name} contains NaN or Inf (head 5, row 2)", "in batch entry 1"):
        tilesplash.attention(q, k, v, mask="causal", layout="bnhd")


def test_the_torch_op_called_directly_checks_its_arguments():
    torch = pytest.importorskip("torch")
    import tilesplash._torch_ops  # noqa: F401  registers the op
    x = torch.zeros(2, 8, 16)
    with raises(ValueError, "q:", "4-d"):
        torch.ops.tilesplash.attention(x, x, x, "dense", "bhnd", None, None, None, 0)
    with raises(ValueError, "layout:"):
        torch.ops.tilesplash.attention(x, x, x, "dense", "nhd", None, None, None, 0)
    with raises(TypeError, "k:", "float64"):
        torch.ops.tilesplash.attention(x, x.double(), x, "dense", "hnd", None, None, None, 0)


def test_nan_through_the_torch_op():
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(x) for x in qkv())
    k[0, 0, 0, 0] = math.nan
    with raises(ValueError, "k contains NaN or Inf"):
        tilesplash.attention(q, k, v)


@pytest.mark.parametrize("spec", ["causl", "local:left=-3", "causal|", "chunked:size=0",
                                  "spatial:frames=2,height=2,band=3", "random:density=2,seed=1"])
def test_bad_spec(spec):
    with raises(ValueError, "mask"):
        tilesplash.attention(*qkv(), mask=spec)
    with raises(ValueError, "mask"):
        Mask.parse(spec)


@pytest.mark.parametrize("kwargs,words", [
    ({"layout": "nhd"}, ("layout:", "'bhnd', 'bnhd' or 'hnd'", "'nhd'")),
    ({"layout": None}, ("layout:",)),
    ({"scale": 0.0}, ("scale:", "> 0")),
    ({"scale": math.nan}, ("scale:",)),
    ({"threads": -1}, ("threads:", "in [0, 4096]")),
    ({"block_kv": 100}, ("block_kv:", "multiple of 64")),
    ({"block_q": 0}, ("block_q:", "in [1, 4096]")),
    ({"block_q": 5000}, ("block_q:", "[1, 4096]")),
    ({"block_q": 2**70}, ("block_q:", "in [1, 4096]")),
    ({"block_kv": 0}, ("block_kv:", "in [64, 1024]")),
    ({"threads": 2**40}, ("threads:", "in [0, 4096]")),
    ({"scale": 1e-300}, ("scale:", "float32")),
    ({"scale": 10**400}, ("scale:", "beyond the float range")),
    # |q.k| is tiny here: the scale is what leaves float32, so it is named.
    ({"scale": 3e38}, ("scale:", "2.3586574e+38", "log2(e)")),
])
def test_bad_options(kwargs, words):
    with raises(ValueError, *words):
        tilesplash.attention(*qkv(), **kwargs)


def test_bad_option_types():
    with raises(TypeError, "scale:"):
        tilesplash.attention(*qkv(), scale="1")
    with raises(TypeError, "threads:"):
        tilesplash.attention(*qkv(), threads=1.5)
    with raises(TypeError, "return_lse:", "True or False", "str"):
        tilesplash.attention(*qkv(), return_lse="no")
    with raises(ValueError, "capacity:", "in [0, 2^63 - 1]"):
        tilesplash.set_plan_cache_capacity(-1)


G = VideoGeometry(2, 3, 3)


@pytest.mark.parametrize("make,kind,words", [
    (lambda: Mask.causal(1.5), TypeError, ("offset:", "an int", "float")),
    (lambda: Mask.local(left="3"), TypeError, ("left:", "an int or None", "str")),
    (lambda: Mask.local(right=-1), ValueError, ("right:", "in [0, 2^63 - 1]")),
    (lambda: Mask.chunked(0), ValueError, ("size:", "in [1, 2^63 - 1]")),
    (lambda: Mask.chunked(None), TypeError, ("size:",)),
    (lambda: Mask.random(1.5), ValueError, ("density:", "[0, 1]")),
    (lambda: Mask.random(0.5, seed=-1), ValueError, ("seed:",)),
    (lambda: Mask.spatial("frames=2,height=3,width=3", 4), TypeError, ("geometry:", "VideoGeometry")),
    (lambda: Mask.spatial(G, 2.5), TypeError, ("band:", "an int or None")),
    (lambda: Mask.temporal(G, 4, sink="yes"), TypeError, ("sink:", "True or False")),
    (lambda: Mask.spatial(G, density="0.2"), TypeError, ("density:",)),
    (lambda: Mask.causal().keeps(1.0, 2), TypeError, ("q:", "an int")),
])
def test_mask_constructor_errors(make, kind, words):
    with raises(kind, *words):
        make()


def test_video_mask_on_the_wrong_length():
    g = VideoGeometry(2, 3, 3)
    with raises(ValueError, "18"):
        tilesplash.attention(*qkv((1, 2, 17, 8)), mask=Mask.spatial(g, 4))


def test_zero_length_sequences_follow_the_rule():
    q, k, v = qkv((2, 3, 0, 16), (2, 3, 5, 16))
    out, lse = tilesplash.attention(q, k, v, mask="causal", return_lse=True)
    assert out.shape == (2, 3, 0, 16) and lse.shape == (2, 3, 0)  # no queries: empty
    q, k, _ = qkv((2, 3, 4, 16), (2, 3, 0, 16))
    v = np.zeros((2, 3, 0, 8), np.float32)
    out, lse = tilesplash.attention(q, k, v, return_lse=True)      # no keys: 0 and -inf
    assert out.shape == (2, 3, 4, 8) and (out == 0).all() and (lse == -np.inf).all()
    q, k, v = qkv((0, 3, 4, 16))
    assert tilesplash.attention(q, k, v).shape == (0, 3, 4, 16)     # no batch entries
    q, k, v = qkv((4, 0, 16), dtype=np.float16)
    assert tilesplash.attention(q, k, v, layout="hnd").shape == (4, 0, 16)  # layout hnd, no rows
    torch = pytest.importorskip("torch")
    t = torch.zeros(1, 2, 0, 16)
    out, lse = tilesplash.attention(t, torch.zeros(1, 2, 3, 16), torch.zeros(1, 2, 3, 16),
                                    return_lse=True)
    assert out.shape == (1, 2, 0, 16) and lse.shape == (1, 2, 0)
    with raises(ValueError, "q:", "head dim"):
        tilesplash.attention(*qkv((1, 2, 0, 12)))  # the head dim rule still holds


def test_plan_errors():
    with raises(ValueError, "q_len:", "in [1, 2^63 - 1]"):
        tilesplash.plan("causal", 0)
    with raises(ValueError, "block_q"):
        tilesplash.plan("causal", 10, block_q=0)
    with raises(TypeError, "mask:"):
        tilesplash.plan(None, 10)


@pytest.mark.parametrize("make,kind,words", [
    (lambda: VideoGeometry(0, 3, 3), ValueError, ("frames",)),
    (lambda: VideoGeometry(2, 3, 3, text=4), ValueError, ("text",)),
    (lambda: VideoGeometry(2, 3, 3, text=4, text_at="middle"), ValueError, ("text_at:", "'before'")),
    (lambda: VideoGeometry(2.0, 3, 3), TypeError, ("frames:", "an int", "float")),
    (lambda: VideoGeometry(2, "3", 3), TypeError, ("height:", "an int", "str")),
    (lambda: VideoGeometry(2, 3, 3, text=True), TypeError, ("text:", "an int", "bool")),
    (lambda: VideoGeometry(2, 3, 3, text=4, text_at=1), TypeError, ("text_at:", "a str", "int")),
    (lambda: VideoGeometry(2, 3, 2**64), ValueError, ("width:", "64-bit")),
    (lambda: VideoGeometry.parse(3), TypeError, ("text:", "a str")),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), sink=1), TypeError, ("sink:", "True or False")),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), text_full=None), TypeError, ("text_full:",)),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), threads=-1), ValueError, ("threads:",)),
    (lambda: VideoAttention("frames=2", density=0.2), TypeError, ("geometry:",)),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), density=0.0), ValueError, ("density", "(0, 1]")),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), density=1.5), ValueError, ("density",)),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), force="radial"), ValueError, ("force:", "'temporal'")),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), samples=-1), ValueError, ("samples:",)),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), band=-2), ValueError, ("band:",)),
    (lambda: VideoAttention(VideoGeometry(2, 3, 3), block_kv=96), ValueError, ("block_kv:",)),
    (lambda: Mask.spatial(VideoGeometry(2, 3, 3)), ValueError, ("band:", "neither")),
    (lambda: Mask.temporal(VideoGeometry(2, 3, 3), 3, density=0.2), ValueError, ("band:", "both")),
])
def test_video_constructor_errors(make, kind, words):
    with raises(kind, *words):
        make()


def test_video_call_errors():
    layer = VideoAttention(VideoGeometry(2, 3, 3))
    q, k, v = qkv((1, 17, 2, 16))
    with raises(ValueError, "q: sequence length 17", "geometry's tokens (18)"):
        layer(q, k, v)
    with raises(ValueError, "q: sequence length 17", "(18)"):
        layer(*qkv((0, 17, 2, 16)))  # no batch entries: N is still fixed by the geometry
    q, k, v = qkv((1, 18, 2, 16))
    with raises(ValueError, "layer:"):
        layer(q, k, v, layer=-1)
    with raises(ValueError, "layout:"):
        layer(q, k, v, layout="bsnd")
    with raises(TypeError, "v:", "float64"):
        layer(q, k, v.astype(np.float64))
    q[0, 3, 1, 2] = math.nan
    with raises(ValueError, "NaN"):
        layer(q, k, v)
    q, k, v = qkv((2, 18, 2, 16))
    v[1, 4, 0, 0] = math.inf
    with raises(ValueError, "v contains NaN or Inf", "in batch entry 1"):
        layer(q, k, v)
    with raises(TypeError, "return_lse:"):
        layer(*qkv((1, 18, 2, 16)), return_lse=None)
    out, report = layer(*qkv((0, 18, 2, 16)))  # no batch entries
    assert out.shape == (0, 18, 2, 16) and report["heads"] == []
