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
names each (its pid and the files it writes) and waits for them to finish, counting down (at
most :data:`WAIT` s), with the one command that stops them at once; past the wait it prints
that command and exits 2 (``make run`` stops). Otherwise it exits 1: no lock, or a Snakemake
that is alive (named, with its pid). It sees this machine's
processes only: where runs start from several hosts on a shared filesystem, unlock by hand.
"""

from __future__ import annotations

import itertools
import os
import shlex
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


#: Flags whose value a job writes (the steps' outputs), named when a killed run's job is waited for.
OUTPUT_FLAGS = ("--sim", "--exact", "--out", "--out-dir", "--meta", "--table", "--beta-table",
                "--schedule", "--shortcut", "--config-md", "--figures-dir")
#: Seconds ``make run`` waits for a killed run's jobs (``SPECSIM_RESUME_WAIT`` overrides):
#: past it, it names the one command that stops them and exits 2.
WAIT = 900.0
STILL_RUNNING = 2  # exit status: the killed run's jobs still run (stop them, then rerun)


def outputs_of(pid: int) -> list[str]:
    """What the job ``pid`` writes: the values of its :data:`OUTPUT_FLAGS` (through ``bash
    -c "..."``), as its command line gives them."""
    try:
        argv = (_PROC / str(pid) / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    words: list[str] = []
    for arg in (a.decode(errors="replace") for a in argv):
        if " " not in arg:
            words.append(arg)
            continue
        try:  # a shell's script (Snakemake runs a rule's shell line with bash -c)
            words += shlex.split(arg)
        except ValueError:
            words += arg.split()
    return [w for flag, w in itertools.pairwise(words) if flag in OUTPUT_FLAGS]


def _jobs_line(jobs: list[tuple[int, str]]) -> str:
    """The jobs by what they write (a job's shell and its specsim process write the same)."""
    by_output: dict[str, list[int]] = {}
    for pid, cmd in jobs:
        out = outputs_of(pid)
        key = f"writing {', '.join(out)}" if out else cmd[:60]
        by_output.setdefault(key, []).append(pid)
    return "; ".join(f"pid{'s' if len(pids) > 1 else ''} {', '.join(map(str, pids))} {what}"
                     for what, pids in by_output.items())


def _kill_command(jobs: list[tuple[int, str]]) -> str:
    return "kill " + " ".join(str(pid) for pid, _ in jobs)


def wait_for_jobs(workdir: str | os.PathLike[str], poll: float = 1.0,
                  limit: float | None = None, every: float = 10.0) -> bool:
    """Wait while the jobs a killed Snakemake left run in ``workdir`` (no Snakemake there, its
    lock still held): name each (pid, what it writes) and how to stop them, then count down
    every ``every`` s. True once they are gone; False at ``limit`` s (default :data:`WAIT`,
    or ``SPECSIM_RESUME_WAIT``), having printed the one command that stops them."""
    limit = float(os.environ.get("SPECSIM_RESUME_WAIT", WAIT)) if limit is None else limit
    start = last = time.monotonic()
    said = False
    while lock_files(workdir) and not _snakemake_runs(workdir):
        jobs = runs_in(workdir)
        if not jobs:
            if said:
                print(f"specsim: {workdir}: the killed run's jobs have finished", file=sys.stderr)
            return True
        now = time.monotonic()
        left = limit - (now - start)
        if left <= 0:
            print(f"specsim: {workdir}: {len(jobs)} job(s) of the killed run still run after "
                  f"{limit:.0f} s ({_jobs_line(jobs)}); stop them with: {_kill_command(jobs)} "
                  f"-- then rerun the same command (their outputs are redone)", file=sys.stderr)
            return False
        if not said or now - last >= every:
            what = (f"{len(jobs)} job(s) of a killed run still run here ({_jobs_line(jobs)})"
                    if not said else f"{len(jobs)} job(s) still running")
            print(f"specsim: {workdir}: {what}; waiting for them before unlocking, "
                  f"{int(left)} s left (to stop them now: {_kill_command(jobs)})",
                  file=sys.stderr, flush=True)
            said, last = True, now
        time.sleep(poll)
    return True


def main(argv: list[str] | None = None, poll: float = 1.0) -> int:
    """Exit 0 when the lock is stale (unlock), 1 when it is not (no lock, or a live
    Snakemake, named), :data:`STILL_RUNNING` when a killed run's jobs outlived the wait
    (:func:`wait_for_jobs`: the command that stops them is printed). The jobs are waited for
    because they write outputs a resumed run must not race; a live Snakemake is never waited
    for."""
    workdir = (sys.argv[1:] if argv is None else argv or ["."])[0]
    try:
        if not wait_for_jobs(workdir, poll):
            return STILL_RUNNING
    except KeyboardInterrupt:
        jobs = runs_in(workdir)
        stop = f"; stop them with: {_kill_command(jobs)}" if jobs else ""
        print(f"specsim: {workdir}: not unlocked{stop}", file=sys.stderr)
        return STILL_RUNNING
    stale, why = stale_lock(workdir)
    if stale or lock_files(workdir):
        print(f"specsim: {why}", file=sys.stderr)
    return 0 if stale else 1


if __name__ == "__main__":
    sys.exit(main())
