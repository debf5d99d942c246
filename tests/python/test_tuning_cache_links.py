"""A flex tuning file shared through symbolic links ($TILESPLASH_FLEX_TUNING naming a
link) is written through the link, as the native tuning cache is
(tests/tuning_cache_robust_test.cc): the link stays a link and the shared target
gets every entry, whoever stores it."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("torch")

from tilesplash._flex import tuning  # noqa: E402

GOOD = {"BLOCK_M": 64, "BLOCK_N": 64, "num_stages": 2, "num_warps": 4}


@pytest.fixture(autouse=True)
def _fresh_memo():
    tuning._loaded.clear()
    yield
    tuning._loaded.clear()


def test_a_symlinked_flex_tuning_file_is_written_through_the_link(tmp_path, monkeypatch):
    (tmp_path / "shared").mkdir()
    (tmp_path / "home").mkdir()
    target = tmp_path / "shared" / "flex.json"
    link = tmp_path / "home" / "flex.json"
    chained = tmp_path / "home" / "again.json"
    os.symlink("../shared/flex.json", link)  # dangling until the first store
    os.symlink("flex.json", chained)
    monkeypatch.setenv("TILESPLASH_FLEX_TUNING", str(link))
    tuning.store("a", GOOD, 0.1)  # the cache_path() default: the environment's link
    tuning.store("b", GOOD, 0.2, path=chained)
    tuning.store("c", GOOD, 0.3, path=target)
    assert link.is_symlink() and chained.is_symlink() and not target.is_symlink()
    assert sorted(json.loads(target.read_text())["entries"]) == ["a", "b", "c"]
    assert sorted(p.name for p in (tmp_path / "home").iterdir()) == ["again.json", "flex.json"]
    tuning._loaded.clear()
    assert sorted(tuning._entries(link)) == ["a", "b", "c"]
