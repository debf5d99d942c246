"""The flex backend on a CUDA GPU (compiled FlexAttention, Triton): every torch entry
point on CUDA tensors against the native kernel on CPU copies. Marked `gpu`:
skipped, and reported as skipped, where no GPU is present (bench/gpu_check.sh
runs them on a GPU machine with `pytest -m gpu`)."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilesplash  # noqa: E402
from tilesplash import Mask, VideoAttention, VideoGeometry  # noqa: E402

pytestmark = pytest.mark.gpu

G = VideoGeometry(6, 12, 16, text=20, text_at="after")  # 1,172 tokens: ragged against 128
TOL = {torch.float32: 2e-5, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}


def _cuda(*xs):
    return [x.cuda() for x in xs]


# Each dtype and table shape is one Triton compile (tens of seconds): few cases.
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_attention_on_cuda_equals_the_native_kernel(dtype):
    gen = torch.Generator().manual_seed(0)
    n = G.tokens
    q, k, v = (torch.randn(1, n, 4, 64, generator=gen).to(dtype) for _ in range(3))
    masks = [Mask.spatial(G, density=0.25, sink=True, text_full=True), Mask.causal()]
    if dtype == torch.bfloat16:
        masks.append(Mask.temporal(G, density=0.25, sink=True, text_full=True))
    for mask in masks:
        out, lse = tilesplash.attention(q, k, v, mask=mask, layout="bnhd", return_lse=True)
        g_out, g_lse = tilesplash.attention(*_cuda(q, k, v), mask=mask, layout="bnhd",
                                            return_lse=True)
        assert g_out.device.type == "cuda" and g_out.dtype == dtype
        np.testing.assert_allclose(g_out.float().cpu().numpy(), out.float().numpy(), rtol=0,
                                   atol=TOL[dtype] * float(v.float().abs().max()))
        np.testing.assert_allclose(g_lse.cpu().numpy(), lse.numpy(), rtol=1e-5, atol=1e-3)


def test_merge_attention_on_cuda():
    gen = torch.Generator().manual_seed(2)
    outs = [torch.randn(1, 2, 50, 16, generator=gen) for _ in range(2)]
    lses = [torch.randn(1, 2, 50, generator=gen) for _ in range(2)]
    out, lse = tilesplash.merge_attention(outs, lses)
    g_out, g_lse = tilesplash.merge_attention(_cuda(*outs), _cuda(*lses))
    np.testing.assert_allclose(g_out.cpu().numpy(), out.numpy(), atol=1e-6)
    np.testing.assert_allclose(g_lse.cpu().numpy(), lse.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="lses.1.: expected a tensor on the outputs' device"):
        tilesplash.merge_attention(_cuda(*outs), [lses[0].cuda(), lses[1]])


def test_window_and_device_mix_errors_on_cuda():
    gen = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 2, 300, 64, generator=gen) for _ in range(3))
    kwargs = dict(mask="causal", q_offset=500, kv_offset=300, q_total=1000, kv_total=1000,
                  return_lse=True)
    out, lse = tilesplash.attention(q, k, v, **kwargs)
    g_out, g_lse = tilesplash.attention(*_cuda(q, k, v), **kwargs)
    np.testing.assert_allclose(g_out.cpu().numpy(), out.numpy(), atol=1e-4)
    with pytest.raises(ValueError, match="k: expected a tensor on q's device"):
        tilesplash.attention(q.cuda(), k, v.cuda())


def _planted(geometry, kinds, d=64, seed=0):
    rng = np.random.default_rng(seed)
    n, p = geometry.tokens, geometry.tokens_per_frame
    heads = []
    for kind in kinds:
        groups = geometry.frames if kind == "spatial" else p
        features = rng.standard_normal((groups, d))
        features /= np.linalg.norm(features, axis=1, keepdims=True)
        index = np.arange(n) // p if kind == "spatial" else np.arange(n) % p
        x = np.sqrt(12 * np.sqrt(d)) * (features[index] + 0.2 * rng.standard_normal((n, d)) /
                                        np.sqrt(d))
        heads.append(x)
    qk = torch.from_numpy(np.stack(heads)[None].astype(np.float32))
    return qk, qk.clone(), torch.from_numpy(rng.standard_normal(qk.shape).astype(np.float32))


def test_video_attention_on_cuda_makes_the_native_choices():
    g = VideoGeometry(8, 8, 16)
    kinds = ["spatial", "temporal", "temporal", "spatial"]
    q, k, v = _planted(g, kinds)
    native = VideoAttention(g, density=0.3, sink=True)
    gpu = VideoAttention(g, density=0.3, sink=True)  # auto: flex for CUDA tensors
    out, lse, report = native(q, k, v, layout="bhnd", return_lse=True, layer=2, step=4)
    g_out, g_lse, g_report = gpu(*_cuda(q, k, v), layout="bhnd", return_lse=True, layer=2, step=4)
    assert [h["choice"] for h in report["heads"]] == kinds
    assert [h["choice"] for h in g_report["heads"]] == kinds and g_report["backend"] == "flex"
    np.testing.assert_allclose(g_out.cpu().numpy(), out.numpy(), rtol=0, atol=1e-4)
    np.testing.assert_allclose(g_lse.cpu().numpy(), lse.numpy(), rtol=1e-5, atol=1e-3)


def test_svg2_on_cuda_equals_the_native_clusters():
    g = VideoGeometry(4, 8, 16)
    gen = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, g.tokens, 64, generator=gen) for _ in range(3))
    native = VideoAttention(g, method="svg2", density=0.25)
    gpu = VideoAttention(g, method="svg2", density=0.25)
    out, report = native(q, k, v, layout="bhnd")
    g_out, g_report = gpu(*_cuda(q, k, v), layout="bhnd")
    assert [h["density"] for h in g_report["heads"]] == pytest.approx(
        [h["density"] for h in report["heads"]])
    np.testing.assert_allclose(g_out.cpu().numpy(), out.numpy(), rtol=0, atol=1e-4)


def test_distributed_on_one_nccl_rank(tmp_path):
    import torch.distributed as dist

    if not dist.is_nccl_available():
        pytest.skip("NCCL is not available")
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("nccl", store=store, rank=0, world_size=1)
    try:
        gen = torch.Generator().manual_seed(4)
        q, k, v = (torch.randn(1, 256, 4, 64, generator=gen) for _ in range(3))
        expected = tilesplash.attention(q, k, v, mask="causal", layout="bnhd")
        for fn in (tilesplash.distributed.ulysses_attention, tilesplash.distributed.ring_attention):
            out = fn(*_cuda(q, k, v), mask="causal", layout="bnhd")
            np.testing.assert_allclose(out.cpu().numpy(), expected.numpy(), atol=1e-4)
    finally:
        dist.destroy_process_group()


def test_diffusers_on_a_cuda_transformer():
    pytest.importorskip("diffusers")
    import tilesplash.diffusers as tsd
    from diffusers_tiny import tiny_wan, wan_inputs

    model = tiny_wan().to("cuda", torch.bfloat16)
    hidden, text = (x.to("cuda", torch.bfloat16) for x in wan_inputs())

    def run():
        with torch.no_grad():
            return model(hidden_states=hidden, timestep=torch.full((1,), 500.0, device="cuda"),
                         encoder_hidden_states=text, return_dict=False)[0]

    native = run()
    handle = tsd.enable(model, force="dense")
    dense = run()
    handle.remove()
    handle = tsd.enable(model, density=0.3, dense_layers=1)
    sparse = run()
    report = handle.report()
    handle.remove()
    assert torch.equal(run(), native)
    scale = float(native.float().abs().max())
    assert float((dense.float() - native.float()).abs().max()) < 3e-2 * scale
    assert torch.isfinite(sparse).all() and report and report[-1]["backend"] == "flex"


def test_tune_kernel_options(tmp_path, monkeypatch):
    monkeypatch.setenv("TILESPLASH_FLEX_TUNING", str(tmp_path / "flex.json"))
    import tilesplash.flex as tf

    mask = Mask.spatial(G, density=0.25, sink=True, text_full=True)
    result = tf.tune(mask, G.tokens, heads=2, head_dim=64, candidates=tf.CANDIDATES[:2],
                     repeats=1)
    assert any("seconds" in r for r in result["results"])
    assert tf.kernel_options_for("cuda", mask, G.tokens, G.tokens, 64, torch.bfloat16,
                                 (128, 128)) == result["best"]
    assert os.path.exists(tmp_path / "flex.json")
