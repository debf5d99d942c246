"""The flex tuning file (python/tilesplash/_flex/tuning.py) as the native tuning cache
is: bad entries ignored with a warning naming the file, options validated, concurrent
writers from several processes losing nothing, and the key's mask and length fields
taken from the core (tilesplash._core.tune_shape) so they cannot drift from it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import tilesplash  # noqa: E402
from tilesplash import Mask, _core  # noqa: E402
from tilesplash._flex import tuning  # noqa: E402

GOOD = {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 2, "num_warps": 4}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "flex.json"
    monkeypatch.setenv("TILESPLASH_FLEX_TUNING", str(path))
    tuning._loaded.clear()
    yield path
    tuning._loaded.clear()


def _write(path, entries, version=tuning.FORMAT_VERSION):
    path.write_text(json.dumps({"version": version, "entries": entries}))


@pytest.mark.parametrize("entry", [
    "BLOCK_M=64",
    {"seconds": 0.1},
    [GOOD],
    {"kernel_options": ["BLOCK_M", 64]},
    {"kernel_options": {"BLOCK_M": 64, "BLOCK_K": 32}},
    {"kernel_options": {"BLOCK_M": -64}},
    {"kernel_options": {"num_warps": "8"}},
], ids=["string", "no-options", "list", "options-list", "unknown", "negative", "string-value"])
def test_a_bad_entry_is_ignored_with_a_warning_naming_the_file(cache, entry):
    _write(cache, {"bad": entry, "good": {"kernel_options": GOOD, "seconds": 0.1}})
    with pytest.warns(RuntimeWarning, match=f"{cache}.*'bad'.*ignored"):
        entries = tuning._entries(cache)
    assert list(entries) == ["good"] and entries["good"]["kernel_options"] == GOOD


@pytest.mark.parametrize("text, word", [("{not json", "corrupt"), ("[1, 2]", "not a version"),
                                        (json.dumps({"version": 99, "entries": {}}),
                                         "not a version")])
def test_an_unreadable_file_is_ignored_with_a_warning(cache, text, word):
    cache.write_text(text)
    with pytest.warns(RuntimeWarning, match=f"{cache} .*{word}"):
        assert tuning._entries(cache) == {}
    tuning.store("k", GOOD, 0.5)  # and is replaced by the next store
    tuning._loaded.clear()
    assert tuning._entries(cache)["k"]["kernel_options"] == GOOD


def test_store_refuses_bad_options_by_name(cache):
    with pytest.raises(ValueError, match="kernel_options: num_stages must be a positive integer"):
        tuning.store("k", {"num_stages": 0}, 0.1)
    assert not cache.exists()


def test_two_processes_storing_at_once_lose_nothing(cache):
    script = textwrap.dedent(f"""
        import sys
        from tilesplash._flex import tuning
        for i in range(40):
            tuning.store(f"{{sys.argv[1]}}-{{i}}", {GOOD!r}, 0.001 * i)
    """)
    env_python = [sys.executable, "-c", script]
    writers = [subprocess.Popen(env_python + [name]) for name in ("a", "b")]
    assert [w.wait(timeout=300) for w in writers] == [0, 0]
    entries = json.loads(cache.read_text())["entries"]
    assert len(entries) == 80 and all(e["kernel_options"] == GOOD for e in entries.values())
    assert not [p for p in cache.parent.iterdir() if p.suffix == ".tmp"]


def test_the_key_takes_the_mask_and_lengths_from_the_core():
    geometry = tilesplash.VideoGeometry(4, 6, 8)
    for mask, q_len, kv_len in ((Mask.causal(-5), 1000, 1000),
                                (Mask.local(100, 50, -20), 3000, 2500),
                                (Mask.spatial(geometry, density=0.3, sink=True), 192, 192),
                                (Mask.dense(), 1, 7)):
        fields = json.loads(tuning.tune_key("cpu", mask, q_len, kv_len, 64, torch.float16,
                                            (128, 64)))
        core = _core.tune_shape(mask._core, q_len, kv_len)
        for name in ("mask_family", "q_bucket", "kv_bucket"):
            assert fields[name] == core[name]
        assert fields["density"] == pytest.approx(core["density"])
        assert fields["block"] == "128x64" and fields["dtype"] == "float16"
    # the sign of an offset is part of the family, as in the native key
    family = json.loads(tuning.tune_key("cpu", Mask.causal(-5), 64, 64, 64, torch.float32,
                                        (128, 128)))["mask_family"]
    assert "-" in family and "#" in family
    with pytest.raises(ValueError, match="q_len"):
        _core.tune_shape(Mask.causal()._core, 0, 5)
