"""The backend seam of the Python layer: backend= resolved once into an object whose
capabilities answer every refusal; one LSE merge in torch ops; svg2's options read
from the core, so the flex backend holds no rule of its own."""

import numpy as np
import pytest

import tilesplash
from tilesplash import _backends
from tilesplash._backends.native import NativeBackend

torch = pytest.importorskip("torch")


def _qkv(n=48, d=16, heads=2, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((1, heads, n, d)).astype(dtype) for _ in range(3)]


def test_resolve_once_by_kind_and_device():
    q = _qkv()[0]
    assert _backends.resolve("auto", q).name == "cpu"
    assert _backends.resolve("auto", torch.zeros(1, 1, 4, 8)).name == "cpu"
    assert _backends.resolve("auto", torch.zeros(1, 1, 4, 8, device="meta")).name == "flex"
    assert _backends.resolve("flex", torch.zeros(1, 1, 4, 8)).name == "flex"
    with pytest.raises(TypeError, match="backend: 'flex' runs torch tensors"):
        _backends.resolve("flex", q)
    with pytest.raises(ValueError, match="q: backend 'cpu' runs CPU tensors"):
        _backends.resolve("cpu", torch.zeros(1, 1, 4, 8, device="meta"))
    for bad in ("cuda", None, 3):
        with pytest.raises(ValueError, match="backend: expected 'auto', 'cpu' or 'flex'"):
            _backends.resolve(bad, q)


def test_capabilities_answer_the_refusals(monkeypatch):
    """Every front door asks the backend object: take int8 away from the native backend
    and attention(), VideoAttention and enable() refuse it alike, in one wording."""
    q, k, v = _qkv()
    monkeypatch.setattr(NativeBackend, "precisions", ("default",))
    with pytest.raises(ValueError, match="precision: 'int8' .*the cpu backend takes"):
        tilesplash.attention(q, k, v, precision="int8")
    g = tilesplash.VideoGeometry(2, 4, 6)
    with pytest.raises(ValueError, match="precision: 'int8' .*the cpu backend takes"):
        tilesplash.VideoAttention(g, precision="int8", backend="cpu")
    va = tilesplash.VideoAttention(g, precision="int8")  # "auto": refused at the call
    x = np.zeros((1, 2, g.tokens, 16), np.float32)
    with pytest.raises(ValueError, match="precision: 'int8' .*the cpu backend takes"):
        va(x, x, x, layout="bhnd")
    with pytest.raises(ValueError, match="precision: 'int8' .*the flex backend takes"):
        tilesplash.attention(*(torch.from_numpy(a) for a in (q, k, v)), precision="int8",
                             backend="flex")


def test_block_rule_is_the_backends():
    import tilesplash.flex

    q, k, v = (torch.from_numpy(a) for a in _qkv())
    with pytest.raises(ValueError, match="block_q: the flex backend needs a multiple of 16"):
        tilesplash.attention(q, k, v, backend="flex", block_q=24)
    with pytest.raises(ValueError, match="block_size: block_kv: the flex backend needs a "
                                         "multiple of 16"):
        tilesplash.flex.block_mask("causal", 64, block_size=(16, 24))
    with pytest.raises(ValueError, match="block_kv: the native kernel needs a multiple of 64"):
        tilesplash.attention(q, k, v, block_kv=96)


class _Recording(NativeBackend):
    """A new backend is one class and one line in BACKENDS."""

    name = "recording"
    calls = 0

    def is_default_for(self, q) -> bool:
        return False

    def attention(self, *args, **kwargs):
        type(self).calls += 1
        return super().attention(*args, **kwargs)


def test_a_registered_backend_serves_every_front_door(monkeypatch):
    backends = dict(_backends.BACKENDS, recording=_Recording())
    monkeypatch.setattr(_backends, "BACKENDS", backends)
    monkeypatch.setattr(_backends, "NAMES", ("auto",) + tuple(backends))
    q, k, v = _qkv()
    got = tilesplash.attention(q, k, v, mask="causal", backend="recording")
    assert _Recording.calls == 1
    assert np.array_equal(got, tilesplash.attention(q, k, v, mask="causal"))


