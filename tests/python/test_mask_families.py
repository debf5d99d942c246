"""Radial Attention and Sliding Tile Attention as tilesplash.Mask (SPECs,
constructors, every pair against the predicates of docs/masks.md written here
in numpy), tilesplash.attention under them, and tilesplash.VideoAttention for
every registered method (tilesplash.methods()): each head's
output against the float64 reference under the mask it reports, the router's
choice against its reported MSEs, and errors that name the argument."""

from __future__ import annotations

import numpy as np
import pytest

import tilesplash
from tilesplash import Mask, VideoAttention, VideoGeometry
from conftest import check_against_reference, from_layout, mask_matrix, random_qkv, to_layout

METHODS = list(tilesplash.methods())  # the registry: a new method is tested once registered

# Ragged canvases, text before / after / none.
GEOMETRIES = [
    VideoGeometry(7, 3, 5),
    VideoGeometry(5, 4, 3, text=6, text_at="before"),
    VideoGeometry(9, 2, 5, text=4, text_at="after"),
]


# ---- the predicates, from docs/masks.md -------------------------------------

def video_coordinates(geometry):
    """Per token: (is_video, frame, in-frame index, y, x) in the original order."""
    n, p = geometry.tokens, geometry.tokens_per_frame
    text_first = geometry.text_at == "before"
    index = np.arange(n) - (geometry.text_tokens if text_first else 0)
    video = (index >= 0) & (index < geometry.video_tokens)
    index = np.where(video, index, 0)
    frame, position = index // p, index % p
    return video, frame, position, position // geometry.width, position % geometry.width


