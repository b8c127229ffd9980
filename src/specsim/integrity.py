"""``specsim verify``: every file the DAG wrote under results/, re-checked; each damaged one named
with the command that rebuilds it.

Every file a step writes goes through :func:`specsim.io.atomic_path`, which seals it with a
``<file>.sha256`` sidecar: point files, ``points.parquet``, ``grid.json``, tables and their
Markdown and HTML, figures, traces, the real-text and LLM outputs, ``checks.ok``. This step
checks

* every file against its sidecar, byte for byte (bit rot with the mtime kept included), and
  every sidecar whole (a flip in it is damage too); a file without a sidecar, and a sidecar
  whose file is gone, are damage;
* what verifies itself, with its own reader: ``grid.json`` (its checksum and config digest)
  and, for every point of that grid, both point files -- present, readable, and written for
  this grid's identity of the point (not stale, not another point's);
* every file ``manifest.txt`` lists (:data:`MANIFEST`: what the last run of the whole DAG
  built, one path a line) is there -- a table deleted with its sidecar is damage too.

It skips atomic_path's temporaries (a write killed before its rename: nothing reads them) and
files written outside the DAG (:data:`OUTSIDE_DAG`; ``make report`` seals the report, which is
then checked). The gate (``specsim gate``) runs it before writing ``results/checks.ok``, and
``make verify`` runs it alone.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specsim.io import (
    IntegrityError,
    check_sidecar,
    checksum_path,
    is_sidecar,
    is_temporary,
    read_verified,
)

# Files under results/ that no job of the DAG writes: the committed README; the report and the
# report's screenshots (`make report`, `make test-report`), checked only when sealed.
OUTSIDE_DAG = ("README.md",)
SEALED_IF_PRESENT = ("report.html", "report-screenshots")
# Every file the DAG builds, one path a line relative to the directory holding results/, written
# (sealed) by the workflow's manifest rule; the gate depends on it instead of on every output.
MANIFEST = "manifest.txt"
# The command a report names to rebuild damaged files: `make run`'s, unless the workflow's main
# process put its own run's command in the environment (snakemake_command).
DEFAULT_SNAKEMAKE = ".venv/bin/snakemake --cores 8"
RERUN_ENV = "SPECSIM_SNAKEMAKE"


@dataclass(frozen=True)
class Damage:
    path: str  # as found, under the results directory given
    target: str  # the file to rebuild, relative to the workflow's working directory
    problem: str


def _problem(err: Exception, path: Path) -> str:
    """An IntegrityError's message without the file name and the generic advice."""
    text = str(err).removeprefix(f"{path}: ")
    return text.split("; delete it", 1)[0].split("; rerun snakemake", 1)[0]


def _files(base: Path, unreadable: list[Path], seen: set[str] | None = None) -> list[Path]:
    """Every non-directory under ``base``, sorted, through symlinked directories (results/sim
    on scratch space) but each directory once (a link loop ends); directories that cannot be
    listed go to ``unreadable`` (their files would otherwise go unchecked), the real path of
    every directory walked to ``seen``."""
    out, seen = [], set() if seen is None else seen
    for root, dirs, names in os.walk(base, followlinks=True,
                                     onerror=lambda e: unreadable.append(Path(e.filename))):
        seen.add(os.path.realpath(root))
        dirs[:] = sorted(d for d in dirs if os.path.realpath(os.path.join(root, d)) not in seen)
        seen.update(os.path.realpath(os.path.join(root, d)) for d in dirs)
        out += [Path(root) / n for n in sorted(names)]
    return out


def damaged_files(results_dir: str | os.PathLike[str], skip: tuple[str, ...] = (),
                  only: set[str] | None = None) -> list[Damage]:
    """Every damaged, missing or unsealed file under ``results_dir`` (``skip``: paths not to
    check, e.g. the gate's own output while the gate runs; ``only``: the targets to check, the
    files that exist among them, when not every file)."""
    base = Path(results_dir)
    workdir_name = Path(base.name)  # targets are relative to the directory holding results/
    skipped = {Path(s).resolve() for s in skip}
    wanted = None if only is None else {(base / Path(t).relative_to(workdir_name)).resolve()
                                        for t in only if Path(t).parts[:1] == workdir_name.parts}

    def unchecked(path: Path) -> bool:
        if not skipped and wanted is None:
            return False
        where = path.resolve()
        return where in skipped or (wanted is not None and where not in wanted)

    found: dict[Path, Damage] = {}

    def damage(path: Path, problem: str) -> None:
        rel = path.relative_to(base)
        found.setdefault(path, Damage(str(path), str(workdir_name / rel), problem))

    unreadable: list[Path] = []
    walked: set[str] = set()
    files = _files(base, unreadable, walked)
    links = _links_out(files, walked)
    for path in files:
        rel = path.relative_to(base)
        if is_temporary(path) or rel.parts[0] in OUTSIDE_DAG:
            continue
        if path in links and not unchecked(path):
            damage(path, links[path])
            continue
        if is_sidecar(path):
            data = Path(str(path).removesuffix(checksum_path("").name))
            if not data.is_file() and not data.is_symlink() and not unchecked(data):
                damage(data, "missing (its .sha256 sidecar is still there)")
            continue
        if unchecked(path):
            continue
        if not path.is_file():  # a FIFO, device or dangling link: never opened (it may block)
            damage(path, "not a regular file")
            continue
        if rel.parts[0] in SEALED_IF_PRESENT and not checksum_path(path).exists():
            continue
        try:
            check_sidecar(path)
        except IntegrityError as err:
            damage(path, _problem(err, path))
    for folder in unreadable:
        found.setdefault(folder, Damage(str(folder), str(workdir_name / folder.relative_to(base)),
                                        "directory cannot be listed: its files are unchecked"))
    grid, sim, exact = ((base / name).resolve() for name in ("grid.json", "sim", "exact"))
    readers = wanted is None or any(  # files that verify themselves, through their readers
        w == grid or w.is_relative_to(sim) or w.is_relative_to(exact) for w in wanted)
    for path, problem in {**_listed(base, set(found)),
                          **(_self_verifying(base, set(found), unchecked) if readers else {})
                          }.items():
        if not unchecked(path):
            damage(path, problem)
    return sorted(found.values(), key=lambda d: d.path)


