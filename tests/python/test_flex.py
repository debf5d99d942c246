"""tilesplash.flex: BlockMasks from plans against a brute-force classification of
every mask family, FlexAttention with them against the native kernel (every
family x layout x dtype x ragged length, with the LSE; eager, and compiled
for one shape), backend selection and device errors."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tilesplash  # noqa: E402
import tilesplash.flex  # noqa: E402
from tilesplash import Mask  # noqa: E402

from conftest import LAYOUTS, mask_matrix, numpy_dtype  # noqa: E402

G_AFTER = tilesplash.VideoGeometry(3, 4, 5, text=7, text_at="after")
G_BEFORE = tilesplash.VideoGeometry(3, 4, 5, text=6, text_at="before")
G0 = tilesplash.VideoGeometry(4, 4, 4)


def _svg2_mask():
    """A cluster mask of Sparse VideoGen 2 (the native run's head_mask)."""
    rng = np.random.default_rng(2)
    q, k, v = (rng.standard_normal((1, G0.tokens, 1, 16)).astype(np.float32) for _ in range(3))
    layer = tilesplash.VideoAttention(G0, method="svg2", density=0.3)
    layer(q, k, v)
    return layer.head_mask(0)


def families():
    """(name, mask, q_len, kv_len, window): every family, ragged lengths, text
    before and after, the sink, windows of a global mask."""
    return [
        ("causal", Mask.causal(), 90, 70, None),
        ("local", Mask.parse("local:left=9,right=3,offset=5"), 77, 130, None),
        ("chunked", Mask.chunked(13), 100, 100, None),
        ("random", Mask.random(0.4, seed=3), 61, 83, None),
        ("spatial_sink_text_after", Mask.spatial(G_AFTER, band=9, sink=True, text_full=True),
         G_AFTER.tokens, G_AFTER.tokens, None),
        ("temporal_sink_text_before", Mask.temporal(G_BEFORE, band=2, sink=True, text_full=True),
         G_BEFORE.tokens, G_BEFORE.tokens, None),
        ("radial_sink", Mask.radial(G0, decay=0.3, block=8, sink=True), G0.tokens, G0.tokens,
         None),
        ("sta", Mask.sta(G0, window=(1, 3, 3), tile=(2, 2, 2)), G0.tokens, G0.tokens, None),
        ("svg2_clusters", _svg2_mask(), G0.tokens, G0.tokens, None),
        ("or_and_mix", (Mask.causal() | Mask.local(4, 4)) & Mask.random(0.7, seed=1), 50, 50,
         None),
        ("causal_window", Mask.causal(), 30, 41, (37, 20, 90, 90)),
    ]


FAMILIES = families()
IDS = [f[0] for f in FAMILIES]


def keep_of(mask, q_len, kv_len, window):
    if window is None:
        return mask_matrix(mask, q_len, kv_len)
    q0, k0, qt, kt = window
    return mask_matrix(mask, qt, kt)[q0:q0 + q_len, k0:k0 + kv_len]


def window_kwargs(window):
    if window is None:
        return {}
    q0, k0, qt, kt = window
    return dict(q_offset=q0, kv_offset=k0, q_total=qt, kv_total=kt)


def evaluate_mask_mod(bm, heads, q_len, kv_len):
    """mask_mod on every pair: bool [heads, q_len, kv_len]."""
    b = torch.zeros((), dtype=torch.int64)
    q = torch.arange(q_len)[:, None]
    k = torch.arange(kv_len)[None, :]
    return torch.stack([bm.mask_mod(b, torch.tensor(h), q, k).expand(q_len, kv_len)
                        for h in range(heads)]).numpy()


def check_block_lists(bm, head, keep, bq, bk):
    """The BlockMask's lists for `head` against a brute-force tile classification."""
    h = min(head, bm.kv_num_blocks.shape[1] - 1)
    q_blocks, kv_blocks = -(-keep.shape[0] // bq), -(-keep.shape[1] // bk)
    assert tuple(bm.kv_indices.shape[2:]) == (q_blocks, kv_blocks)
    for i in range(q_blocks):
        partial = bm.kv_indices[0, h, i, :int(bm.kv_num_blocks[0, h, i])].tolist()
        full = bm.full_kv_indices[0, h, i, :int(bm.full_kv_num_blocks[0, h, i])].tolist()
        assert partial == sorted(partial) and full == sorted(full)
        for j in range(kv_blocks):
            tile = keep[i * bq:(i + 1) * bq, j * bk:(j + 1) * bk]
            expected = "full" if tile.all() else "partial" if tile.any() else "empty"
            found = "full" if j in full else "partial" if j in partial else "empty"
            assert found == expected, (i, j)
            assert not (j in full and j in partial)


@pytest.mark.parametrize("blocks", [(16, 16), (32, 64)])
@pytest.mark.parametrize("case", range(len(FAMILIES)), ids=IDS)
def test_block_mask_equals_brute_force(case, blocks):
    _, mask, q_len, kv_len, window = FAMILIES[case]
    keep = keep_of(mask, q_len, kv_len, window)
    bm = tilesplash.flex.block_mask(mask, q_len, kv_len, block_size=blocks, **window_kwargs(window))
    assert bm.shape == (1, 1, q_len, kv_len) and bm.BLOCK_SIZE == blocks
    check_block_lists(bm, 0, keep, *blocks)
    # exact on every pair, not only inside partial tiles (eager flex calls it everywhere)
    assert np.array_equal(evaluate_mask_mod(bm, 2, q_len, kv_len), np.stack([keep, keep]))
    assert tilesplash.flex.block_mask(mask, q_len, kv_len, block_size=blocks,
                                      **window_kwargs(window)) is bm  # cached


@pytest.mark.parametrize("mask_mod, table", [("table", "tiles"), ("rows", "starts")])
def test_per_head_block_mask_shares_plans_of_equal_masks(mask_mod, table):
    a = Mask.spatial(G0, band=5, sink=True)
    b = Mask.temporal(G0, band=5, sink=True)
    n = G0.tokens
    which = [0, 1, 0, 0, 1, 0, 0, 0]
    bm = tilesplash.flex.block_mask([(a, b)[i] for i in which], n, block_size=16,
                                    mask_mod=mask_mod)
    assert bm.kv_num_blocks.shape == (1, 8, n // 16)
    keeps = [mask_matrix(m, n, n) for m in (a, b)]
    for head, i in enumerate(which):
        check_block_lists(bm, head, keeps[i], 16, 16)
    assert np.array_equal(evaluate_mask_mod(bm, 8, n, n), np.stack([keeps[i] for i in which]))
    # the mask_mod reads one table per distinct plan (tile table or row intervals; stacked
    # at least 4 deep so that routing choices do not recompile), not one per head
    closure = dict(zip(bm.mask_mod.__code__.co_freevars,
                       (c.cell_contents for c in bm.mask_mod.__closure__)))
    assert closure[table].shape[0] == 4 and closure["head_plan"].tolist() == which


def _torch_dtype(name):
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[name]


# Per unit of max|V| (outputs) / absolute (LSE): both sides accumulate in float32;
# bf16 and f16 outputs are rounded to their dtype on both sides, and the native
# kernel rounds P to bf16 for P.V.
FLEX_TOLERANCE = {"f32": 2e-6, "f16": 2e-3, "bf16": 1.6e-2}


DTYPES = ["f32", "bf16", "f16"]
# Every family in every layout and every dtype (a Latin square of layout x dtype per
# family, rotated between families), and the full layout x dtype product for a ragged
# plain mask and a video mask with text and sink: each eager call costs about half a
# second of FlexAttention's reference path, and the suite runs three times in CI.
FULL_PRODUCT = ("causal", "temporal_sink_text_before")
FLEX_CASES = [(c, layout, dtype) for c, (name, *_) in enumerate(FAMILIES)
              for i, layout in enumerate(LAYOUTS) for j, dtype in enumerate(DTYPES)
              if name in FULL_PRODUCT or (i + c) % 3 == j]


@pytest.mark.parametrize("case,layout,dtype", FLEX_CASES,
                         ids=[f"{IDS[c]}-{l}-{d}" for c, l, d in FLEX_CASES])
def test_flex_equals_the_native_kernel(case, layout, dtype):
    _, mask, q_len, kv_len, window = FAMILIES[case]
    gen = torch.Generator().manual_seed(case)
    batch = 1 if layout == "hnd" else 2
    shape = {"bhnd": lambda n, d: (batch, 3, n, d), "bnhd": lambda n, d: (batch, n, 3, d),
             "hnd": lambda n, d: (3, n, d)}[layout]
    t = _torch_dtype(dtype)
    q = torch.randn(shape(q_len, 32), generator=gen).to(t)
    k = torch.randn(shape(kv_len, 32), generator=gen).to(t)
    v = torch.randn(shape(kv_len, 16), generator=gen).to(t)
    kwargs = dict(mask=mask, layout=layout, return_lse=True, **window_kwargs(window))
    # The native reference on NumPy copies (a cluster mask has no SPEC for the torch op).
    out, lse = (torch.from_numpy(np.asarray(x).astype(np.float32)) for x in tilesplash.attention(
        *(x.float().numpy().astype(numpy_dtype(dtype)) for x in (q, k, v)), **kwargs))
    f_out, f_lse = tilesplash.attention(q, k, v, backend="flex", block_q=16, block_kv=32, **kwargs)
    assert f_out.dtype == t and f_out.shape == out.shape and f_lse.shape == lse.shape
    assert f_out.is_contiguous()
    scale = float(v.float().abs().max())
    np.testing.assert_allclose(f_out.float().numpy(), out.float().numpy(), rtol=0,
                               atol=FLEX_TOLERANCE[dtype] * scale)
    finite = torch.isfinite(lse)
    assert torch.equal(torch.isfinite(f_lse), finite)
    assert torch.all(f_out.float()[~finite] == 0) if layout != "bnhd" else True
    np.testing.assert_allclose(f_lse[finite].numpy(), lse[finite].numpy(), rtol=2e-6, atol=2e-5)


def test_compiled_flex_on_the_cpu_equals_the_native_kernel():
    # One compiled shape (the table shapes are padded to powers of two, so two
    # masks of the same lengths share the compiled kernel).
    n = G_AFTER.tokens
    gen = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(1, 2, n, 32, generator=gen) for _ in range(3))
    for mask in (Mask.spatial(G_AFTER, band=9, sink=True, text_full=True),
                 Mask.spatial(G_AFTER, band=5, sink=True, text_full=True)):
        bm = tilesplash.flex.block_mask(mask, n, block_size=32)
        out, lse = tilesplash.flex.run_flex(q, k, v, bm, None, compile=True, return_lse=False)
        assert lse is None
        expected = tilesplash.attention(q, k, v, mask=mask)
        np.testing.assert_allclose(out.numpy(), expected.numpy(), rtol=0, atol=2e-6 * 5)


def test_backend_argument_and_device_errors():
    q = torch.randn(1, 2, 10, 16)
    with pytest.raises(ValueError, match="backend: expected 'auto', 'cpu' or 'flex'"):
        tilesplash.attention(q, q, q, backend="gpu")
    with pytest.raises(TypeError, match="backend: 'flex' runs torch tensors"):
        tilesplash.attention(q.numpy(), q.numpy(), q.numpy(), backend="flex")
    meta = torch.empty(1, 2, 10, 16, device="meta")
    # q on another device, k on the CPU: named, whichever backend resolves
    with pytest.raises(ValueError, match="k: expected a tensor on q's device 'meta'"):
        tilesplash.attention(meta, q, q)
    with pytest.raises(ValueError, match="v: expected a tensor on q's device 'meta'"):
        tilesplash.attention(meta, meta, q, backend="flex")
    with pytest.raises(ValueError, match="k: expected a CPU tensor, got a tensor on device 'meta'"):
        tilesplash.attention(q, meta, q)
    with pytest.raises(ValueError, match="q: backend 'cpu' runs CPU tensors"):
        tilesplash.attention(meta, meta, meta, backend="cpu")
    with pytest.raises(ValueError, match="q: FlexAttention runs tensors on cuda, cpu"):
        tilesplash.attention(meta, meta, meta)
    with pytest.raises(ValueError, match="k: expected q's head dim 16, got 8"):
        tilesplash.attention(q, q[..., :8], q, backend="flex")
    bad = q.clone()
    bad[0, 1, 3, 2] = float("nan")
    with pytest.raises(ValueError, match="v: NaN or Inf"):
        tilesplash.attention(q, q, bad, backend="flex")
    with pytest.raises(ValueError, match="block_size"):
        tilesplash.flex.block_mask("causal", 10, block_size=(16,))


def test_empty_lengths_give_zeros_and_minus_inf():
    q = torch.randn(1, 2, 0, 16)
    k = torch.randn(1, 2, 5, 16)
    out, lse = tilesplash.attention(q, k, k, backend="flex", return_lse=True)
    assert out.shape == (1, 2, 0, 16) and lse.shape == (1, 2, 0)
    out, lse = tilesplash.attention(k, q, q, backend="flex", return_lse=True)
    assert torch.all(out == 0) and torch.all(lse == float("-inf"))


def test_kernel_options_cache_is_keyed_by_device_name(tmp_path, monkeypatch):
    from tilesplash._flex import tuning

    monkeypatch.setenv("TILESPLASH_FLEX_TUNING", str(tmp_path / "flex.json"))
    mask = Mask.causal()
    key = tuning.tune_key("cpu", mask, 1000, 1000, 64, torch.bfloat16, (128, 128))
    fields = __import__("json").loads(key)
    assert fields["backend"] == "flex" and fields["device"] == "cpu"
    assert fields["mask_family"] == "causal" and fields["density"] == 0.5
    tuning.store(key, {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 2, "num_warps": 4}, 0.1)
    tuning._loaded.clear()
    assert tuning._entries(tuning.cache_path())[key]["kernel_options"]["BLOCK_M"] == 64
    # the CPU template takes no kernel options: never looked up there
    assert tilesplash.flex.kernel_options_for("cpu", mask, 1000, 1000, 64, torch.bfloat16,
                                              (128, 128)) is None
    # Every candidate's tile divides 128 ({}: PyTorch's default, which picks its own).
    assert all(128 % c.get("BLOCK_M", 128) == 0 and 128 % c.get("BLOCK_N", 128) == 0
               for c in tuning.CANDIDATES)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_merge_on_the_device_follows_the_native_merge(layout):
    # merge_attention's path for tensors off the CPU (torch ops, float64), run here on
    # CPU tensors against the native merge; rows whose parts are all -inf included.
    from tilesplash._merge import _merge_on_device

    gen = torch.Generator().manual_seed(3)
    shape = {"bhnd": (2, 3, 20, 8), "bnhd": (2, 20, 3, 8), "hnd": (3, 20, 8)}[layout]
    lse_shape = shape[:-1] if layout != "bnhd" else (2, 3, 20)
    outs = [torch.randn(shape, generator=gen) for _ in range(3)]
    lses = [torch.randn(lse_shape, generator=gen) * 3 for _ in range(3)]
    lses[1][..., 4] = float("-inf")
    for lse in lses:
        lse[..., 7] = float("-inf")
    out, lse = tilesplash.merge_attention(outs, lses, layout=layout)
    d_out, d_lse = _merge_on_device(outs, lses, layout, torch.float32, True)
    np.testing.assert_allclose(d_out.numpy(), out.numpy(), rtol=0, atol=1e-6)
    assert torch.equal(torch.isfinite(d_lse), torch.isfinite(lse))
    np.testing.assert_allclose(d_lse[torch.isfinite(lse)].numpy(),
                               lse[torch.isfinite(lse)].numpy(), rtol=1e-6)
    assert torch.all(d_out[..., 7, :] == 0) if layout != "bnhd" else torch.all(d_out[:, 7] == 0)
    bad = [x.clone() for x in lses]
    bad[2][0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"lses\[2\]: NaN or \+inf"):
        _merge_on_device(outs, bad, layout, torch.float32, True)
