"""One `tilesplash route ... --json` run for the bench scripts (error_target.py,
tile_granularity.py): the command, its failure as SystemExit with the CLI's
stderr, and the parsed JSON object."""

from __future__ import annotations

import json
import subprocess


def route_json(cli: str, arguments: list[str], threads: int = 0) -> dict:
    """`cli route <arguments> --json [--threads T]` (threads 0: the CLI's default,
    every core), parsed."""
    command = [cli, "route", *arguments, "--json"]
    if threads:
        command += ["--threads", str(threads)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr}")
    return json.loads(result.stdout)