def _links_out(files: list[Path], walked: set[str]) -> dict[Path, str]:
    """The files that are links to a place outside the tree walked (``walked``: the real paths
    of its directories, symlinked ones included): a symbolic link whose target lies outside,
    or a hard link with more names than the tree holds. Either lets a file outside results/
    change (or be vouched for by) a result; each is named with where it leads."""
    out: dict[Path, str] = {}
    names: dict[tuple[int, int], int] = {}
    stats = {}
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue  # dangling: named as not a regular file
        stats[path] = st
        names[(st.st_dev, st.st_ino)] = names.get((st.st_dev, st.st_ino), 0) + 1
    for path, st in stats.items():
        if path.is_symlink():
            target = os.path.realpath(path)
            if os.path.dirname(target) not in walked:
                out[path] = f"a symbolic link to {target}, outside the results tree"
        elif st.st_nlink > names[(st.st_dev, st.st_ino)]:
            out[path] = (f"a hard link: {st.st_nlink} names, "
                         f"{st.st_nlink - names[(st.st_dev, st.st_ino)]} of them outside the "
                         f"results tree")
    return out


def _listed(base: Path, known: set[Path]) -> dict[Path, str]:
    """Files :data:`MANIFEST` lists that are gone (``known``: already found damaged; a damaged
    manifest is not read)."""
    manifest = base / MANIFEST
    if not manifest.is_file() or manifest in known:
        return {}
    # "results/tables/x.csv" -> <base>/tables/x.csv, wherever the results directory now is
    listed = (base.joinpath(*Path(line).parts[1:])
              for line in manifest.read_text(encoding="utf-8").splitlines() if line)
    return {path: f"missing (listed in {base / MANIFEST})" for path in listed
            if path not in known and not path.exists()}


def _built(base: Path) -> set[str] | None:
    """What :data:`MANIFEST` lists (paths relative to the directory holding ``base``), when it
    is there and whole; else None (unknown)."""
    manifest = base / MANIFEST
    try:
        text = read_verified(manifest).decode("utf-8")
    except (OSError, IntegrityError, UnicodeDecodeError):
        return None
    return {str(Path(base.name, *Path(line).parts[1:])) for line in text.splitlines() if line}


def write_manifest(path: str | os.PathLike[str], files: list[str]) -> None:
    """:data:`MANIFEST`: ``files`` (paths relative to the workflow's working directory), one a
    line, sorted, sealed."""
    from specsim.io import write_text

    write_text(path, "".join(f"{f}\n" for f in sorted(set(files))))


def _self_verifying(base: Path, known: set[Path], unchecked: Callable[[Path], bool]
                    ) -> dict[Path, str]:
    """grid.json and every point file of its grid, each through its own reader (``known``:
    files already found damaged, not read again; ``unchecked``: files not to read)."""
    from specsim.config import read_grid_file
    from specsim.io import read_point_file
    from specsim.job import describe
    from specsim.measures import measure_of

    grid_path = base / "grid.json"
    if not grid_path.exists() or grid_path in known:
        return {}
    try:
        grid = read_grid_file(grid_path)
    except IntegrityError as err:
        return {grid_path: _problem(err, grid_path)}
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        return {grid_path: f"does not hold a valid grid ({type(err).__name__})"}
    out: dict[Path, str] = {}
    for point in grid.points:
        measure = measure_of(point.measure)
        want = None  # the point's digest, computed once it is needed
        for folder, kind in (("sim", measure.sim_schema), ("exact", measure.exact_schema)):
            path = base / folder / f"{point.path}.parquet"
            if path in known or unchecked(path):
                continue
            want = want or describe(grid, point)["digest"]
            if not path.exists():
                out[path] = f"missing (grid point {point.point_id})"
                continue
            try:
                row: dict[str, Any] = read_point_file(path, kind, want)
            except IntegrityError as err:
                out[path] = _problem(err, path)
                continue
            if row["point_id"] != point.point_id:
                out[path] = f"holds point {row['point_id']}, not {point.point_id}"
    return out


