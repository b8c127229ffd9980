"""The warm worker behind ``specsim-point`` (:mod:`specsim_point`): one fork per point job.

``python -m specsim.pointserver SOCKET`` imports what a point job needs once (numpy, pyarrow,
the engine, the exact stage, the schemes), listens on a Unix socket (mode 0600) and, for every
client, forks a child that takes over the client's stdin/stdout/stderr (passed over the socket,
SCM_RIGHTS) and runs ``specsim point ARGS`` -- :func:`specsim.cli.main`, the code an in-process
job runs, so output files, log lines and exit status are the same. The parent sends the child's
exit status back; if the client disappears first (Snakemake killed the job), the child is
killed. Forks happen in the main thread; one waiter thread per running child. The worker exits
after ``SPECSIM_POINT_SERVER_IDLE`` seconds (default 10) without a job, removing its socket. A
second worker for the same socket exits at once (an exclusive lock beside the socket).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import socket
import sys
import threading
import time
import traceback

__all__ = ["serve"]


def _warm_up() -> None:
    """Import everything a point job imports, before the first fork."""
    from specsim import cli

    cli._without_pandas()
    import importlib

    # scipy.stats/special: specsim.stats imports them on first use (figures never do)
    for name in ("pyarrow.parquet", "scipy.stats", "scipy.special", "specsim.job", "specsim.io", "specsim.simulate",
                 "specsim.reference", "specsim.schemes.measure", "specsim.schemes.block",
                 "specsim.schemes.multi_draft", "specsim.schemes.tokenwise",
                 "specsim.schemes.confidence", "specsim.schemes.heuristic",
                 "specsim.schemes.lenient", "specsim.schemes.typical"):
        importlib.import_module(name)


def _read_request(conn: socket.socket) -> tuple[list[str], list[int]]:
    """The client's arguments (their count, then each, NUL-terminated) and its stdio fds."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while b"\0" not in data or data.count(b"\0") < int(data.split(b"\0", 1)[0]) + 1:
        chunk = conn.recv(1 << 16)
        if not chunk:
            for fd in fds:
                os.close(fd)
            raise OSError("client closed the connection mid-request")
        data += chunk
    if len(fds) != 3:
        raise OSError(f"expected the client's 3 stdio descriptors, got {len(fds)}")
    return [os.fsdecode(a) for a in data.split(b"\0")[1:-1]], list(fds)


def _child(argv: list[str], fds: list[int]) -> None:
    """In the forked child: become the client's process (its stdio), run the job, exit."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        from specsim.cli import main

        code = main(["point", *argv])
    except SystemExit as err:  # argparse: usage errors exit 2
        code = err.code if isinstance(err.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _wait(conn: socket.socket, pid: int, jobs: list[int], lock: threading.Lock) -> None:
    """Send the child's exit status to the client; kill the child if the client goes away."""
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    try:
        while True:
            watch = [conn] + ([pidfd] if pidfd is not None else [])
            ready, _, _ = select.select(watch, [], [], 0.05 if pidfd is None else None)
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                with contextlib.suppress(OSError):
                    conn.sendall(str(os.waitstatus_to_exitcode(status)).encode())
                return
            if conn in ready and not conn.recv(1):  # the client was killed: so is its job
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return
    finally:
        if pidfd is not None:
            os.close(pidfd)
        conn.close()
        with lock:
            jobs[0] -= 1


def serve(path: str, idle: float) -> None:
    lock_file = open(f"{path}.lock", "w")  # noqa: SIM115 (held for the worker's lifetime)
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another worker serves this socket
    _warm_up()
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)  # a socket left by a worker that was killed
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        srv.bind(path)
    finally:
        os.umask(old)
    srv.listen(64)
    srv.settimeout(0.5)
    jobs, lock = [0], threading.Lock()
    last = time.monotonic()
    try:
        while True:
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                with lock:
                    busy = jobs[0] > 0
                if busy:
                    last = time.monotonic()
                elif time.monotonic() - last > idle:
                    return
                continue
            last = time.monotonic()
            conn.settimeout(None)
            try:
                argv, fds = _read_request(conn)
            except (OSError, ValueError):
                conn.close()
                continue
            pid = os.fork()
            if pid == 0:
                srv.close()
                conn.close()
                _child(argv, fds)
            for fd in fds:
                os.close(fd)
            with lock:
                jobs[0] += 1
            threading.Thread(target=_wait, args=(conn, pid, jobs, lock), daemon=True).start()
    finally:
        srv.close()
        for leftover in (path, f"{path}.lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
        lock_file.close()


if __name__ == "__main__":
    serve(sys.argv[1], float(os.environ.get("SPECSIM_POINT_SERVER_IDLE", "10")))
