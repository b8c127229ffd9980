"""Resuming after ``kill -9``: is the Snakemake lock in a working directory stale?

A Snakemake run locks its working directory (``.snakemake/locks/*.lock``, the files it reads
and writes) and unlocks it when it ends -- unless it is killed with SIGKILL (``kill -9``, the
OOM killer, a lost machine). The next run then stops with "Directory cannot be locked" until
``snakemake --unlock`` deletes the lock files. Unlocking is safe when no run is using the
directory: it deletes only the lock files (no result, no metadata), every output is written
atomically (a killed job leaves no half file under its name), and ``--rerun-incomplete`` (on in
the profiles) redoes the jobs the killed run left unfinished.

``python -m specsim.resume [DIR]`` (``make run`` calls it first) exits 0 -- "unlock" -- only
when DIR holds lock files and no process of this user on this machine runs Snakemake or a
specsim job there. A killed Snakemake's jobs outlive it: when they are all that runs there, it
waits for them to finish. Otherwise it exits 1: no lock, or a Snakemake that is alive (named,
with its pid). It sees this machine's
processes only: where runs start from several hosts on a shared filesystem, unlock by hand.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

_PROC = Path("/proc")
_RUNNERS = ("snakemake", "specsim")  # Snakemake itself, and the jobs it starts


def lock_files(workdir: str | os.PathLike[str]) -> list[Path]:
    return sorted((Path(workdir) / ".snakemake" / "locks").glob("*.lock"))


def _ancestors() -> set[int]:
    """This process and its parents (`make run`'s shells mention specsim too)."""
    pids, pid = set(), os.getpid()
    while pid > 1 and pid not in pids:
        pids.add(pid)
        try:
            stat = (_PROC / str(pid) / "stat").read_text()
            pid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return pids


def runs_in(workdir: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """(pid, command line) of every process running Snakemake or a specsim step with
    ``workdir`` as its working directory (Snakemake changes into its -d directory), other
    than this one and its parents. Processes of other users, whose working directory cannot
    be read, are not counted."""
    here = os.path.realpath(workdir)
    mine = _ancestors()
    found = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) in mine:
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:  # gone meanwhile, or another user's
            continue
        # program names: the basename of every word (`bash -c "specsim point ..."` too)
        words = [os.path.basename(w) for a in argv for w in a.decode(errors="replace").split()]
        if cwd == here and any(w.startswith(_RUNNERS) for w in words):
            found.append((int(entry.name), " ".join(words)[:120]))
    return sorted(found)


def stale_lock(workdir: str | os.PathLike[str]) -> tuple[bool, str]:
    """(True, why) when ``workdir``'s Snakemake lock is left over from a killed run."""
    locks = lock_files(workdir)
    if not locks:
        return False, f"{workdir}: not locked"
    alive = runs_in(workdir)
    if alive:
        pid, cmd = alive[0]
        return False, (f"{workdir}: locked by a run that is still going (pid {pid}: {cmd}); "
                       f"not unlocking -- wait for it or stop it")
    return True, (f"{workdir}: Snakemake lock left by a killed run ({len(locks)} lock files, no "
                  f"snakemake or specsim process runs there): unlocking")


def _snakemake_runs(workdir: str | os.PathLike[str]) -> list[tuple[int, str]]:
    return [(pid, cmd) for pid, cmd in runs_in(workdir)
            if any(w.startswith("snakemake") for w in cmd.split())]


def main(argv: list[str] | None = None, poll: float = 1.0) -> int:
    """Exit 0 when the lock is stale (unlock), else 1. Jobs of a killed run with no Snakemake
    left in the directory are waited for (they finish on their own, writing outputs a resumed
    run must not race); a live Snakemake is never waited for: it is named and 1 returned."""
    workdir = (sys.argv[1:] if argv is None else argv or ["."])[0]
    said = False
    while lock_files(workdir) and runs_in(workdir) and not _snakemake_runs(workdir):
        if not said:
            pid, cmd = runs_in(workdir)[0]
            print(f"specsim: {workdir}: waiting for the jobs a killed run left (pid {pid}: "
                  f"{cmd}) to finish before unlocking", file=sys.stderr)
            said = True
        time.sleep(poll)
    stale, why = stale_lock(workdir)
    if stale or lock_files(workdir):
        print(f"specsim: {why}", file=sys.stderr)
    return 0 if stale else 1


if __name__ == "__main__":
    sys.exit(main())
