"""Every mask family's str() and pickle round trips.

A Mask pickles as its SPEC, so for every family the user can build (each
constructor, OR / AND, parsed SPECs, and the masks VideoAttention hands out
for every method's candidates) str() must parse back to an equal mask and
pickle.loads(pickle.dumps(m)) must equal m. svg2's per-head cluster masks
(VideoAttention.head_mask) carry a token assignment no SPEC holds: pickling
one is refused at dumps with a TypeError that says why, never deferred to a
loads() in another process. copy / deepcopy give the mask itself (immutable).
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from tilesplash import Mask, VideoAttention, VideoGeometry

G = VideoGeometry(3, 2, 4, text=2, text_at="after")
G_STA = VideoGeometry(4, 8, 8, text=3, text_at="before")
METHODS = ["svg", "spatial", "temporal", "radial", "sta", "mix", "svg2"]


def constructed():
    return {
        "dense": Mask.dense(),
        "causal": Mask.causal(),
        "causal_offset": Mask.causal(-7),
        "causal_int64_ends": Mask.causal(-(2**63)) | Mask.causal(2**63 - 1),
        "local": Mask.local(3, 5, offset=2**62),
        "local_open": Mask.local(None, 4),
        "chunked": Mask.chunked(2**63 - 1),
        "random": Mask.random(0.1 + 0.2, seed=2**64 - 1),
        "spatial": Mask.spatial(G, 3, sink=True, text_full=True),
        "spatial_density": Mask.spatial(G, density=0.3),
        "temporal": Mask.temporal(G, 2, sink=True),
        "radial": Mask.radial(G, 0.95, block=3, sink=True),
        "radial_density": Mask.radial(G, density=0.9),
        "sta": Mask.sta(G_STA, window=(1, 3, 3), tile=(2, 4, 4)),
        "or_and": (Mask.causal() | Mask.local(1, 1)) & Mask.chunked(9),
        "parsed": Mask.parse("local:left=4,right=4|causal:offset=-3&chunked:size=8"),
    }


def video_attention_masks():
    out = {}
    for method in METHODS:
        layer = VideoAttention(G if method != "sta" else G_STA, method=method, density=0.5)
        for name in ["dense"] + [c for c, _ in layer.candidates]:
            out[f"{method}:{name}"] = layer.mask(name)
    return out


ROUND_TRIPS = {**constructed(), **video_attention_masks()}


def test_every_family_is_covered():
    families = {str(m).split(":")[0] for m in ROUND_TRIPS.values()}
    assert {"dense", "causal", "local", "chunked", "random", "spatial", "temporal", "radial",
            "sta"} <= families


@pytest.mark.parametrize("name", list(ROUND_TRIPS))
def test_str_parses_back_and_pickle_round_trips(name):
    mask = ROUND_TRIPS[name]
    assert Mask.parse(str(mask)) == mask
    assert hash(Mask.parse(str(mask))) == hash(mask)
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        loaded = pickle.loads(pickle.dumps(mask, protocol=protocol))
        assert loaded == mask and str(loaded) == str(mask)
    assert copy.copy(mask) is mask and copy.deepcopy(mask) is mask


def svg2_head_mask():
    layer = VideoAttention(G, method="svg2", density=0.5)
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((1, G.tokens, 2, 16)).astype(np.float32) for _ in range(3))
    layer(q, k, v)
    return layer.head_mask(1)


def test_cluster_masks_refuse_to_pickle_at_dumps():
    mask = svg2_head_mask()
    with pytest.raises(TypeError, match=r"mask: 'clusters:.*' cannot be pickled: its str\(\) is "
                                        r"not a SPEC"):
        pickle.dumps(mask)
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps({"inside": [mask | Mask.causal()]})
    # Still a value in this process: copies are the mask itself, and it combines.
    assert copy.deepcopy(mask) is mask and copy.copy(mask) is mask
    assert (mask | Mask.dense()).keeps(0, G.tokens - 1)
