"""What a new user meets in the first hour: `make setup` says what it is doing, `make clean`
removes every output and nothing else, and provenance records every dependency's version."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import specsim
from specsim import io
from specsim.io import provenance

REPO = Path(__file__).resolve().parents[2]
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make")
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="no git")


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
    provenance._versions.cache_clear()
    try:
        v = io.versions()
    finally:
        provenance._versions.cache_clear()
    assert v["no-such-package-xyz"] == v["not-installed-either"] == io.NOT_INSTALLED
    assert v["numpy"] == importlib.metadata.version("numpy")
    assert list(v) == ["no-such-package-xyz", "not-installed-either", "numpy", "python",
                       "specsim"]


def test_versions_without_an_installed_distribution(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(dist: str) -> list[str]:
        raise importlib.metadata.PackageNotFoundError(dist)

    monkeypatch.setattr(importlib.metadata, "requires", missing)
    provenance._versions.cache_clear()
    try:
        assert io.versions() == {"python": platform.python_version(),
                                 "specsim": specsim.__version__}
    finally:
        provenance._versions.cache_clear()


# --- make setup: one line per step before it starts, pip not silenced -------------------------
def _dry_run(target: str, tmp_path: Path) -> list[str]:
    """`make -n target` in a copy with no .venv, so every recipe line is printed, none run."""
    for f in ("Makefile", "pyproject.toml", "requirements.lock", "requirements-llm.lock"):
        shutil.copy(REPO / f, tmp_path / f)
    (tmp_path / "src").mkdir()
    # under `make test` the environment carries MAKELEVEL/MAKEFLAGS: a nested make would then
    # print "Entering directory" lines; this dry run must see what a user's top-level make does
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    out = subprocess.run(["make", "--no-print-directory", "-n", target, "PYTHON=python3"],
                         cwd=tmp_path, check=True, capture_output=True, text=True,
                         env=env).stdout
    return out.splitlines()


@needs_make
@pytest.mark.parametrize(("target", "prefix", "steps"), [
    ("setup", "setup", 3),
    (".venv/.specsim-llm-installed", "llm setup", 2),
])
def test_setup_announces_each_step(target: str, prefix: str, steps: int,
                                   tmp_path: Path) -> None:
    lines = _dry_run(target, tmp_path)
    if target != "setup":  # the llm extra's recipe comes after the base set-up's
        lines = lines[next(i for i, ln in enumerate(lines) if "llm setup:" in ln):]
    announced = [i for i, ln in enumerate(lines) if ln.startswith(f'echo "{prefix}: [')]
    assert [lines[i].split("[")[1].split("]")[0] for i in announced] == [
        f"{k}/{steps}" for k in range(1, steps + 1)]
    # each announcement comes before the command it announces, and each pip line is announced
    pips = [i for i, ln in enumerate(lines) if " -m pip install" in ln]
    assert pips and all(any(a < p for a in announced) for p in pips)
    assert announced[0] == 0
    for i in pips:
        assert "--quiet" not in lines[i] and " -q " not in lines[i]
        assert "--progress-bar off" in lines[i]
    assert any("min" in lines[i] for i in announced)  # how long the slow step takes


@needs_make
def test_make_test_checks_types_before_the_suite(tmp_path: Path) -> None:
    """`make test` (so CI) runs mypy, which reads its strict set from pyproject.toml, first."""
    lines = _dry_run("test", tmp_path)
    mypy = [i for i, ln in enumerate(lines) if ln.split(" ")[0].endswith("/bin/mypy")]
    suite = [i for i, ln in enumerate(lines) if " -m pytest" in ln]
    assert mypy and suite and max(mypy) < min(suite)
    assert "mypy==" in (REPO / "requirements.lock").read_text()  # what `make setup` installs


# --- make clean: every output, nothing committed ----------------------------------------------
# What the DAG, `make report` and `make llm` write (today's and the rewritten DAG's layout),
# plus a directory no rule makes yet: clean must not depend on a list of names.
OUTPUTS = [
    "results/sim/p0001.parquet", "results/exact/p0001.json", "results/shards/s0.parquet",
    "results/points.parquet", "results/grid.json", "results/tables/accept_curve.csv",
    "results/figures/roofline.png", "results/checks.ok", "results/realtext/costs.csv",
    "results/report.html", "results/llm/machine.json", "results/some_future_output/x.bin",
    "logs/simulate/s0.log", "benchmarks/out/figures.tsv",
]
KEEP = ["Makefile", ".gitignore", "src/specsim/__init__.py", "benchmarks/bench_engine.py",
        "notes.txt"]


def _tracked_results() -> list[str]:
    out = subprocess.run(["git", "ls-files", "results", "logs", "benchmarks/out"], cwd=REPO,
                         capture_output=True, text=True)
    return out.stdout.split() if out.returncode == 0 else ["results/README.md"]


def _checkout(tmp_path: Path, git: bool) -> tuple[Path, list[str]]:
    """A copy of the repository's Makefile, .gitignore and committed results files, committed
    to a fresh repository (or not, for the tarball case), with every output written after."""
    root = tmp_path / "repo"
    committed = _tracked_results()
    for rel in ["Makefile", ".gitignore", *committed]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, root / rel)
    for rel in ["src/specsim/__init__.py", "benchmarks/bench_engine.py"]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("# committed\n")
    if git:
        def g(*args: str) -> None:
            subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.org",
                            "-c", "init.defaultBranch=main", *args], cwd=root, check=True,
                           capture_output=True)
        g("init", "-q")
        g("add", "-A")
        g("commit", "-q", "-m", "committed files")
    (root / "notes.txt").write_text("untracked, not ignored, outside the output dirs\n")
    for rel in OUTPUTS:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("output\n")
    return root, committed


@needs_make
@pytest.mark.parametrize("git", [pytest.param(True, marks=needs_git), False],
                         ids=["git-checkout", "tarball"])
def test_clean_removes_every_output_and_nothing_committed(git: bool, tmp_path: Path) -> None:
    root, committed = _checkout(tmp_path, git)
    assert "results/README.md" in committed
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
    left = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                  if p.is_file() and ".git" not in p.relative_to(root).parts)
    assert left == sorted({*committed, *KEEP})
    assert not (root / "logs").exists() and not (root / "benchmarks/out").exists()
    assert sorted(p.name for p in (root / "results").iterdir()) == sorted(
        Path(c).name for c in committed if c.startswith("results/"))
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)  # idempotent


@needs_make
@needs_git
def test_clean_in_a_subdirectory_of_another_repository(tmp_path: Path) -> None:
    """An unpacked tarball inside some other git repository: that repository's ignore rules
    must not decide what clean deletes (the fallback runs, and still removes everything)."""
    root, committed = _checkout(tmp_path, git=False)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True, capture_output=True)
    subprocess.run(["make", "clean"], cwd=root, check=True, capture_output=True)
    assert not (root / "results/sim").exists() and not (root / "results/report.html").exists()
    assert all((root / c).exists() for c in committed)


# --- the docs' everyday commands get `make run`'s settings ----------------------------------
PROFILE = {"rerun-incomplete": True, "printshellcmds": True, "keep-going": False,
           "show-failed-logs": True, "scheduler": "greedy"}


def test_default_profile_is_where_snakemake_looks() -> None:
    """Snakemake reads a workflow profile without --workflow-profile only from
    profiles/default/ in the working directory or beside the Snakefile."""
    import yaml

    settings = yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())
    assert settings == PROFILE
    assert not (REPO / "workflow/profiles/default").exists()
    slurm = yaml.safe_load((REPO / "workflow/profiles/slurm/config.yaml").read_text())
    assert {k: slurm[k] for k in PROFILE} == PROFILE  # only one workflow profile is read
    run = next(ln for ln in (REPO / "Makefile").read_text().splitlines()
               if ln.startswith("\t$(SNAKEMAKE) --cores"))
    assert "--workflow-profile" not in run  # `make run` is the documented bare command
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        assert "workflow/profiles/default" not in page.read_text(), page


# --- software deployment: the pinned venv, and nothing that pretends otherwise -----------------


def test_no_conda_directive_left() -> None:
    """Rules run the `specsim` installed beside Snakemake's python; a conda: directive would
    name an environment no rule uses and `--sdm conda` was never tested. workflow/envs/ stays
    exactly as long as a rule file still names it (Snakemake records the file in each job's
    metadata and fails when it is missing): today none does."""
    rules = sorted((REPO / "workflow/rules").glob("*.smk"))
    with_conda = [p.name for p in rules if re.search(r"^\s+conda:", p.read_text(), re.M)]
    assert not with_conda, with_conda
    assert (REPO / "workflow/envs").exists() == bool(with_conda)
    assert "conda:" not in (REPO / "Snakefile").read_text()
    page = (REPO / "docs/reference/deployment.md").read_text()
    assert page.startswith("# Software deployment\n") and "requirements.lock" in page


# --- tables for people: HTML beside every CSV, one caption per table ---------------------------
def test_captions_are_written_from_the_declarations() -> None:
    """workflow/report/{tables,figures}/<name>.rst is exactly what `python -m specsim.report`
    writes from the declarations, one per declared table and figure."""
    from specsim import report

    root = REPO / report.CAPTION_DIR
    written = {str(p.relative_to(root)) for sub in report.GENERATED
               for p in (root / sub).glob("*.rst")}
    assert written == set(report.captions())
    for rel, text in report.captions().items():
        assert (root / rel).read_text(encoding="utf-8") == text, (
            f"{rel}: run python -m specsim.report")


def test_captions_are_plain_restructuredtext() -> None:
    """Snakemake's report renders the captions with docutils, which knows no Sphinx roles
    (a ``:mod:`` in cost_batch's caption printed "Unknown interpreted text role" and showed
    raw markup): every caption parses without a warning."""
    import docutils.core
    import docutils.utils

    from specsim import report

    for rel, text in report.captions().items():
        try:
            docutils.core.publish_doctree(
                text, settings_overrides={"report_level": 5, "halt_level": 2})
        except docutils.utils.SystemMessage as err:
            pytest.fail(f"{rel}: {err}")


def test_every_table_is_described() -> None:
    from specsim import outputs

    # a table is built by `specsim tables` (builder) or written by the step it names, not both
    assert all(bool(t.builder) != bool(t.step) for t in outputs.TABLES.values())
    stages = {t.stage for t in outputs.TABLES.values()} | {
        f.stage for f in outputs.FIGURES.values()}
    assert stages == {"", "realtext", "llm"}, stages
    paths = [t.path for t in outputs.TABLES.values()]
    assert len(paths) == len(set(paths)), "two declarations share a CSV"
    # the LLM tier's tables (timings, mostly) live beside its run's record, not in results/tables
    assert all(t.path.startswith("results/llm/") for t in outputs.stage_tables("llm"))
    for name, d in outputs.TABLES.items():
        assert d.name == name and d.title and d.about.endswith(".") and d.columns, name
        assert all(text and not text.endswith(".") for text in d.columns.values()), name
    for name, f in outputs.FIGURES.items():
        assert f.name == name and f.caption.endswith("."), name
        # a stage's figure reads declared tables of its own stage; a grid figure reads none
        assert all(outputs.table(r).stage == f.stage for r in f.reads) and (
            bool(f.reads) == bool(f.step)), name


def test_described_columns_are_the_tables_columns(tmp_path: Path) -> None:
    """Column descriptions name exactly the columns the tables have (the tables that need no
    simulation are built here; test_report.py compares every table of a real run)."""
    import pandas as pd
    import yaml
    from conftest import SCHEMA, TINY

    from specsim import outputs, report
    from specsim.config import load_grid

    grid = load_grid(yaml.safe_load(TINY.read_text()), SCHEMA)  # worked_example reads its config
    for name in (n for n, need in outputs.TABLE_NEEDS.items() if need is None):
        df = outputs.table(name).build()(grid, pd.DataFrame())
        assert report.undocumented(name, df.columns) == [], name
        assert all(any(outputs.table(name).describe(c) == text for c in df.columns)
                   for text in outputs.table(name).columns.values()), name


def test_html_table_page(tmp_path: Path) -> None:
    import pandas as pd

    from specsim import report

    df = pd.DataFrame({"check": ["a/b<c>", "d"], "source": ["x & y", "z"],
                       "passed": [True, False], "observed": ["1.5", "2"],
                       "expected": ["< 2", float("nan")]})
    report.write_html(df, "checks", tmp_path / "checks.html")
    page = (tmp_path / "checks.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    assert "a/<wbr>b&lt;c&gt;" in page and "x &amp; y" in page and "&lt; 2" in page
    assert page.count('<tr class="fail">') == 1 and ">FAIL<" in page and ">pass<" in page
    assert "1 of 2 FAILED" in page
    assert 'title="whether the claim holds"' in page
    for needle in ("<script", "src=", "href=", "@import", "url("):
        assert needle not in page
    report.write_html(df, "checks", tmp_path / "again.html")
    assert (tmp_path / "again.html").read_bytes() == page.encode()  # no timestamp


# --- SLURM: the docs say where the logs are, the timing rule gets a node to itself ------------
def test_slurm_profile_gives_the_timing_rule_a_node() -> None:
    import yaml

    slurm = yaml.safe_load((REPO / "workflow/profiles/slurm/config.yaml").read_text())
    costs = slurm["set-resources"]["realtext_costs"]
    assert "--exclusive" in costs["slurm_extra"]
    page = (REPO / "docs/howto/cluster.md").read_text()
    assert "logs/slurm/<rule>/<jobid>.log" not in page
    assert "logs/slurm/rule_<rule>/" in page and "group_<group>" in page
    assert "--exclusive" in page
