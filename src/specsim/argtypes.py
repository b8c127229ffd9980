"""Argument types of the command lines: each refuses a bad value with a one-line reason.

argparse turns the reason into ``<prog>: error: argument --flag: <reason>`` with exit status 2
(:class:`specsim.cli._Parser`), so a typo is answered before any work starts. Imports only the
standard library: every sub-command's parser is built from these at start-up.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def existing_file(path: str) -> str:
    """A path naming a regular file (its content is checked by its reader)."""
    if not Path(path).is_file():
        kind = "a directory, not a file" if Path(path).is_dir() else "no such file"
        raise argparse.ArgumentTypeError(f"{kind}: {path}")
    return path


def output_dir(path: str) -> str:
    """A directory to write into: existing, or to be created (not a file in the way)."""
    p = Path(path)
    for parent in (p, *p.parents):
        if parent.exists():
            if not parent.is_dir():
                raise argparse.ArgumentTypeError(f"{parent} is a file, not a directory; give "
                                                 f"a directory (it is created if missing)")
            break
    return path


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text[:40]!r}") from None


def positive_int(text: str) -> int:
    """An integer >= 1."""
    value = _integer(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def seed(text: str) -> int:
    """A root seed: an integer in 0 .. 2**63 - 1 (numpy's SeedSequence takes no negative)."""
    value = _integer(text)
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"must be an integer in 0..2**63-1, got {text[:40]}")
    return value


def json_object(text: str) -> dict[str, Any]:
    """A JSON object (a config section)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as err:
        reason = err.msg if isinstance(err, json.JSONDecodeError) else type(err).__name__
        raise argparse.ArgumentTypeError(f"not JSON ({reason})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"not a JSON object: {text[:40]!r}")
    return value