def snakemake_command(snakefile: str | os.PathLike[str], workdir: str | os.PathLike[str],
                      configfiles: list[Any], cores: object) -> str:
    """The command that reruns a workflow run, from any directory: its Snakefile, working
    directory and config files spelled out -- or :data:`DEFAULT_SNAKEMAKE` for a run in the
    repository on its own config.yaml (`make run`). The workflow's main process puts it in the
    environment (:data:`RERUN_ENV`) for its jobs' reports."""
    if Path(workdir).resolve() == Path(snakefile).resolve().parent and not configfiles:
        return DEFAULT_SNAKEMAKE
    parts = [str(Path(sys.executable).with_name("snakemake")), "-s", str(snakefile), "-d",
             str(workdir), *(["--configfile", *map(str, configfiles)] if configfiles else []),
             "--cores", str(cores)]
    return shlex.join(parts)


def report(damage: list[Damage], note: str = "", snakemake: str | None = None,
           built: set[str] | None = None) -> str:
    """Each damaged file on a line of its own, then, on the last line, the one command that
    rebuilds them all (``--forcerun`` reruns the jobs that write them and what reads them).
    Files no job of the run writes (``built``: what :data:`MANIFEST` lists, when known) are
    named to be deleted instead: Snakemake would refuse them as not in the DAG."""
    ours = os.environ.get(RERUN_ENV)
    snakemake = snakemake or ours or DEFAULT_SNAKEMAKE
    lines = [f"DAMAGED {d.path}: {d.problem}" for d in damage]
    strays = {d.path for d in damage if built is not None and d.target not in built}
    targets = " ".join(sorted({d.target for d in damage if d.path not in strays}))
    if strays:
        lines.append(f"{len(strays)} of them no job writes (not in {MANIFEST}): delete "
                     f"{'it' if len(strays) == 1 else 'them'}: rm -- {shlex.join(sorted(strays))}")
    if not targets:
        return "\n".join(lines)
    where = ("" if ours else " from the directory holding results/, with the -s/--configfile "
             "options of the run that wrote them (a file the config no longer builds, which "
             "Snakemake refuses as not in the DAG, can be deleted instead)")
    lines.append(f"{len(damage) - len(strays)} damaged file(s){note}. Rebuild them{where}"
                 + (f"; so many that rebuilding everything may be simpler: {snakemake} --forceall"
                    if len(damage) > 20 else "") + ":")
    lines.append(f"{snakemake} --forcerun {targets}")
    return "\n".join(lines)


def verify(results_dir: str | os.PathLike[str], skip: tuple[str, ...] = ()) -> int:
    """Check ``results_dir``; name every damaged file on stderr and the command that rebuilds
    them, and withdraw ``checks.ok`` (nothing may keep claiming success over damaged results).
    Exit status 1 when anything is damaged, else 0."""
    return _refuse(results_dir, damaged_files(results_dir, skip))


def verify_inputs(results_dir: str | os.PathLike[str], reads: set[str], rebuilt: set[str]
                  ) -> int:
    """:func:`verify` before a run's jobs start, for what they would read: the damaged files
    under ``results_dir`` that a job of the run reads (``reads``, paths relative to the
    working directory) and no job of it rewrites (``rebuilt``). A job reading one would stop
    at the first it met, naming only that one; this names them all, with the command. A
    missing file is not among them: the run rebuilds it (``all`` lists missing files)."""
    damage = [d for d in damaged_files(results_dir, only=reads - rebuilt)
              if os.path.lexists(d.path)]
    return _refuse(results_dir, damage, " that this run's jobs would read")


def _refuse(results_dir: str | os.PathLike[str], damage: list[Damage], what: str = "") -> int:
    if not damage:
        return 0
    ok = Path(results_dir) / "checks.ok"
    withdrawn = ""
    if ok.exists():
        ok.unlink()
        checksum_path(ok).unlink(missing_ok=True)
        withdrawn = f"; {ok} removed"
    print(report(damage, what + withdrawn, built=_built(Path(results_dir))), file=sys.stderr)
    return 1


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``verify`` step of the ``specsim`` command line (:mod:`specsim.cli`)."""
    v = sub.add_parser("verify", help="re-check every file under results/; name the damaged",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    v.add_argument("--results-dir", default="results", metavar="DIR",
                   help="the directory the workflow writes (default: results)")
    v.set_defaults(run=_run)
    return v


def _run(args: argparse.Namespace) -> int:
    if not Path(args.results_dir).is_dir():
        print(f"specsim verify: error: no such directory: {args.results_dir}", file=sys.stderr)
        return 2
    status = verify(args.results_dir)
    if status == 0:
        print(f"done: verify, every file under {args.results_dir} verified", file=sys.stderr)
    return status
