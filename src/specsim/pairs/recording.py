"""Recording traces resumably: the one writer both backends' recorders use.

A recording writes one trace file per pair (``paths``: the n-grams record several pairs from one
text, transformers one), the backend making the documents a batch at a time (``make``). Each
finished batch of each pair goes atomically to ``<trace>.parts/`` as a trace file whose metadata
carry the recording's key (:func:`record_key`: the digest of everything that shapes the
documents) and its first document. A rerun after a kill reuses every part of its key that every
pair has, and records the other documents in batches of consecutive ones; at the end the parts
are combined into the traces (written atomically) and removed. A lock refuses a second recorder
of the same traces (:func:`exclusive`), and nothing but a trace may sit where one is written
(:func:`make_room`); errors name the output's command-line flag (``flag``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from specsim.errors import InputError
from specsim.io import payload_digest
from specsim.io.atomic import TEMPORARY_SUFFIX
from specsim.traces.format import Trace, TraceFileError, concat_traces, read_trace, write_trace

#: ``make(documents)``: each pair's trace of those documents (consecutive indices), in order.
Make = Callable[[list[int]], dict[str, Trace]]


@dataclass(frozen=True)
class Recorded:
    """What a recording did: the files, batches recorded now and parts reused from an earlier
    run (each counts a batch of every pair once), the traces written (none when it stopped)."""

    paths: dict[str, Path]
    recorded: int
    reused: int
    traces: dict[str, Trace] = field(default_factory=dict)


def record_key(shaping: dict[str, Any]) -> str:
    """The key of a recording: sha256 of the canonical JSON of what shapes its documents."""
    return payload_digest(shaping)


def record_traces(paths: dict[str, Path], make: Make, documents: int, batch: int, key: str,
                  meta: dict[str, dict[str, Any]], *, flag: str,
                  say: Callable[[str], None] | None = None,
                  stop_after: int | None = None) -> Recorded:
    """Record ``documents`` documents of every pair into ``paths`` (module docstring),
    ``batch`` at a time; ``meta[pair]``: the trace's metadata (``documents`` and ``vocab`` are
    filled in from the parts). ``stop_after``: record at most that many batches, then stop
    before combining (what a killed job leaves behind). ``say``: progress lines."""
    say = say or (lambda line: None)
    pairs = list(paths)
    parts = {pair: path.with_name(path.name + ".parts") for pair, path in paths.items()}
    with exclusive(paths[pairs[0]], flag):
        make_room(paths, parts, flag)
        done = _reusable(parts, key, documents)
        for first, traces in sorted(done.items()):
            say(f"record: documents {first}-{first + traces[pairs[0]].n_docs - 1} reused")
        held = {first + i for first, t in done.items() for i in range(t[pairs[0]].n_docs)}
        reused, recorded = len(done), 0
        for ds in _batches([d for d in range(documents) if d not in held], batch):
            if stop_after is not None and recorded >= stop_after:
                return Recorded(paths, recorded, reused)
            traces = make(ds)
            for pair in pairs:
                traces[pair].meta.update(record_key=key, first_document=ds[0])
                write_trace(parts[pair] / f"part-{ds[0]:05d}.parquet", traces[pair])
            done[ds[0]] = traces
            recorded += 1
            say(f"record: documents {ds[0]}-{ds[-1]} recorded "
                f"({sum(t[pairs[0]].n_docs for t in done.values())}/{documents})")
        out = {}
        for pair in pairs:
            blocks = [done[first][pair] for first in sorted(done)]
            vocab = max(t.vocab for t in blocks)
            out[pair] = concat_traces(blocks, {**meta[pair], "vocab": vocab})
            write_trace(paths[pair], out[pair])
            shutil.rmtree(parts[pair])
        return Recorded(paths, recorded, reused, out)


def _batches(todo: Sequence[int], size: int) -> list[list[int]]:
    """``todo`` cut into runs of consecutive documents, each cut into batches of ``size``."""
    out: list[list[int]] = []
    for d in todo:
        if out and out[-1][-1] == d - 1 and len(out[-1]) < size:
            out[-1].append(d)
        else:
            out.append([d])
    return out


def _reusable(parts: dict[str, Path], key: str, documents: int) -> dict[int, dict[str, Trace]]:
    """The parts of an earlier run with this key, by first document: those every pair has,
    inside 0..documents - 1, not overlapping an earlier one (else: recorded again)."""
    found: dict[int, dict[str, Trace]] = {}
    for pair, d in parts.items():
        for path in sorted(d.glob("part-*.parquet")):
            try:
                trace = read_trace(path)
            except TraceFileError:
                continue
            first = trace.meta.get("first_document")
            if trace.meta.get("record_key") == key and isinstance(first, int):
                found.setdefault(first, {})[pair] = trace
    out: dict[int, dict[str, Trace]] = {}
    end = 0
    for first in sorted(found):
        traces = found[first]
        sizes = {t.n_docs for t in traces.values()}
        if len(traces) == len(parts) and len(sizes) == 1 and first >= end \
                and first + (n := sizes.pop()) <= documents:
            out[first] = traces
            end = first + n
    return out


def make_room(paths: dict[str, Path], parts: dict[str, Path], flag: str) -> None:
    """The traces' directory and each pair's parts directory exist, and nothing that is not a
    trace file sits where one is written; InputError naming the path otherwise."""
    for path in paths.values():
        if path.is_dir():
            raise InputError(f"{path} is a directory, where the trace is written; remove it "
                             f"or give another {flag}")
    for d in parts.values():
        if d.exists() and not d.is_dir():
            raise InputError(f"{d} is a file, where the recorder keeps its finished parts; "
                             f"remove it")
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"{flag} {d.parent}: cannot create {d.name} in it "
                             f"({err.strerror or type(err).__name__}); give a writable "
                             f"directory") from None


@contextmanager
def exclusive(path: Path, flag: str) -> Iterator[None]:
    """Hold the lock of the recording that writes ``path`` (``.<name>.lock.tmp`` beside it, a
    temporary ``specsim verify`` skips): a second recorder of the same traces is refused,
    naming the first one's pid, instead of both writing the same parts. The lock goes with
    its holder (``flock``): a killed recorder leaves none that binds."""
    lock = path.with_name(f".{path.name}.lock{TEMPORARY_SUFFIX}")
    while True:
        fd = _open_lock(lock, flag)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise InputError(f"{path}: another recorder (pid {holder}) is writing this trace; "
                             f"wait for it to finish (its finished parts are kept) or stop "
                             f"it: kill {holder}") from None
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # its holder finished and removed it: take the lock afresh
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.unlink(lock)  # still held: whoever opened it before finds it gone, and retries
        os.close(fd)


def _open_lock(lock: Path, flag: str) -> int:
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as err:
        raise InputError(f"{flag} {lock.parent}: cannot write in it "
                         f"({err.strerror or type(err).__name__}); give a writable "
                         f"directory") from None
