"""pyproject.toml's [diffusers] extra brings what tilesplash.diffusers, the README's
quick start and examples/wan_pipeline.py import (issue 27: `pip install
".[diffusers]"` then the example failed without transformers)."""

from __future__ import annotations

import ast
import pathlib
import re
import sys

import pytest

tomllib = pytest.importorskip("tomllib")

ROOT = pathlib.Path(__file__).resolve().parents[2]
# Imported by the diffusers pipelines the example and the quick start build
# (WanPipeline imports transformers' UMT5 and tokenizer at import time).
PIPELINE_NEEDS = {"transformers"}


def _extra(name):
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return {re.split(r"[<>=!~\[; ]", r, maxsplit=1)[0].lower()
            for r in project["optional-dependencies"][name]}


def _imports(path):
    return _imports_of(path.read_text())


def test_the_diffusers_extra_brings_what_the_example_and_quick_start_import():
    extra = _extra("diffusers")
    example = _imports(ROOT / "examples" / "wan_pipeline.py")
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index('pip install ".[diffusers]"'):]
    quick = quick[quick.index("```python") + 9:]
    quick = _imports_of(quick[:quick.index("```")])
    stdlib = set(sys.stdlib_module_names)
    needed = (example | quick | PIPELINE_NEEDS) - stdlib - {"tilesplash"}
    assert needed <= extra, sorted(needed - extra)


def _imports_of(code: str):
    tree = ast.parse(code)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module.split(".")[0])
    return found
