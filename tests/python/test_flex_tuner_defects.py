"""The flex options chooser and tuner (issue 34, item 6): tune() times PyTorch's own
default and 128-key tiles, takes candidates=[{}], a stored entry is not trusted
blindly, and a sparse block PyTorch's default tiles do not divide (64, 192) steps down
instead of raising inductor's ValueError."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
import tilesplash.flex  # noqa: E402
from tilesplash._flex import options as opts  # noqa: E402
from tilesplash._flex import tuning  # noqa: E402

H200 = opts.DeviceLimits("NVIDIA H200", (9, 0), 232_448)
GOOD = {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 2, "num_warps": 4}


def test_the_candidates_include_pytorchs_default_and_128_key_tiles():
    assert {} in tuning.CANDIDATES
    assert any(c.get("BLOCK_N") == 128 for c in tuning.CANDIDATES)


def test_tune_takes_pytorchs_own_default():
    result = tilesplash.flex.tune("causal", 128, heads=1, head_dim=16, dtype=torch.float32,
                                  device="cpu", block_size=64, candidates=[{}], repeats=1,
                                  save=False)
    assert result["best"] == {} and "seconds" in result["results"][0]


@pytest.mark.parametrize("block", [(64, 64), (192, 192), (128, 64)])
def test_index_masks_on_blocks_the_default_cannot_divide_start_from_the_ladder(block):
    ladder = opts.choices(H200, 128, 2, block, opts.INDEX)
    assert ladder[0] is not None and all(opts.divides(o, block) for o in ladder)
    assert opts.choices(H200, 128, 2, (128, 256), opts.INDEX)[0] is None


def test_inductors_tile_refusal_steps_down():
    opts.forget()
    tried = []

    def call(options):
        tried.append(options)
        if options is None:
            raise ValueError("Invalid FlexAttention forward kernel options: Q and KV block "
                             "sizes must be divisible by the selected tile sizes. Got ...")
        return "ran"

    assert opts.first_that_runs(call, [None, GOOD], ("test", 192)) == "ran"
    assert tried == [None, GOOD]
    opts.forget()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "flex.json"
    monkeypatch.setenv("TILESPLASH_FLEX_TUNING", str(path))
    tuning._loaded.clear()
    yield path
    tuning._loaded.clear()


def test_a_stored_entry_is_trusted_only_from_this_pytorch(cache):
    def stored(entry):
        cache.write_text(json.dumps({"version": tuning.FORMAT_VERSION, "entries": {"k": entry}}))
        tuning._loaded.clear()
        return tuning.stored_options("k")

    assert stored({"kernel_options": GOOD, "seconds": 1.0, "torch": torch.__version__}) == GOOD
    assert stored({"kernel_options": GOOD, "seconds": 1.0, "torch": "2.0.0"}) is None
    assert stored({"kernel_options": GOOD, "seconds": 1.0}) is None  # tuned before the default
    assert stored({"kernel_options": {}, "seconds": 1.0, "torch": torch.__version__}) is None
    tuning.store("k2", GOOD, 0.5)
    assert tuning.stored_options("k2") == GOOD
