#!/usr/bin/env python3
"""Fails when code outside the method registry names a method.

The registry is src/methods/: the list (registry.cc, registry.h, the API
over it) and every method's folder (src/methods/<folder>/). The method names
are read from it: every `.name = "..."` of an entry there, so a method
registered later is checked without an edit here.

A use is a string literal that is exactly a method's name: "svg" or 'sta'
in code (C++ string literals outside // comments; Python string tokens), as
in `method == "svg"`, `method="svg"` or `name == "spatial"`. Prose is not a
use: comments, docstrings, help texts and error messages name methods as
examples, inside longer strings. Code outside the registry asks the entry's
flags (takes_band, data_driven, choice, mask_names), default_method(), the
report's fields (family, rung) and the masks' own names (to_string of a
VideoMaskKind, HeadMask's constants in include/tilesplash/routing.h),
never a name.

Allowed outside the registry, by rule:
- python/src/mask.cc's `.def_static("<name>", ...)`: the Python names of the
  family constructors of the public headers (Mask.spatial, Mask.radial,
  Mask.sta), which are those families' API like include/tilesplash/radial.h.
include/ (the public headers) and tests/ are not scanned.

Run: method_names.py ROOT
"""

from __future__ import annotations

import argparse
import io
import pathlib
import re
import sys
import tokenize

SCANNED = ("src", "python", "tools")
REGISTRY = pathlib.PurePosixPath("src/methods")
ENTRY_NAME = re.compile(r'\.name\s*=\s*"([^"\\]+)"')
CPP_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def method_names(root: pathlib.Path) -> set[str]:
    names = set()
    for path in sorted((root / REGISTRY).rglob("*.cc")):
        names.update(ENTRY_NAME.findall(path.read_text()))
    if not names:
        raise SystemExit(f"method_names.py: no `.name = \"...\"` entries under {root / REGISTRY}")
    return names


def without_comment(line: str) -> str:
    """The line up to a // that is not inside a string literal."""
    quoted = False
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\" and quoted:
            i += 2
            continue
        if c == '"':
            quoted = not quoted
        elif not quoted and line.startswith("//", i):
            return line[:i]
        i += 1
    return line


def cpp_hits(text: str, names: set[str]):
    lines = text.splitlines()
    for number, line in enumerate(lines, 1):
        code = without_comment(line)
        for match in CPP_STRING.finditer(code):
            if match.group(1) not in names:
                continue
            # The first argument of .def_static(, on its line or the next.
            opening = code[: match.start()].rstrip()
            if opening.endswith(".def_static(") or (
                    not opening and number > 1 and lines[number - 2].rstrip().endswith(".def_static(")):
                continue
            yield number, match.group(1)


def python_hits(text: str, names: set[str]):
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    for token in tokens:
        if token.type != tokenize.STRING:
            continue
        literal = token.string
        body = literal.lstrip("rRbBuU")
        for quote in ('"""', "'''", '"', "'"):
            if body.startswith(quote) and body.endswith(quote) and len(body) >= 2 * len(quote):
                body = body[len(quote): -len(quote)]
                break
        if body in names:
            yield token.start[0], body


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", type=pathlib.Path)
    root = parser.parse_args().root
    names = method_names(root)
    failures = []
    for folder in SCANNED:
        for path in sorted((root / folder).rglob("*")):
            relative = pathlib.PurePosixPath(path.relative_to(root).as_posix())
            if relative.is_relative_to(REGISTRY) or not path.is_file():
                continue
            if path.suffix in (".cc", ".h", ".cpp", ".hpp"):
                hits = cpp_hits(path.read_text(), names)
            elif path.suffix == ".py":
                hits = python_hits(path.read_text(), names)
            else:
                continue
            for number, name in hits:
                failures.append(f"{relative}:{number}: the method name \"{name}\" outside the "
                                f"registry (src/methods/); ask the registry instead "
                                f"(docs/extending.md)")
    for failure in failures:
        print(failure)
    print(f"method_names.py: {len(names)} names ({', '.join(sorted(names))}), "
          f"{len(failures)} uses outside the registry")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
