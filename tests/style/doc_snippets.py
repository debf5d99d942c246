#!/usr/bin/env python3
"""Fails when a code block of a doc is not, line for line, in the file it names.

A fenced block preceded by a line `<!-- snippet: PATH -->` (PATH relative to
the repository) must appear in PATH as consecutive lines, after removing the
block's common indentation (a block inside a list item is indented). The
files are compiled or run by the normal build and tests (a kernel target, the
example method in tests/examples, the diffusers model table), so a snippet
that passes this check is code that builds and runs. Paths the doc mentions
in backticks must exist too, so a doc cannot point to a folder that is gone.
Run: doc_snippets.py REPO docs/extending.md
"""

from __future__ import annotations

import pathlib
import re
import sys
import textwrap

MARK = re.compile(r"^\s*<!-- snippet: (\S+) -->\s*$")
PATH = re.compile(r"`((?:src|include|tools|tests|python|docs|cmake|scripts|bench)/[\w./<>-]+)`")


def snippets(lines: list[str]):
    """(line number, path, code) of each marked block."""
    for i, line in enumerate(lines):
        mark = MARK.match(line)
        if not mark:
            continue
        start = i + 1
        if start >= len(lines) or not lines[start].lstrip().startswith("```"):
            yield i + 1, mark.group(1), None
            continue
        end = next(j for j in range(start + 1, len(lines)) if lines[j].lstrip().startswith("```"))
        yield i + 1, mark.group(1), textwrap.dedent("\n".join(lines[start + 1:end]))


def contains(text: str, code: str) -> bool:
    want = code.strip("\n").splitlines()
    have = text.splitlines()
    return any(textwrap.dedent("\n".join(have[i:i + len(want)])).splitlines() == want
               for i in range(len(have) - len(want) + 1))


def main() -> int:
    repo, doc = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    lines = (repo / doc).read_text().splitlines()
    errors = []
    count = 0
    for number, path, code in snippets(lines):
        count += 1
        if code is None:
            errors.append(f"{doc}:{number}: the snippet mark is not followed by a code block")
        elif not (repo / path).is_file():
            errors.append(f"{doc}:{number}: {path} does not exist")
        elif not contains((repo / path).read_text(), code):
            errors.append(f"{doc}:{number}: the block is not, line for line, in {path}")
    for number, line in enumerate(lines, 1):
        for path in PATH.findall(line):
            if "<" in path or "*" in path:
                continue  # a pattern (src/methods/<name>/), not a path
            if not (repo / path.rstrip("/")).exists():
                errors.append(f"{doc}:{number}: `{path}` does not exist")
    if count == 0:
        errors.append(f"{doc}: no snippet marks (expected the worked examples' blocks)")
    for error in errors:
        print(error, file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
