"""The flex path's steady state never waits for the device (issue 34).

A steady-state call is a new layer and step at a shape already run: every
table of that shape is built, and what is new each call (the sampled rows,
the router's choices) must not come back to the host. On CPU tensors "the
host reads the device" is a call of Tensor.item / tolist / cpu / numpy /
__bool__ (or int / float of a tensor) or torch.cuda.synchronize: the test
counts them. The routing's work must not grow with the candidates (torch
profiler), and its rule, encoded as tensor ops, must be the library's.
"""

from __future__ import annotations

import collections
import contextlib
import sys

import numpy as np
import pytest

from tilesplash import VideoAttention, VideoGeometry, _core

torch = pytest.importorskip("torch")
from tilesplash._torch_video.row_rules import RowRules  # noqa: E402
from tilesplash._torch_video.route import decide, sampled_scores  # noqa: E402

READS = ("item", "tolist", "cpu", "numpy", "__bool__", "__int__", "__float__", "__index__")


def _inside_eager_flex() -> bool:
    """Whether the read is PyTorch's eager FlexAttention's own: the CPU's reference path
    traces a wrapper with dynamo, which after a recompile with automatic dynamic shapes
    reads a scalar of its own arguments on the host. GPUs run tilesplash's compiled
    FlexAttention (static shapes), where that wrapper never runs."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "_flex_attention_hop_wrapper":
            return True
        frame = frame.f_back
    return False


@contextlib.contextmanager
def counted_reads():
    """Counts every read of a tensor's data by the host (and CUDA synchronisations)."""
    counts: collections.Counter = collections.Counter()
    saved = {name: getattr(torch.Tensor, name) for name in READS}
    saved_sync = torch.cuda.synchronize

    def counting(name):
        original = saved[name]

        def read(*args, **kwargs):
            if not _inside_eager_flex():
                counts[name] += 1
            return original(*args, **kwargs)
        return read

    for name in READS:
        setattr(torch.Tensor, name, counting(name))
    torch.cuda.synchronize = lambda *a, **k: counts.update(["cuda.synchronize"])
    try:
        yield counts
    finally:
        for name, original in saved.items():
            setattr(torch.Tensor, name, original)
        torch.cuda.synchronize = saved_sync


G = VideoGeometry(3, 4, 6, text=5, text_at="after")


@pytest.mark.parametrize("options", [
    dict(density=0.3, sink=True),
    dict(density=0.3, sink=True, granularity="tile", block_q=64, block_kv=64),
    dict(method="radial", density=0.3),
    dict(error=0.1),
    dict(density=0.3, dense_layers=1),
    dict(method="sta", density=0.3, density_budget=0.6),
    dict(density=0.3, sink=True, force="temporal"),
    dict(method="svg2", density=0.3),
    dict(density=0.3, sink=True, compensate=True),
    dict(density=0.3, sink=True, granularity="tile", block_q=64, block_kv=64, compensate=True),
    dict(error=0.1, compensate=True),
    dict(density=0.3, sink=True, force="temporal", compensate=True),
    dict(method="svg2", density=0.3, compensate=True),
], ids=["svg_sink", "tile", "radial", "ladder", "warmup", "sta", "forced", "svg2", "compensated",
        "tile_compensated", "ladder_compensated", "forced_compensated", "svg2_compensated"])
@pytest.mark.parametrize("layout", ["bnhd", "bhnd"])
def test_a_steady_state_call_never_reads_the_device(options, layout):
    layer = VideoAttention(G, backend="flex", samples=8, **options)
    shape = (2, G.tokens, 3, 16) if layout == "bnhd" else (2, 3, G.tokens, 16)
    q, k, v = (torch.randn(shape) for _ in range(3))
    layer(q, k, v, layer=1, step=0, layout=layout)  # the shape's first call builds its tables
    for layer_index, step in ((0, 1), (2, 3), (3, 4)):
        with counted_reads() as counts:
            out, report = layer(q, k, v, layer=layer_index, step=step, layout=layout)
        assert not counts, (layer_index, step, dict(counts))
        assert out.shape == q.shape
    # The report reads the device when asked (once), and then holds every head.
    assert len(report["heads"]) == 2 * 3


def test_nan_is_refused_on_the_device_naming_the_argument():
    layer = VideoAttention(G, backend="flex", samples=8, density=0.3)
    q, k, v = (torch.randn(1, G.tokens, 2, 16) for _ in range(3))
    layer(q, k, v)
    v[0, 3, 1, 2] = float("nan")
    with counted_reads() as counts, pytest.raises(ValueError, match="^v: NaN or Inf"):
        layer(q, k, v, layer=1, step=1)
    assert not counts


def test_the_device_rule_is_the_librarys():
    """route.decide against _core.decide_routes: random, tied, zero and infinite tables,
    with and without a budget and an error target."""
    rng = np.random.default_rng(0)
    densities_list = [[0.3, 0.3], [0.1, 0.2, 0.2, 0.4, 0.05], [0.05, 0.1, 0.15, 0.25, 0.4,
                                                                 0.5, 0.6, 0.8]]
    for densities in densities_list:
        c = len(densities)
        mse = rng.choice([0.0, 1e-3, 2e-3, 5e-3, 1e-2], size=(64, c))  # many ties
        mse[:8] = rng.random((8, c))
        power = rng.choice([0.0, 1e-3, 1.0], size=64)
        for budget in (None, 0.2, 0.01):
            for error in (None, 0.05, 0.5):
                expected = _core.decide_routes(mse, power, densities, budget, error)
                index, met, errors = decide(densities, torch.from_numpy(mse),
                                            torch.from_numpy(power), budget, error)
                assert index.tolist() == np.asarray(expected[0]).tolist(), (budget, error)
                assert met.tolist() == np.asarray(expected[1]).tolist()
                np.testing.assert_allclose(errors.numpy(), np.asarray(expected[2]))


