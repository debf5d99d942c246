"""VideoAttention(..., key_lengths=): per batch entry, keys past its length are padding.

Every head of every entry must equal the float64 reference of its mask ANDed
with that entry's real keys (Mask.key_range(0, length)), for every method,
forced and routed, dense included, in both layouts, f32 and bf16, NumPy and
torch; a padded batch must equal the entries run one at a time; and no
padding must give the bits of a call without key_lengths.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilesplash import Mask, VideoAttention, VideoGeometry
from conftest import check_against_reference, from_layout, mask_matrix, random_qkv, to_layout

G = VideoGeometry(3, 4, 5, text=11, text_at="after")  # 60 video + 11 text = 71 tokens
VIDEO = G.video_tokens


def head_mask(layer, report, head):
    if head["choice"] == "svg2":
        return layer.head_mask(head["head"])
    return layer.mask(head["choice"])


@pytest.mark.parametrize("method,force", [("svg", "dense"), ("svg", "spatial"), ("svg", "temporal"),
                                          ("svg", None), ("radial", None), ("sta", None),
                                          ("mix", None), ("svg2", None)])
@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_each_entry_equals_the_reference_of_its_real_keys(method, force, layout):
    lengths = [VIDEO, VIDEO + 6, G.tokens - 1]
    n = G.tokens
    rng = np.random.default_rng(len(method) + (force is None))
    q, k, v = random_qkv(rng, len(lengths), 2, n, n, 16, 16)
    layer = VideoAttention(G, method=method, density=0.3, sink=method in ("svg", "radial"),
                           samples=12, force=force, block_q=16, block_kv=64)
    out, lse, report = layer(to_layout(q, layout), to_layout(k, layout), to_layout(v, layout),
                             layout=layout, return_lse=True, key_lengths=lengths)
    out = from_layout(out, layout)
    for head in report["heads"]:
        b, h = head["batch"], head["head"]
        if method == "svg2" and b != len(lengths) - 1:
            continue  # head_mask() holds the last entry's clusters only
        keep = mask_matrix(head_mask(layer, report, head) & Mask.key_range(0, lengths[b]), n, n)
        check_against_reference(out[b:b + 1, h:h + 1], lse[b:b + 1, h:h + 1], q[b:b + 1, h:h + 1],
                                k[b:b + 1, h:h + 1], v[b:b + 1, h:h + 1], keep, "f32")


def test_padded_keys_change_nothing_and_batches_equal_single_entries():
    n = G.tokens
    rng = np.random.default_rng(5)
    q, k, v = random_qkv(rng, 2, 3, n, n, 16, 16)
    lengths = [VIDEO + 3, VIDEO + 9]
    layer = VideoAttention(G, density=0.3, sink=True, samples=12, force="temporal")
    batched, _ = layer(q, k, v, layout="bhnd", key_lengths=lengths)
    for b, length in enumerate(lengths):
        alone, _ = layer(q[b:b + 1], k[b:b + 1], v[b:b + 1], layout="bhnd", key_lengths=[length])
        np.testing.assert_array_equal(alone[0], batched[b])
        # Garbage in the padded keys and values: the output does not move.
        k2, v2 = k[b:b + 1].copy(), v[b:b + 1].copy()
        k2[:, :, length:] = 1e3
        v2[:, :, length:] = -7e2
        changed, _ = layer(q[b:b + 1], k2, v2, layout="bhnd", key_lengths=[length])
        np.testing.assert_array_equal(changed[0], batched[b])


def test_no_padding_is_bit_identical_to_no_key_lengths():
    n = G.tokens
    q, k, v = random_qkv(np.random.default_rng(2), 2, 2, n, n, 16, 16)
    layer = VideoAttention(G, density=0.3, samples=12)
    plain, _ = layer(q, k, v, layout="bhnd")
    full, _ = layer(q, k, v, layout="bhnd", key_lengths=np.array([n, n]))
    np.testing.assert_array_equal(plain, full)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
def test_torch_and_low_precision(dtype):
    torch = pytest.importorskip("torch")
    n = G.tokens
    q, k, v = random_qkv(np.random.default_rng(3), 2, 2, n, n, 16, 16, dtype)
    lengths = torch.tensor([VIDEO + 1, n])
    layer = VideoAttention(G, force="dense")
    as_torch = [torch.from_numpy(x.astype(np.float32)).to(
        torch.bfloat16 if dtype == "bf16" else torch.float32) for x in (q, k, v)]
    out, lse, _ = layer(*as_torch, layout="bhnd", return_lse=True, key_lengths=lengths)
    out = out.float().numpy()
    for b in range(2):
        keep = mask_matrix(Mask.key_range(0, int(lengths[b])), n, n)
        check_against_reference(out[b:b + 1], lse.numpy()[b:b + 1], q[b:b + 1], k[b:b + 1],
                                v[b:b + 1], keep, dtype)


@pytest.mark.parametrize("lengths,error,match", [
    ([VIDEO], ValueError, "one per batch entry"),
    ([VIDEO - 1, VIDEO], ValueError, r"key_lengths\[0\]: expected an int in \[60, 71\]"),
    ([VIDEO, G.tokens + 1], ValueError, r"key_lengths\[1\]"),
    ([VIDEO, 1.5], TypeError, r"key_lengths\[1\]"),
    ("61", TypeError, "key_lengths"),
])
def test_bad_key_lengths_name_the_argument(lengths, error, match):
    n = G.tokens
    q, k, v = random_qkv(np.random.default_rng(1), 2, 1, n, n, 8, 8)
    with pytest.raises(error, match=match):
        VideoAttention(G)(q, k, v, layout="bhnd", key_lengths=lengths)


def test_text_before_cannot_be_padded():
    g = VideoGeometry(3, 4, 5, text=11, text_at="before")
    q, k, v = random_qkv(np.random.default_rng(1), 1, 1, g.tokens, g.tokens, 8, 8)
    with pytest.raises(ValueError, match="only text after the video"):
        VideoAttention(g)(q, k, v, layout="bhnd", key_lengths=[g.tokens - 2])
    out, _ = VideoAttention(g)(q, k, v, layout="bhnd", key_lengths=[g.tokens])  # nothing padded
    assert np.isfinite(out).all()


def test_key_range_mask():
    mask = Mask.key_range(2, 9)
    assert mask.keeps(100, 2) and mask.keeps(0, 8) and not mask.keeps(5, 9) and not mask.keeps(5, 1)
    assert str(mask) == "keys:begin=2,end=9"
    with pytest.raises(ValueError, match="end"):
        Mask.key_range(5, 4)