def _reference_merge(outputs, lses):
    """float64 NumPy merge of bhnd parts, the rule written out."""
    lses = [np.asarray(x, np.float64) for x in lses]
    total = np.logaddexp.reduce(np.stack(lses), axis=0)
    out = np.zeros(outputs[0].shape, np.float64)
    for x, lse in zip(outputs, lses):
        w = np.where(np.isfinite(lse), np.exp(lse - np.where(np.isfinite(total), total, 0)), 0)
        part = np.where(w[..., None] > 0, np.asarray(x, np.float64) * w[..., None], 0)
        out += part
    return out, total


@pytest.mark.parametrize("layout", ["bhnd", "bnhd", "hnd"])
@pytest.mark.parametrize("parts", [1, 2, 3])
def test_one_torch_merge_against_float64(layout, parts):
    from tilesplash._layouts import from_bhnd, lse_to_layout
    from tilesplash._lse_merge import merge_lse

    rng = np.random.default_rng(parts)
    outs = [rng.standard_normal((1, 3, 10, 8)) for _ in range(parts)]
    lses = [rng.standard_normal((1, 3, 10)) * 3 for _ in range(parts)]
    for lse in lses:
        lse[0, 0, 2] = -np.inf  # a part that adds nothing to that row ...
    outs[0][0, 0, 2] = np.nan  # ... not even the NaN it holds
    for lse in lses:
        lse[0, 1, 4] = -np.inf  # a row no part keeps: 0 and -inf
    want_out, want_lse = _reference_merge(outs, lses)
    torch_outs = [from_bhnd(torch.from_numpy(x), layout) for x in outs]
    torch_lses = [lse_to_layout(torch.from_numpy(x), layout) for x in lses]
    for accumulate, tol in ((torch.float64, 1e-12), (torch.float32, 1e-5)):
        out, lse = merge_lse([x.to(accumulate) for x in torch_outs],
                             [x.to(accumulate) for x in torch_lses], layout, accumulate)
        np.testing.assert_allclose(out.numpy(), from_bhnd(torch.from_numpy(want_out), layout),
                                   rtol=tol, atol=tol)
        np.testing.assert_allclose(lse.numpy(), lse_to_layout(want_lse, layout), rtol=tol)
        assert not torch.isnan(out).any()


def test_cpu_and_flex_backends_merge_alike():
    rng = np.random.default_rng(3)
    a, b = (torch.from_numpy(rng.standard_normal((1, 6, 2, 8)).astype(np.float32))
            for _ in range(2))
    la, lb = (torch.from_numpy(rng.standard_normal((1, 2, 6)).astype(np.float32))
              for _ in range(2))
    native = _backends.BACKENDS["cpu"].merge(a, la, b, lb, "bnhd")
    flex = _backends.BACKENDS["flex"].merge(a, la, b, lb, "bnhd")
    for x, y in zip(native, flex):
        assert x.dtype == y.dtype == torch.float32
        torch.testing.assert_close(x, y, rtol=1e-6, atol=1e-6)


def test_svg2_options_come_from_the_core(monkeypatch):
    """The device k-means runs what VideoAttention.cluster_options says: change the
    options the core hands over and the flex clusters follow (nothing chosen in _flex)."""
    import tilesplash._torch_video.clusters as clusters

    g = tilesplash.VideoGeometry(2, 4, 6)
    va = tilesplash.VideoAttention(g, method="svg2", density=0.3, backend="flex")
    options = va.cluster_options
    assert options["density"] == 0.3 and options["min_kc_ratio"] == 0.1
    assert options["query"]["clusters"] == options["key"]["clusters"] == g.video_tokens
    assert options["query"]["seed"] != options["key"]["seed"]
    assert tilesplash.VideoAttention(g, method="svg").cluster_options is None
    changed = dict(options, query=dict(options["query"], clusters=5, seed=11,
                                       first_iterations=3),
                   key=dict(options["key"], clusters=7, seed=13, first_iterations=4))
    monkeypatch.setattr(type(va), "cluster_options", property(lambda self: changed))
    seen = []
    real = clusters.kmeans

    def spy(points, count, seed, iterations, tolerance, warm):
        seen.append((count, seed, iterations))
        return real(points, count, seed, iterations, tolerance, warm)

    monkeypatch.setattr(clusters, "kmeans", spy)
    x = torch.randn(1, 2, g.tokens, 16, generator=torch.Generator().manual_seed(0))
    va(x, x, x, layout="bhnd", layer=1, step=5)
    assert seen == [(5, 11, 3), (7, 13, 4)]
