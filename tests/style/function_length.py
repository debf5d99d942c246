#!/usr/bin/env python3
"""Fails when a C++ function in the given folders is longer than --max lines.

The files are clang-formatted (.clang-format), so a function defined at
namespace scope opens with a line at column 0 that ends in "{" and closes
with a line that is exactly "}"; a function's length is the number of lines
from its first signature line to that brace, inclusive. Lambdas count toward
the function that holds them. Classes, structs, enums, unions, namespaces
and extern blocks are not functions, also below a "template <...>" line of
their own (their member functions defined inline are not counted). Run:
function_length.py --max 80 src tools
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

NOT_A_FUNCTION = re.compile(r"^(namespace|struct|class|enum|union|extern|template\s*<[^>]*>\s*(struct|class))\b")


def functions(lines: list[str]):
    """(first signature line, first line, last line) of each namespace-scope function, 1-based."""
    start = None  # first line of the current declaration
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        top_level = line[:1] not in ("", " ", "\t", "#", "/", "}", ")")
        if start is None:
            if not top_level or NOT_A_FUNCTION.match(line):
                continue
            start = number
        stripped = line.rstrip()
        if stripped.endswith(";"):
            start = None  # a declaration, a using, a one-line definition
        elif stripped.endswith("}") and not stripped.endswith("{}"):
            start = None  # a one-line function
        elif stripped.endswith("{"):
            if re.search(r"=\s*\{$", stripped):  # an aggregate initializer: data, not code
                start = None
                continue
            if NOT_A_FUNCTION.match(line) and start < number:
                start = None  # a class template: "template <...>" on the line above
                continue
            end = next((n for n in range(number, len(lines) + 1) if lines[n - 1].rstrip() == "}"),
                       None)
            if end is None:
                return
            yield lines[start - 1].strip(), start, end
            number = end
            start = None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=80)
    parser.add_argument("--report", action="store_true", help="print every function's length")
    parser.add_argument("folders", nargs="+", type=pathlib.Path)
    args = parser.parse_args()
    too_long = []
    for folder in args.folders:
        for path in sorted(list(folder.rglob("*.cc")) + list(folder.rglob("*.h"))):
            lines = path.read_text().splitlines()
            for name, first, last in functions(lines):
                length = last - first + 1
                if args.report:
                    print(f"{length:4} {path}:{first} {name}")
                if length > args.max:
                    too_long.append(f"{path}:{first}: {length} lines (at most {args.max}): {name}")
    for line in too_long:
        print(line, file=sys.stderr)
    return 1 if too_long else 0


if __name__ == "__main__":
    sys.exit(main())
