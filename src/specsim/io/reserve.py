"""Room kept for Snakemake's own bookkeeping, so a disk that fills during a run ends it in one line.

A job that meets a full disk stops with one line naming the file it was writing
(:class:`~specsim.io.atomic.DiskFullError`, said by the CLI). Snakemake then records the failed
job's metadata under ``.snakemake/``; on the full disk that write fails too, and its
"Error recording metadata ... Please ensure write permissions" ends the run instead of the job's
line (and hides that the cause was space). So:

1. the workflow's main process holds :data:`RESERVE_BYTES` of real blocks in :data:`RESERVE`
   before any job runs (:func:`hold_reserve`);
2. the job that meets the full disk frees them and leaves its line in :data:`NOTE`
   (:func:`release_reserve`, from the CLI's disk-full handler): Snakemake has room for its
   metadata and ends the run as an ordinary failed run;
3. the workflow's ``onerror:`` handler prints that line last, with what to do
   (:func:`disk_full_note`); when Snakemake's own write fails first (a disk filled from outside
   the run) the main process's exit handler says the same from the free space it sees
   (:func:`full_at_exit`).

Everything here is relative to the job's working directory, which Snakemake makes the
workflow's (on a cluster node too); a ``specsim`` command run by hand elsewhere finds no reserve
and does nothing. Every step is best effort: none may turn a disk-full line into a traceback.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path

from specsim.io.atomic import DiskFullError, disk_full, disk_full_line, free_bytes, no_room

RESERVE = Path(".snakemake") / "specsim-reserve"
NOTE = Path(".snakemake") / "specsim-disk-full"
RESERVE_BYTES = 2 << 20  # a failed run's metadata, incomplete markers and log lines: ~10 KB/job
ADVICE = "free some space and rerun (every finished job is kept; the run resumes there)"


def _allocate(fd: int, size: int) -> None:
    """Real blocks, not a sparse file: posix_fallocate where the file system has it."""
    try:
        os.posix_fallocate(fd, 0, size)
        return
    except (AttributeError, OSError) as err:
        if disk_full(err):
            raise
    os.ftruncate(fd, 0)
    block = b"\0" * (1 << 16)
    for _ in range(size // len(block)):
        os.write(fd, block)


def hold_reserve(directory: str | os.PathLike[str] = ".") -> None:
    """Hold :data:`RESERVE_BYTES` in ``directory``'s :data:`RESERVE` (kept when it is whole
    already) and forget an earlier run's :data:`NOTE`. Raises :class:`DiskFullError` naming the
    reserve when there is no room for it; any other OS error (a read-only checkout asked for a
    dry run, say) leaves the run as it was."""
    path = Path(directory) / RESERVE
    (Path(directory) / NOTE).unlink(missing_ok=True)
    try:
        if path.stat().st_blocks * 512 >= RESERVE_BYTES:
            return
    except OSError:
        pass
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            _allocate(fd, RESERVE_BYTES)
        finally:
            os.close(fd)
    except OSError as err:
        if disk_full(err):
            path.unlink(missing_ok=True)
            raise DiskFullError(err.errno, os.strerror(err.errno), str(path)) from None


def release_reserve(line: str, directory: str | os.PathLike[str] = ".") -> bool:
    """Free the reserve (a job met a full disk) and leave ``line`` for the run's last word;
    the first job to do so keeps its line. Whether a reserve was found."""
    path = Path(directory) / RESERVE
    try:
        path.unlink()
    except OSError:
        return False
    try:
        fd = os.open(Path(directory) / NOTE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:  # another job's line is there already (or no room even now)
        return True
    try:
        os.write(fd, line.encode("utf-8", "replace"))
    except OSError:
        pass
    finally:
        os.close(fd)
    return True


def met_full_disk(err: OSError) -> str:
    """A job met a full disk: free the run's reserve (Snakemake's metadata gets room to end
    the run) and leave the job's line for the run's end. The line (without the program's name)."""
    line = disk_full_line(err.filename)
    release_reserve(line)
    return line


def disk_full_note(directory: str | os.PathLike[str] = ".") -> str | None:
    """The run's one line when a job of it met a full disk (and said so), else None; read
    once (the note is removed)."""
    path = Path(directory) / NOTE
    try:
        line = path.read_text(encoding="utf-8", errors="replace").strip()
        path.unlink()
    except OSError:
        return None
    return f"specsim: {line or 'disk full'}; {ADVICE}"


def full_at_exit(directory: str | os.PathLike[str] = ".", below: int = 64 << 10) -> str | None:
    """The one line for a run that ends on a disk with fewer than ``below`` bytes free to this
    user (Snakemake's own write met the full disk first, so no job left a note), else None."""
    free = free_bytes(directory)
    if free is None or free >= below:
        return None
    where = os.path.abspath(directory)
    return f"specsim: disk full: {where} has {free:,} bytes free; {ADVICE}"


def room_to_start(directory: str | os.PathLike[str] = ".", need: int = 4 << 20) -> str | None:
    """Why a run cannot start in ``directory`` (:func:`~specsim.io.atomic.no_room`: ``need``
    bytes for Snakemake's locks and logs, plus the reserve when it is not held yet), or None."""
    try:
        held = min((Path(directory) / RESERVE).stat().st_blocks * 512, RESERVE_BYTES)
    except OSError:
        held = 0
    return no_room(directory, need + RESERVE_BYTES - held)


class RunGuard:
    """The workflow's main process through one run, its one line on a full disk last.

    :meth:`start` from ``onstart:`` holds the reserve (or stops the run in one line);
    :meth:`ended` from ``onsuccess:``/``onerror:``; :meth:`at_exit` from :mod:`atexit`, after
    Snakemake's own closing lines: a failed run prints the line a job left (it met the full
    disk), and a run that ended neither way (Snakemake's own write met the full disk, so it
    raised), or a failed run whose job's shell could not even open its log, the free space
    it sees when that is under :func:`full_at_exit`'s bound."""

    def __init__(self, directory: str | os.PathLike[str] = ".") -> None:
        self.directory = os.path.abspath(directory)  # Snakemake leaves -d's directory at exit
        self.started = False
        self.outcome: bool | None = None  # True: succeeded, False: failed, None: neither

    def start(self) -> None:
        try:
            hold_reserve(self.directory)
        except DiskFullError as err:
            sys.exit(f"specsim: {err}; {ADVICE}")
        self.started = True

    def ended(self, failed: bool) -> None:
        self.outcome = not failed

    def at_exit(self) -> None:
        if not self.started:
            return
        line = disk_full_note(self.directory)
        if self.outcome is not True and (line := line or full_at_exit(self.directory)):
            print(line, file=sys.stderr)


_GUARDS: dict[str, RunGuard] = {}


def run_guard(directory: str | os.PathLike[str] = ".") -> RunGuard:
    """The one :class:`RunGuard` of ``directory`` in this process, its :meth:`~RunGuard.at_exit`
    registered once (Snakemake may read the workflow's files more than once)."""
    where = os.path.abspath(directory)
    if where not in _GUARDS:
        _GUARDS[where] = RunGuard(where)
        atexit.register(_GUARDS[where].at_exit)
    return _GUARDS[where]
