"""copy.deepcopy of an enabled diffusers transformer (EMA copies, a second expert,
A/B runs): the copy runs like the original, on a handle of its own that
tilesplash.diffusers.handle_of() reaches, and tilesplash.diffusers.remove()
cleans any model carrying tilesplash's processors and hooks (issue 27, defect 2)."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("diffusers")

import tilesplash.diffusers as tsd  # noqa: E402
from diffusers_tiny import run_wan, tiny_wan, wan_inputs  # noqa: E402


def _carries(model) -> bool:
    return any(hasattr(getattr(m, "processor", None), "_tilesplash_original")
               or m._forward_pre_hooks or m._forward_hooks for m in model.modules())


@pytest.mark.parametrize("method", ["svg", "svg2"])
def test_a_deep_copy_runs_like_the_original_on_its_own_handle(method):
    inputs = wan_inputs()
    plain = run_wan(tiny_wan(), *inputs)
    model = tiny_wan()
    handle = tsd.enable(model, method=method, density=0.25, dense_layers=0, dense_steps=0)
    twin = copy.deepcopy(model)
    first = run_wan(twin, *inputs)  # before the original ever ran: nothing of its to reuse
    expected = run_wan(model, *inputs)
    assert not torch.equal(expected, plain)  # sparse: the copy must be too
    assert torch.equal(first, expected)
    assert torch.equal(run_wan(twin, *inputs), expected)
    other = wan_inputs(seed=2, frames=3)  # a shape the original never saw
    assert torch.equal(run_wan(copy.deepcopy(model), *other), run_wan(model, *other))
    assert tsd.handle_of(model) is handle
    own = tsd.handle_of(twin)
    assert own is not None and own is not handle and own.active
    assert len(own.report()) == 6 and len(handle.report()) == 6
    with pytest.raises(ValueError, match="already has tilesplash enabled.*remove"):
        tsd.enable(twin)
    # A copy of the copy, and the copy after the original's handle is gone.
    assert torch.equal(run_wan(copy.deepcopy(twin), *inputs), expected)
    handle.remove()
    assert torch.equal(run_wan(model, *inputs), plain) and not _carries(model)
    assert torch.equal(run_wan(twin, *inputs), expected)
    tsd.remove(twin)
    assert not own.active and tsd.handle_of(twin) is None and not _carries(twin)
    assert torch.equal(run_wan(twin, *inputs), plain)
    again = tsd.enable(twin, method=method, density=0.25, dense_layers=0, dense_steps=0)
    assert torch.equal(run_wan(twin, *inputs), expected)
    again.remove()


def test_remove_cleans_a_copy_whose_handle_was_never_reached():
    inputs = wan_inputs()
    plain = run_wan(tiny_wan(), *inputs)
    model = tiny_wan()
    handle = tsd.enable(model, dense_layers=0, dense_steps=0)
    twins = [copy.deepcopy(model) for _ in range(2)]
    handle.remove()
    for twin in twins:
        tsd.remove(twin)
        assert not _carries(twin)
        assert torch.equal(run_wan(twin, *inputs), plain)
    tsd.remove(twins[0])  # nothing left: does nothing
    tsd.remove(tiny_wan())
