"""The table mask_mod only for the heads that need it (issue 34, item 7).

A candidate whose plan keeps more than ROW_INTERVALS runs of keys in a row
needs the table mask_mod (a [BLOCK_M, BLOCK_N] gather per stage, about 1.9x
slower on an H200). It used to put every head of its call on the table; now its
heads run in a call of their own and the others keep the per-row rule, so a
layer makes no more calls than its distinct (row order, mask_mod) needs.
Here the radial candidate of a "mix" layer at 8 x 16 x 16 needs the table and
no other candidate does.
"""

from __future__ import annotations

import numpy as np
import pytest

from tilesplash import VideoAttention, VideoGeometry

torch = pytest.importorskip("torch")

from tilesplash._backends import BACKENDS  # noqa: E402
from tilesplash._flex import options  # noqa: E402
from tilesplash._torch_video import kernels  # noqa: E402
from tilesplash._torch_video.lanes import RoutedLayer  # noqa: E402
from tilesplash._flex.tables import plan_tables  # noqa: E402

G = VideoGeometry(8, 16, 16)
OPTIONS = dict(method="mix", density=0.3, density_budget=0.9, block_q=64, block_kv=64)


def _layer(backend="flex", **extra):
    return VideoAttention(G, backend=backend, **OPTIONS, **extra)


def _needs_table(layer, name):
    run = layer.candidate_run(name)
    return plan_tables(run["run_mask"], G.tokens, G.tokens, 64, 64).row_starts is None


def test_the_geometry_has_one_candidate_that_needs_the_table():
    layer = _layer()
    needs = {name: _needs_table(layer, name) for name, _ in layer.candidates}
    assert needs["radial"] and not needs["spatial"], needs


def test_only_the_heads_that_need_the_table_get_it():
    layer = _layer()
    runner = layer._runner(BACKENDS["flex"])
    choices = ["radial", "spatial", "spatial", "radial"]
    groups = runner.group_of_candidates(choices)
    assert sorted(groups.values()) == [[0, 3], [1, 2]]
    kinds = [options.mask_mod_kind(bm) for bm in runner.block_masks(choices, "cpu")]
    assert sorted(kinds) == [options.INDEX, options.TABLE]
    # Routed: the radial lane alone reads the table.
    plan = RoutedLayer(runner, None, torch.device("cpu"))
    names = [name for name, _ in layer.candidates]
    for lane in plan.lanes:
        tables, _ = lane.tables(G.tokens, runner.block, torch.device("cpu"))
        members = {names[c] for c, _, _ in lane.members}
        assert (tables.kind == options.TABLE) == ("radial" in members), members


def test_a_routed_layer_makes_one_call_per_distinct_need_and_equals_native(monkeypatch):
    calls = []
    triton = next(k for k in kernels.KERNELS if k.name == "triton")
    run = type(triton).run

    def counting(self, q, k, v, block_mask, scale, **kw):
        calls.append(options.mask_mod_kind(block_mask))
        return run(self, q, k, v, block_mask, scale, **kw)

    monkeypatch.setattr(type(triton), "run", counting)
    flex, native = _layer(samples=12), _layer("cpu", samples=12)
    runner = flex._runner(BACKENDS["flex"])
    names = [name for name, _ in flex.candidates]
    needs = set(runner.group_of_candidates(names))
    rng = np.random.default_rng(2)
    q, k, v = (torch.from_numpy(rng.standard_normal((1, 2, G.tokens, 16)).astype(np.float32))
               for _ in range(3))
    o2, l2, r2 = flex(q, k, v, layout="bhnd", return_lse=True)
    assert len(calls) == len(needs) < len(names) + 1
    assert calls.count(options.TABLE) == 1
    o1, l1, r1 = native(q, k, v, layout="bhnd", return_lse=True)
    assert [h["choice"] for h in r2["heads"]] == [h["choice"] for h in r1["heads"]]
    np.testing.assert_allclose(o2.numpy(), o1.numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(l2.numpy(), l1.numpy(), atol=1e-4, rtol=1e-5)
