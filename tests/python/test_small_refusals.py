"""The smaller reliability cases of issue 37: arguments the library refuses by name or
accepts as equal, wherever they enter.

- tilesplash.jax.route checks error= and densities= as VideoAttention does before
  they key its router cache (a list or a 0-d array was "unhashable type").
- tilesplash.diffusers.plot takes one step number for steps=, and names steps= for
  anything else (steps=0 was "'int' object is not iterable").
- pickle / torch.save of a model with tilesplash enabled names tilesplash and says to
  remove(model) first (it was a local-object error); after remove it pickles.
- A density ladder given as a list and as a NumPy array is the same agreement
  between ranks.
- Ladder candidates get distinct names that round-trip through force= and mask().
- VideoAttention refuses torch inputs that require grad in grad mode, on both
  backends (native returned a detached output without a word).
"""

from __future__ import annotations

import io
import pickle

import numpy as np
import pytest

import tilesplash
from tilesplash import VideoAttention, VideoGeometry

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("error", [[0.1], np.array(0.1), np.array([0.1]), "0.1"],
                         ids=["list", "0-d array", "1-d array", "str"])
def test_jax_route_refuses_an_error_target_that_is_not_a_number_by_name(error):
    pytest.importorskip("jax")
    import jax.numpy as jnp
    import tilesplash.jax as tsj

    g = VideoGeometry(4, 4, 6)
    x = jnp.zeros((2, g.tokens, 32))
    with pytest.raises(TypeError, match="^error: expected a relative L2 error"):
        tsj.route(x, x, x, g, error=error)
    with pytest.raises(ValueError, match="^densities: a density ladder applies with error="):
        tsj.route(x, x, x, g, densities=np.array([0.1, 0.2]))
    # NumPy scalars and arrays of densities are numbers: the same routing as plain floats.
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.standard_normal((2, g.tokens, 32)).astype(np.float32))
    plain = tsj.route(q, q, q, g, error=0.3, densities=[0.1, 0.3])
    numpy = tsj.route(q, q, q, g, error=np.float64(0.3), densities=np.array([0.1, 0.3]))
    assert np.array_equal(np.asarray(plain.index), np.asarray(numpy.index))


def _report():
    return [{"step": s, "layer": 0, "heads": [
        {"head": h, "choice": "spatial@0.1", "family": "spatial", "rung": 0.1, "routed": True,
         "density": 0.1, "error": 0.01,
         "target_met": True, "tiles_visited": 0.1, "seconds": 0.0} for h in range(2)]}
        for s in (0, 1)]


def test_plot_takes_one_step_number_and_names_steps_otherwise(tmp_path):
    pytest.importorskip("diffusers")
    from tilesplash.diffusers import plot

    for bad, kind in [("0", TypeError), (0.5, TypeError), ([True], TypeError), (7, ValueError),
                      ([], ValueError)]:
        with pytest.raises(kind, match="^steps: expected"):
            plot(_report(), tmp_path / "x.png", steps=bad)
    pytest.importorskip("matplotlib")
    assert plot(_report(), tmp_path / "s.png", steps=0)["steps"] == [0]
    assert plot(_report(), tmp_path / "n.png", steps=np.int64(1))["steps"] == [1]


def test_pickling_an_enabled_model_says_to_remove_it_first():
    pytest.importorskip("diffusers")
    import tilesplash.diffusers as tsd
    from diffusers_tiny import tiny_wan

    model = tiny_wan()
    handle = tsd.enable(model, total_steps=4)
    for save in (pickle.dumps, lambda m: torch.save(m, io.BytesIO())):
        with pytest.raises(TypeError, match=r"^tilesplash: .*enabled cannot be pickled.*"
                                            r"tilesplash\.diffusers\.remove\(model\) first"):
            save(model)
    handle.remove()
    assert isinstance(pickle.loads(pickle.dumps(model)), type(model))


def test_a_ladder_as_a_list_or_an_array_is_one_agreement():
    from tilesplash._dist.agreement import describe

    g = VideoGeometry(3, 4, 4)
    as_list = VideoAttention(g, error=0.1, densities=[0.1, 0.3])
    as_array = VideoAttention(g, error=np.float64(0.1), densities=np.array([0.1, 0.3]))
    assert describe(as_list._agreement()) == describe(as_array._agreement())


def test_ladder_candidate_names_are_distinct_and_round_trip():
    g = VideoGeometry(4, 6, 6)
    va = VideoAttention(g, error=0.1, densities=[0.1, 0.1000001, 0.25])
    names = [name for name, _ in va.candidates]
    assert len(set(names)) == len(names) == 6
    assert "spatial@0.1" in names and "spatial@0.1000001" in names
    for name in names:
        assert float(name.split("@")[1]) in (0.1, 0.1000001, 0.25)
        forced = VideoAttention(g, error=0.1, densities=[0.1, 0.1000001, 0.25], force=name)
        q = np.zeros((1, 1, g.tokens, 16), np.float32)
        _, report = forced(q, q, q, layout="bhnd")
        assert report["heads"][0]["choice"] == name
        assert va.mask(name) == forced.mask(name)


@pytest.mark.parametrize("backend", ["cpu", "flex"])
def test_video_attention_with_inputs_that_require_grad_says_it_has_no_backward(backend):
    # Not a detached output without a word (issue 37 item 10): the forward runs, and a
    # backward through it raises naming the backend (issue 34: forward works in grad mode).
    g = VideoGeometry(3, 4, 4)
    va = VideoAttention(g, backend=backend)
    x = torch.randn(1, g.tokens, 2, 16)
    expected, _ = va(x, x, x)
    for name in ("q", "k", "v"):
        args = {n: x.clone().requires_grad_(n == name) for n in ("q", "k", "v")}
        out, _ = va(args["q"], args["k"], args["v"])
        assert out.requires_grad and torch.equal(out.detach(), expected)
        with pytest.raises(RuntimeError, match=f"backend '{backend}' with cpu tensors has no backward"):
            out.sum().backward()
    with torch.no_grad():
        out, _ = va(x.clone().requires_grad_(), x, x)
    assert not out.requires_grad
