"""The command line's parser and argument types: each refuses a bad value with a one-line reason.

argparse turns the reason into ``<prog>: error: argument --flag: <reason>`` with exit status 2
(:class:`Parser`), so a typo is answered before any work starts. Imports only the standard
library: every sub-command's parser is built from these at start-up.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, ClassVar, NoReturn


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line on stderr, exit status 2, no usage dump;
    an unknown flag is named before the required arguments it may have pushed aside (argparse
    checks those first: ``specsim point --jbo X`` would be told --job is missing)."""

    argv: ClassVar[list[str]] = []  # the command line parse_args was given
    root: ClassVar[argparse.ArgumentParser | None] = None  # the top-level parser

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:
        Parser.argv = list(sys.argv[1:] if args is None else args)
        return super().parse_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split())  # one line, whatever the message
        if message.startswith("the following arguments are required"):
            unknown = _unknown_flags(self, Parser.argv)
            if unknown:
                message = f"unrecognized arguments: {' '.join(unknown)}"
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _unknown_flags(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """The words of ``argv`` that look like flags and that no parser of the command knows
    (``parser``, the sub-command that failed, and the parsers above it share ``argv``)."""
    known = set(parser._option_string_actions)
    todo = [Parser.root] if Parser.root is not None else [parser]
    while todo:  # every parser of the command: a flag of a parent step is no typo
        p = todo.pop()
        known |= set(p._option_string_actions)
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                todo += list(action.choices.values())
    flags = [w.split("=", 1)[0] for w in argv if w.startswith("-") and w != "-"
             and not _number(w)]
    return [f for f in flags if f not in known and f != "--"]


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True


def existing_file(path: str) -> str:
    """A path naming a regular file (its content is checked by its reader)."""
    if not Path(path).is_file():
        kind = "a directory, not a file" if Path(path).is_dir() else "no such file"
        raise argparse.ArgumentTypeError(f"{kind}: {path}")
    return path


def existing_dir(path: str) -> str:
    """A path naming a directory that exists."""
    if not Path(path).is_dir():
        kind = "a file, not a directory" if Path(path).is_file() else "no such directory"
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