def radial_keep(geometry, decay, block=128, sink=False):
    video, frame, position, _, _ = video_coordinates(geometry)
    p = geometry.tokens_per_frame
    n = geometry.tokens
    keep = np.zeros((n, n), dtype=bool)
    for q in range(n):
        for k in range(n):
            if not (video[q] and video[k]):
                keep[q, k] = True
                continue
            d = abs(int(frame[q]) - int(frame[k]))
            if (sink and frame[k] == 0) or d <= 1:
                keep[q, k] = True
                continue
            level = 2.0 ** p.bit_length() / 2.0 ** d.bit_length()
            window = max(level * decay, block)
            passes = level >= block or d % int(block // level) == 0
            keep[q, k] = passes and abs(int(position[q]) - int(position[k])) <= window
    return keep


def sta_keep(geometry, window, tile):
    video, frame, _, y, x = video_coordinates(geometry)
    n = geometry.tokens
    sizes = (geometry.frames, geometry.height, geometry.width)
    coordinates = [frame // tile[0], y // tile[1], x // tile[2]]
    keep = np.ones((n, n), dtype=bool)
    for c, size, t, kw in zip(coordinates, sizes, tile, window):
        tiles = -(-size // t)
        half = kw // 2
        if kw >= tiles:
            continue
        centre = np.clip(c, half, tiles - 1 - half)
        keep &= np.abs(centre[:, None] - c[None, :]) <= half
    text = ~video
    keep[text, :] = True
    keep[:, text] = True
    return keep


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("decay,block,sink", [(0.2, 4, False), (1.0, 3, True), (0.0, 1, False),
                                              (2.5, 16, True)])
def test_radial_mask_is_its_predicate(geometry, decay, block, sink):
    mask = Mask.radial(geometry, decay, block=block, sink=sink)
    n = geometry.tokens
    assert np.array_equal(mask_matrix(mask, n, n), radial_keep(geometry, decay, block, sink))
    assert Mask.parse(str(mask)) == mask
    plan = tilesplash.plan(mask, n, block_q=8, block_kv=64).stats()
    assert plan["kept_pairs"] == radial_keep(geometry, decay, block, sink).sum()
    assert 0 < plan["block_vote_density"] <= 1


@pytest.mark.parametrize("geometry", GEOMETRIES, ids=str)
@pytest.mark.parametrize("window,tile", [((1, 1, 1), (2, 2, 2)), ((3, 1, 3), (2, 3, 2)),
                                         ((1, 5, 1), (3, 1, 1)), ((2, 2, 2), (1, 1, 1))])
def test_sta_mask_is_its_predicate_and_plans_tile_major(geometry, window, tile):
    mask = Mask.sta(geometry, window, tile=tile)
    n = geometry.tokens
    keep = sta_keep(geometry, window, tile)
    assert np.array_equal(mask_matrix(mask, n, n), keep)
    assert Mask.parse(str(mask)) == mask
    stats = tilesplash.plan(mask, n, block_q=8, block_kv=64).stats()
    assert stats["plan_order"] == "tile-major" and stats["plan_mask"].startswith("sta_tile_major:")
    assert stats["kept_pairs"] == stats["mask_kept_pairs"] == keep.sum()


def test_sta_plan_on_whole_tiles_has_no_partial_tile():
    g = VideoGeometry(6, 8, 8, text=12, text_at="after")
    stats = tilesplash.plan(Mask.sta(g, (1, 1, 1), tile=(3, 4, 4)), g.tokens, block_q=48,
                            block_kv=64).stats()
    assert stats["partial"] > 0  # key blocks of 64 straddle tiles of 48
    whole = tilesplash.plan(Mask.sta(g, (1, 1, 1), tile=(2, 4, 8)), g.tokens, block_q=64,
                            block_kv=64).stats()
    assert whole["partial"] == 0 and whole["full"] > 0


def test_spec_forms_and_errors():
    g = GEOMETRIES[1]
    assert Mask.parse(f"radial:{g},decay=0.2") == Mask.radial(g, 0.2)
    assert Mask.parse(f"radial:{g},decay=0.2,block=4,sink") == Mask.radial(g, 0.2, block=4,
                                                                          sink=True)
    assert Mask.radial(g, density=0.7) == Mask.parse(f"radial:{g},density=0.7")
    assert Mask.sta(g, (1, 3, 1), tile=(2, 2, 2)) == Mask.parse(f"sta:{g},tile=2x2x2,window=1x3x1")
    assert str(Mask.sta(g)).endswith("tile=6x8x8,window=3x3x3")
    with pytest.raises(ValueError, match="decay"):
        Mask.radial(g)
    with pytest.raises(ValueError, match="decay"):
        Mask.radial(g, 0.2, density=0.3)
    with pytest.raises(ValueError, match="density"):
        Mask.radial(g, density=1.5)
    with pytest.raises(ValueError, match="decay"):
        Mask.radial(g, -1.0)
    with pytest.raises(TypeError, match="decay"):
        Mask.radial(g, "0.2")
    with pytest.raises(ValueError, match="block"):
        Mask.radial(g, 0.2, block=0)
    with pytest.raises(TypeError, match="geometry"):
        Mask.radial("frames=2", 0.2)
    with pytest.raises(TypeError, match="window"):
        Mask.sta(g, (1, 1))
    with pytest.raises(ValueError, match="tile"):
        Mask.sta(g, (1, 1, 1), tile=(0, 1, 1))
    with pytest.raises(ValueError, match="window"):
        Mask.parse(f"sta:{g},window=1x1")


@pytest.mark.parametrize("spec_of", [
    lambda g: f"radial:{g},decay=0.5,block=4,sink",
    lambda g: f"sta:{g},tile=2x2x2,window=1x3x1",
    lambda g: f"sta:{g},tile=2x2x2,window=1x1x1|radial:{g},decay=0.1,block=2",
], ids=["radial", "sta", "sta|radial"])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_attention_under_a_spec_equals_the_reference(spec_of, dtype):
    g = GEOMETRIES[2]
    n = g.tokens
    spec = spec_of(g)
    q, k, v = random_qkv(np.random.default_rng(3), 2, 2, n, n, 16, 8, dtype)
    out, lse = tilesplash.attention(q, k, v, mask=spec, layout="bhnd", block_q=16, block_kv=64,
                                    return_lse=True)
    check_against_reference(out, lse, q, k, v, mask_matrix(Mask.parse(spec), n, n), dtype)


# ---- VideoAttention(method=...) ---------------------------------------------

def head_mask(layer, head):
    data_driven = not tilesplash.methods()[layer.method]["candidates"]
    return layer.head_mask(head["head"]) if data_driven else layer.mask(head["choice"])


def test_methods_lists_the_registry():
    methods = tilesplash.methods()
    from tilesplash._video import METHODS as video_methods  # the constant kept for callers

    assert tuple(methods) == video_methods
    geometry = VideoGeometry(7, 9, 8)
    for name, info in methods.items():
        assert set(info) == {"summary", "row_order", "spec", "candidates", "mask_names",
                             "takes_band", "data_driven", "choice"}
        assert info["summary"] and info["row_order"]
        layer = VideoAttention(geometry, method=name, density=0.3)
        names = {candidate for candidate, _ in layer.candidates}
        if info["candidates"]:
            assert names, name
            if info["mask_names"]:
                assert names == set(info["mask_names"]), name
        else:
            assert not names and info["mask_names"], name
        for choice in info["mask_names"]:  # force accepts every listed name
            VideoAttention(geometry, method=name, density=0.3, force=choice)
        if info["spec"]:  # a SPEC term of the method's name exists
            with pytest.raises(ValueError) as error:
                Mask.parse(name)
            assert "unknown mask" not in str(error.value)
    with pytest.raises(ValueError) as error:
        VideoAttention(geometry, method="no-such-method")
    for name in methods:
        assert repr(name) in str(error.value)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("geometry", [VideoGeometry(6, 8, 8, text=12, text_at="after"),
                                      VideoGeometry(8, 4, 6, text=5, text_at="before")], ids=str)
def test_every_method_equals_the_reference_of_the_masks_it_reports(method, geometry):
    n = geometry.tokens
    q, k, v = random_qkv(np.random.default_rng(len(method)), 1, 3, n, n, 16, 16)
    layer = VideoAttention(geometry, method=method, density=0.3, samples=16, block_q=32,
                           block_kv=64)
    assert layer.method == method
    names = [name for name, _ in layer.candidates]
    out, lse, report = layer(*(to_layout(x, "bnhd") for x in (q, k, v)), return_lse=True)
    assert report["method"] == method and len(report["heads"]) == 3
    out = from_layout(out, "bnhd")
    info = tilesplash.methods()[method]
    for head in report["heads"]:
        if not info["candidates"]:  # masks from each head's own data (svg2)
            assert head["choice"] in info["mask_names"] and not head["routed"]
            assert head["mse"] == {}
            assert head["cluster_seconds"] > 0
        else:
            assert head["choice"] in names
            assert head["routed"] == (len(names) > 1)
            if head["routed"]:
                assert list(head["mse"]) == names
                assert head["choice"] == min(names, key=lambda name: head["mse"][name])
        keep = mask_matrix(head_mask(layer, head), n, n)
        assert head["density"] == pytest.approx(keep.mean())
        assert keep.mean() - 1e-9 <= head["tiles_visited"] <= 1 + 1e-9
        h = head["head"]
        check_against_reference(out[:, h:h + 1], lse[:, h:h + 1], q[:, h:h + 1], k[:, h:h + 1],
                                v[:, h:h + 1], keep, "f32")


def test_method_candidates_and_budget():
    g = VideoGeometry(8, 8, 12)
    assert [name for name, _ in VideoAttention(g).candidates] == ["spatial", "temporal"]
    assert [name for name, _ in VideoAttention(g, method="radial").candidates] == ["radial"]
    sta = [name for name, _ in VideoAttention(g, method="sta").candidates]
    assert sta and all(name.startswith("sta:") for name in sta)
    mix = VideoAttention(g, method="mix", density=0.2, density_budget=0.25)
    names = [name for name, _ in mix.candidates]
    assert names[:3] == ["spatial", "temporal", "radial"] and names[3:] == sta
    assert VideoAttention(g, method="svg2").candidates == []
    # Under a budget the router picks among the candidates within it.
    q, k, v = random_qkv(np.random.default_rng(9), 1, 4, g.tokens, g.tokens, 16, 16)
    _, report = mix(q, k, v, layout="bhnd")
    within = {name for name, density in mix.candidates if density <= 0.25}
    for head in report["heads"]:
        assert head["choice"] in within
        assert head["mse"][head["choice"]] == min(head["mse"][name] for name in within)


def test_force_a_candidate_and_svg2_state():
    g = VideoGeometry(6, 4, 6, text=3, text_at="after")
    n = g.tokens
    q, k, v = random_qkv(np.random.default_rng(4), 1, 2, n, n, 16, 16)
    layer = VideoAttention(g, method="mix", density=0.3, force="radial")
    out, report = layer(q, k, v, layout="bhnd")
    assert {h["choice"] for h in report["heads"]} == {"radial"}
    check_against_reference(out, None, q, k, v, mask_matrix(layer.mask("radial"), n, n), "f32")
    svg2 = VideoAttention(g, method="svg2", density=0.4)
    with pytest.raises(ValueError, match="no call"):
        svg2.head_mask(0)
    first, _ = svg2(q, k, v, layout="bhnd")
    again, _ = svg2(q, k, v, layout="bhnd")  # warm-started from the first call's clusters
    svg2.reset_clusters()
    fresh, _ = svg2(q, k, v, layout="bhnd")
    assert np.array_equal(first, fresh)
    assert np.isfinite(again).all()
    with pytest.raises(ValueError, match="head"):
        svg2.head_mask(5)


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        ({"method": "radial2"}, ValueError, "method"),
        ({"method": 3}, TypeError, "method"),
        ({"method": "radial", "band": 4}, ValueError, "band"),
        ({"method": "sta", "density": 0.0}, ValueError, "density"),
        ({"method": "mix", "force": "nope"}, ValueError, "radial"),  # names the candidates
        ({"method": "svg", "force": "radial"}, ValueError, "force"),
        ({"method": "svg2", "force": "spatial"}, ValueError, "force"),
        ({"method": "mix", "density_budget": 0.0}, ValueError, "density_budget"),
        ({"method": "mix", "density_budget": "0.3"}, TypeError, "density_budget"),
    ],
)
def test_bad_method_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        VideoAttention(VideoGeometry(6, 4, 6), **kwargs)