def _routing_ops(candidates):
    rng = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 96, 16, generator=rng) for _ in range(3))
    rows = torch.arange(0, 96, 12)
    keeps = torch.rand(candidates + 1, 8, 96, generator=rng) < 0.5
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        mse, power = sampled_scores(q, k, v, rows, keeps, 0.25)
        decide([0.1 * (i + 1) for i in range(candidates)], mse, power, 0.5, 0.1)
    return collections.Counter(e.name for e in prof.events() if e.name.startswith("aten::"))


def test_routing_work_does_not_grow_with_the_candidates():
    """2 candidates, 5, and an 8-rung ladder of two families: the same operators, as many
    times each (one Q.K^T, one exp, one stacked P.V)."""
    two, five, ladder = (_routing_ops(c) for c in (2, 5, 16))
    assert two == five == ladder
    assert two["aten::exp"] == 1 and two["aten::bmm"] == 2


class _Scheduler:
    """What tilesplash reads of a diffusers scheduler: the step index and the timesteps."""

    def __init__(self, steps):
        self.timesteps = torch.linspace(999, 0, steps)
        self.step_index = None
        self.begin_index = None


class _Pipeline:
    def __init__(self, transformer, scheduler):
        self.transformer, self.scheduler = transformer, scheduler
        self.components = {"transformer": transformer, "scheduler": scheduler}


def test_a_steady_state_wan_step_never_reads_the_device():
    """An enabled tiny Wan transformer, its steps counted by a pipeline's scheduler: a
    forward at a new step reads nothing back (the drop-in files each call's report with
    its heads still on the device)."""
    pytest.importorskip("diffusers")
    import tilesplash.diffusers as tsd
    from diffusers_tiny import tiny_wan, wan_inputs

    model = tiny_wan()
    scheduler = _Scheduler(10)
    handle = tsd.enable(_Pipeline(model, scheduler), density=0.25, backend="flex",
                        dense_layers=1, dense_steps=1)
    hidden, text = wan_inputs()
    try:
        with torch.no_grad():
            for step in range(4):
                scheduler.step_index = step if step else None
                timestep = scheduler.timesteps[step].expand(1)
                if step < 2:  # step 0 (dense) and the shapes' first routed step
                    model(hidden_states=hidden, timestep=timestep, encoder_hidden_states=text,
                          return_dict=False)
                    continue
                with counted_reads() as counts:
                    model(hidden_states=hidden, timestep=timestep, encoder_hidden_states=text,
                          return_dict=False)
                assert not counts, (step, dict(counts))
        records = handle.report()
        assert [r["step"] for r in records][-2:] == [3, 3]
        assert any(h["routed"] for r in records for h in r["heads"])
    finally:
        handle.remove()


@pytest.mark.parametrize("geometry", [VideoGeometry(3, 5, 7), G,
                                      VideoGeometry(4, 6, 8, text=3, text_at="before")],
                         ids=["video", "text_after", "text_before"])
@pytest.mark.parametrize("options", [dict(density=0.3, sink=True), dict(density=0.3),
                                     dict(method="radial", density=0.3),
                                     dict(method="sta", density=0.3),
                                     dict(method="mix", density=0.3), dict(error=0.1, sink=True)],
                         ids=["svg_sink", "svg", "radial", "sta", "mix", "ladder"])
def test_row_masks_made_on_the_device_are_the_librarys(geometry, options):
    """Each candidate's mask on the sampled rows, from its rule on the device (row
    intervals in its run order, its key segment), equals Mask.rows on the host."""
    layer = VideoAttention(geometry, samples=12, **options)
    runs = [layer.candidate_run(name) for name, _ in layer.candidates]
    rules = RowRules.build(runs, geometry.tokens, "cpu")
    assert rules is not None
    for layer_index, step in ((0, 0), (2, 3), (5, 9)):
        rows = layer.sampled_rows(layer_index, step)
        host = np.stack([layer.mask(name).rows(rows, geometry.tokens)
                         for name, _ in layer.candidates])
        np.testing.assert_array_equal(rules.keeps(torch.as_tensor(rows)).numpy(), host)


def _row_mask_ops(options):
    layer = VideoAttention(VideoGeometry(4, 6, 8), samples=12, **options)
    rules = RowRules.build([layer.candidate_run(name) for name, _ in layer.candidates],
                           layer.geometry.tokens, "cpu")
    rows = torch.as_tensor(layer.sampled_rows(1, 2))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        rules.keeps(rows)
    return len(layer.candidates), collections.Counter(
        e.name for e in prof.events() if e.name.startswith("aten::"))


def test_row_masks_do_not_grow_with_the_candidates():
    """2 candidates, 4 (mix) and a ladder of 10: the same operators."""
    counts = [_row_mask_ops(o) for o in (dict(density=0.3, sink=True),
                                         dict(method="mix", density=0.3, sink=True),
                                         dict(error=0.1, sink=True))]
    assert [c for c, _ in counts] == [2, 4, 10]
    assert counts[0][1] == counts[1][1] == counts[2][1]
