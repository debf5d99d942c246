"""docs/python.md's "Sharing between threads and processes" names, for each thing
it says may be shared, the test that holds it: every test it names must exist, so
that a promise without a test (or a renamed test) fails here."""

from __future__ import annotations

import ast
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
SECTION = "## Sharing between threads and processes"


def _section() -> str:
    text = (ROOT / "docs" / "python.md").read_text()
    start = text.index(SECTION)
    end = text.index("\n## ", start + len(SECTION))
    return text[start:end]


def test_every_sharing_promise_names_a_test_that_exists():
    section = _section()
    items = [item for item in section.split("\n- ")[1:]]
    assert len(items) >= 7
    named = re.findall(r"`(test_\w+\.py)::(test_\w+)`", section)
    assert len(named) >= 5
    for file, function in named:
        path = ROOT / "tests" / "python" / file
        assert path.exists(), file
        tree = ast.parse(path.read_text())
        defined = {node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
        assert function in defined, (file, function)
    for thing in ("VideoAttention", "enable", "deepcopy", "Tuning files", "Processes",
                  "ThreadingContext"):
        assert thing in section, thing
