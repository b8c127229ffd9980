"""The first commands a new user runs that start Snakemake: the README's dry run prints the
shell commands through the default profile, and `snakemake --lint` finds only the expected lint
(tests/architecture/test_first_hour.py: make setup, make clean, provenance)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALLOWED_LINT = "Specify a conda environment or container for each rule."


def snakemake_lints(text: str) -> list[tuple[str, str]]:
    """(what, lint title) for every lint in `snakemake --lint`'s text output."""
    found, what = [], ""
    for line in text.splitlines():
        if line.startswith("Lints for "):
            what = line.removeprefix("Lints for ").split(" (")[0].rstrip(":")
        elif line.startswith("    * "):
            found.append((what, line.removeprefix("    * ").removesuffix(":")))
    return found


@pytest.mark.parametrize("profile", ["default", "none"])
def test_readme_dry_run_uses_the_profile(profile: str, tmp_path: Path) -> None:
    """`.venv/bin/snakemake -n` as the README and the docs show it (repository root, no
    profile flag): the shell commands are printed (printshellcmds). With --workflow-profile
    none they are not, so it is the profile that prints them."""
    from conftest import SNAKEMAKE

    flags = [] if profile == "default" else ["--workflow-profile", "none"]
    res = subprocess.run([SNAKEMAKE, "-n", "-d", str(tmp_path), "--configfile",
                          "tests/data/tiny.yaml", *flags], cwd=REPO, capture_output=True,
                         text=True, timeout=300, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    printed = "specsim point --job" in res.stdout
    if profile == "default":
        assert "Using workflow specific profile profiles/default" in res.stderr
        assert printed
    else:
        assert "profiles/default" not in res.stderr
        assert not printed


def test_snakemake_lint() -> None:
    """`snakemake --lint` only asks for a conda env or container per rule: software comes from
    the pinned venv (docs/reference/deployment.md), which its linter does not know. Any other
    lint fails here (and `make lint`)."""
    from conftest import SNAKEMAKE

    res = subprocess.run([SNAKEMAKE, "--lint", "-s", str(REPO / "Snakefile")], cwd=REPO,
                         capture_output=True, text=True, timeout=300, check=False)
    out = res.stdout + res.stderr
    lints = snakemake_lints(out)
    assert res.returncode == 0 or lints, out[-3000:]  # a crash is not a lint
    assert [x for x in lints if x[1] != ALLOWED_LINT] == [], out[-3000:]
