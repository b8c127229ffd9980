"""What a new user meets in the first hour: provenance records every dependency's version."""

from __future__ import annotations

import importlib.metadata
import platform

import pytest

import specsim
from specsim import io


# --- versions(): every dependency, from the distribution's metadata ---------------------------
@pytest.mark.parametrize(("requirement", "name"), [
    ("numpy>=2.0", "numpy"),
    ('snakemake>=9; extra == "workflow"', "snakemake"),
    ("PyYAML>=6", "pyyaml"),
    ("huggingface_hub==2.4.0 ; extra == 'llm'", "huggingface-hub"),
    ("requests[socks] (>=2) ; python_version < '4'", "requests"),
    ("zope.interface", "zope-interface"),
    ("  torch==2.13.0", "torch"),
    ("# a comment", None),
    ("", None),
])
def test_requirement_name(requirement: str, name: str | None) -> None:
    assert io.requirement_name(requirement) == name


def test_versions_records_every_requirement() -> None:
    v = io.versions()
    assert list(v) == sorted(v)
    assert all(isinstance(k, str) and isinstance(x, str) and x for k, x in v.items())
    assert v["python"] == platform.python_version()
    assert v["specsim"] == specsim.__version__  # the code imported, not some installed copy
    for name in ("numpy", "pandas", "pyarrow", "matplotlib", "pyyaml", "jsonschema"):
        assert v[name] == importlib.metadata.version(name)
    try:
        requires = importlib.metadata.requires("specsim") or []
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("specsim is not installed: no requirements to compare with")
    names = {io.requirement_name(r) for r in requires}
    assert names <= set(v)
    assert "snakemake" in v  # an extra's requirement (workflow): recorded too


def test_versions_never_crashes_on_a_missing_package(monkeypatch: pytest.MonkeyPatch) -> None:
    reqs = ["numpy>=2", 'no-such-package-xyz>=1; extra == "test"', "Not_Installed.Either"]
    monkeypatch.setattr(importlib.metadata, "requires", lambda dist: reqs)
    io._versions.cache_clear()
    try:
        v = io.versions()
    finally:
        io._versions.cache_clear()
    assert v["no-such-package-xyz"] == v["not-installed-either"] == io.NOT_INSTALLED
    assert v["numpy"] == importlib.metadata.version("numpy")
    assert list(v) == ["no-such-package-xyz", "not-installed-either", "numpy", "python",
                       "specsim"]


def test_versions_without_an_installed_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(dist: str) -> list[str]:
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "requires", missing)
    io._versions.cache_clear()
    try:
        assert io.versions() == {"python": platform.python_version(),
                                 "specsim": specsim.__version__}
    finally:
        io._versions.cache_clear()
