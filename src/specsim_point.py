"""``specsim-point``: one grid point's job (``specsim point``), started in ~30 ms, not ~500.

A point job imports numpy and pyarrow (~0.45 s of its ~0.5 s on this machine) to compute for a
fraction of a second, and a default run has a hundred of them. This client -- the standard
library only, kept outside the ``specsim`` package so that importing it does not import numpy --
hands its arguments and its stdin/stdout/stderr to a warm worker (:mod:`specsim.pointserver`)
whose runners have imported everything once and run one job after another; a runner runs exactly
``specsim point ARGS`` (:func:`specsim.cli.main`) with the client's file descriptors, so its log
lines, exit status and output files are those of an in-process run. The first client of a
working directory starts the worker; it exits after a few idle seconds.

Nothing depends on the worker: if it cannot be reached or started, or dies during a job, the
client runs the job itself, in process (point jobs are idempotent and write their files
atomically). ``SPECSIM_POINT_SERVER=0`` always runs in process. A worker serves one interpreter,
one working directory and one installed copy of the package (its socket's name hashes all three,
with every module's mtime and size), so a reinstall or an edit never reaches an old worker.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time

__all__ = ["main", "socket_path"]

START_TIMEOUT = 20.0  # seconds to wait for a worker this client started to accept


def _package_dir() -> str:
    """The specsim package beside this module (pip installs both into site-packages; a source
    tree has both under src/) -- found without importing it."""
    pkg = os.path.join(os.path.dirname(os.path.abspath(__file__)), "specsim")
    if not os.path.isfile(os.path.join(pkg, "__init__.py")):
        raise OSError(f"no specsim package beside {__file__}")
    return pkg


def socket_path() -> str:
    """The worker's socket for this interpreter, working directory and installed package."""
    pkg = _package_dir()
    h = hashlib.sha256()
    for part in (sys.executable, os.getcwd(), pkg):
        h.update(part.encode() + b"\0")
    for root, dirs, files in os.walk(pkg):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".py"):
                st = os.stat(os.path.join(root, name))
                h.update(f"{root}/{name}:{st.st_mtime_ns}:{st.st_size}\0".encode())
    tmp = os.environ.get("TMPDIR") or "/tmp"
    return os.path.join(tmp, f"specsim-point-{os.getuid()}-{h.hexdigest()[:20]}.sock")


def _connect(path: str, wait: float = 0.0) -> socket.socket | None:
    deadline = time.monotonic() + wait
    while True:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.connect(path)
            return s
        except OSError:
            s.close()
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.02)


def _start_worker(path: str) -> None:
    import subprocess

    subprocess.Popen([sys.executable, "-m", "specsim.pointserver", path],
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def _via_worker(argv: list[str]) -> int | None:
    """The job's exit status from a worker; None when no worker ran it to the end."""
    path = socket_path()
    conn = _connect(path)
    if conn is None:
        _start_worker(path)
        conn = _connect(path, wait=START_TIMEOUT)
        if conn is None:
            return None
    with conn:
        # their count, then the arguments, each NUL-terminated (json would cost a tenth of the
        # client's start-up); the three file descriptors ride along (SCM_RIGHTS)
        request = b"".join(os.fsencode(a) + b"\0" for a in [str(len(argv)), *argv])
        socket.send_fds(conn, [request], [0, 1, 2])
        reply = b""
        while chunk := conn.recv(64):
            reply += chunk
    try:
        return int(reply)
    except ValueError:  # the worker went away mid-job
        return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if os.environ.get("SPECSIM_POINT_SERVER", "1") != "0" and args and args[0] not in (
            "-h", "--help"):
        try:
            status = _via_worker(args)
        except OSError:
            status = None
        if status is not None:
            return status
    from specsim.cli import main as cli_main

    return cli_main(["point", *args])


if __name__ == "__main__":
    raise SystemExit(main())
