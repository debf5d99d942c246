"""The registry's method flags, which code asks instead of a method's name."""

import tilesplash
from tilesplash._methods import cluster_choice, method_flag


def test_each_method_carries_its_flags():
    methods = tilesplash.methods()
    assert [name for name, info in methods.items() if info["takes_band"]] == ["svg"]
    assert [name for name, info in methods.items() if info["data_driven"]] == ["svg2", "pooled"]
    for name, info in methods.items():
        # A data-driven method has no candidate list and names its heads' choice.
        assert info["data_driven"] == (not info["candidates"]), name
        assert info["choice"] == (name if info["data_driven"] else None), name
    assert cluster_choice() == "svg2"  # the clustered one
    assert method_flag("svg", "takes_band") and not method_flag("radial", "takes_band")


def test_the_repr_shows_the_band_of_the_method_that_takes_one():
    g = tilesplash.VideoGeometry(2, 4, 4)
    assert "band=" in repr(tilesplash.VideoAttention(g, method="svg"))
    assert "method='radial'" in repr(tilesplash.VideoAttention(g, method="radial"))
