"""Provenance: the software that wrote a file (point files, grid.json)."""

from __future__ import annotations

import functools
import platform
import re

import numpy as np
import pyarrow as pa

import specsim

NOT_INSTALLED = "not installed"
# PEP 508: a requirement starts with its project name; extras, versions, markers follow.
_REQUIREMENT_NAME = re.compile(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)")


def _canonical_name(name: str) -> str:
    """PEP 503 normalised project name: lower case, runs of -_. as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(requirement: str) -> str | None:
    """Project name of one requirement string (``'snakemake>=9; extra == "workflow"'`` ->
    ``'snakemake'``); None for a blank line or a comment."""
    m = _REQUIREMENT_NAME.match(requirement)
    return _canonical_name(m.group(1)) if m else None


@functools.cache
def _versions(dist: str) -> tuple[tuple[str, str], ...]:
    import importlib.metadata  # here, not at the top: a point job never scans the metadata

    try:
        requires = importlib.metadata.requires(dist) or []
    except importlib.metadata.PackageNotFoundError:
        requires = []  # running from a source tree that was never installed
    names = {n for r in requires if (n := requirement_name(r)) is not None} - {dist}
    found = {"python": platform.python_version(), dist: specsim.__version__}
    for name in names:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = NOT_INSTALLED
    return tuple(sorted(found.items()))


def point_versions() -> dict[str, str]:
    """The software that shapes a point file's numbers, read from the imported modules (a
    point job cannot afford :func:`versions`' ~0.3 s metadata scan; grid.json has the full
    list)."""
    return {"numpy": np.__version__, "pyarrow": pa.__version__,
            "python": platform.python_version(), "specsim": specsim.__version__}


def versions(dist: str = "specsim") -> dict[str, str]:
    """Version of python, of specsim (the code imported) and of every package specsim's
    distribution requires, extras included (snakemake, pytest, torch, ...), sorted by name.

    Names come from ``importlib.metadata.requires``, so a dependency added to pyproject.toml
    is recorded without editing this list; one that is not installed is recorded as
    ``"not installed"``, never an error.
    """
    return dict(_versions(dist))
