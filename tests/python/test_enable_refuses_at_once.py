"""tilesplash.diffusers.enable refuses, at once and with its own prefix, every setting a
layer's first VideoAttention would refuse minutes into a pipeline: a ladder without an
error target, an error target for svg2's clusters, tile granularity for svg2 on the flex
backend, and a forced mask that is not one of the ladder's candidates. Nothing is
installed on a refusal."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("diffusers")

import tilesplash.diffusers as tsd  # noqa: E402
from diffusers_tiny import run_wan, tiny_wan, wan_inputs  # noqa: E402

PREFIX = "tilesplash.diffusers.enable: "


@pytest.mark.parametrize("kwargs, words", [
    (dict(densities=[0.1, 0.2]), "densities: a density ladder applies with error= only"),
    (dict(method="svg2", error=0.1), "error: method 'svg2' runs each head's own clusters"),
    (dict(method="svg2", granularity="tile", backend="flex"),
     "granularity: 'tile' is not available for method 'svg2' on the flex backend"),
    (dict(error=0.1, force="spatial"), "force: expected None or one of 'dense', 'spatial@0.05'"),
    (dict(method="radial", error=0.1, densities=[0.2, 0.4], force="radial@0.1"),
     "force: expected None or one of 'dense', 'radial@0.2', 'radial@0.4', got 'radial@0.1'"),
], ids=["densities-without-error", "svg2-error", "svg2-tile-flex", "force-not-a-rung",
        "force-off-the-ladder"])
def test_enable_refuses_what_the_first_forward_would(kwargs, words):
    model = tiny_wan()
    with pytest.raises(ValueError, match="^" + re.escape(PREFIX + words)):
        tsd.enable(model, total_steps=4, **kwargs)
    assert tsd.handle_of(model) is None


def test_a_forced_rung_of_the_ladder_is_accepted_and_runs():
    model = tiny_wan()
    hidden, text = wan_inputs()
    handle = tsd.enable(model, error=0.3, densities=[0.1, 0.3], force="temporal@0.3",
                        dense_layers=0, dense_steps=0, total_steps=4)
    try:
        run_wan(model, hidden, text)
        heads = [h for r in handle.report() for h in r["heads"]]
    finally:
        handle.remove()
    assert heads and {h["choice"] for h in heads} == {"temporal@0.3"}
