"""MkDocs hooks: the pages generated when the site is built.

``<!-- specsim:config-reference -->`` in a page becomes the configuration reference, written
from the schema by :func:`specsim.configdoc.markdown`; ``<!-- specsim:cli-reference -->`` the
``--help`` of ``specsim`` and of every sub-command, as argparse prints it (100 columns).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "workflow/schemas/config.schema.yaml"


def config_reference() -> str:
    from specsim import configdoc

    return configdoc.markdown(configdoc.load(SCHEMA))


def _commands(parser: argparse.ArgumentParser, prog: str) -> Iterator[tuple[str, str]]:
    yield prog, parser.format_help()
    for action in parser._actions:  # argparse keeps its sub-commands nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, f"{prog} {name}")


def cli_reference() -> str:
    from specsim.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal's width
    parser, _ = build_parser()
    out = []
    for prog, text in _commands(parser, "specsim"):
        level = "#" * min(2 + prog.count(" "), 4)
        out += [f"{level} `{prog}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(out)


MARKERS = {"<!-- specsim:config-reference -->": config_reference,
           "<!-- specsim:cli-reference -->": cli_reference}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    for marker, make in MARKERS.items():
        if marker in markdown:
            markdown = markdown.replace(marker, make())
    return markdown
