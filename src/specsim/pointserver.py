"""The warm worker behind ``specsim-point`` (:mod:`specsim_point`): warm runners, one job each
at a time.

``python -m specsim.pointserver SOCKET`` is a dispatcher: it listens on a Unix socket (mode
0600) and, for every client, takes an idle *runner* or starts one, hands it the client's
arguments and its stdin/stdout/stderr (SCM_RIGHTS), and sends the job's exit status back to the
client. A runner (``python -m specsim.pointserver --runner FD SOCKET``) imports what a point
job needs once (numpy, pyarrow, scipy, the engine, the exact stage, the schemes), then runs jobs
one after another: ``specsim point ARGS`` -- :func:`specsim.cli.main`, the code an in-process
job runs -- with the client's descriptors as its stdio, so output files, log lines and exit
status are the same. If the client disappears first (Snakemake killed the job), its runner is
killed. A runner retires after ``RUNNER_JOBS`` jobs (a fresh one replaces it).

Why long-lived runners and not a fork of a warm parent per job (this module's first design):
a forked child starts with none of its own memory mapped, and every array of a simulation
page-faults its way in; a runner reuses the memory of its previous jobs, as one process
running many points does. Measured on 40 default grid points: 8-15% less simulation time.
Nothing leaks from one job into the next: each runs under a fresh warnings state, the
package's caches are keyed by content (table files by path, size and mtime), and numbers are
a function of the job's description alone (tested: a runner's files are byte-identical to an
in-process job's, in any order).

The dispatcher exits after ``SPECSIM_POINT_SERVER_IDLE`` seconds (default 10) without a job,
removing its socket; its runners exit when their socket closes. A second dispatcher for the same
socket exits at once (an exclusive lock beside the socket).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import socket
import subprocess
import sys
import threading
import time
import traceback
import warnings

__all__ = ["serve"]

RUNNER_JOBS = 500  # jobs per runner before it retires (bounds what a long run can accumulate)


def _warm_up() -> None:
    """Import everything a point job imports, before the first job."""
    from specsim import cli

    cli._without_pandas()
    import importlib

    # scipy.stats/special: specsim.stats imports them on first use (figures never do)
    for name in ("pyarrow.parquet", "scipy.stats", "scipy.special", "specsim.job", "specsim.io",
                 "specsim.measures",
                 "specsim.schemes.block", "specsim.schemes.multi_draft",
                 "specsim.schemes.tokenwise", "specsim.schemes.confidence",
                 "specsim.schemes.heuristic", "specsim.schemes.lenient",
                 "specsim.schemes.typical"):
        importlib.import_module(name)


def _read_request(conn: socket.socket) -> tuple[bytes, list[int]]:
    """A request as :mod:`specsim_point` sends it (the arguments' count, then each argument,
    all NUL-terminated) and the three stdio fds that came with it."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    while b"\0" not in data or data.count(b"\0") < int(data.split(b"\0", 1)[0]) + 1:
        chunk = conn.recv(1 << 16)
        if not chunk:
            for fd in fds:
                os.close(fd)
            raise OSError("the other end closed the connection mid-request")
        data += chunk
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        raise OSError(f"expected the client's 3 stdio descriptors, got {len(fds)}")
    return data, list(fds)


# --- the runner ----------------------------------------------------------------------------


def _run_job(argv: list[str], fds: list[int], own: list[int]) -> int:
    """Run one job with ``fds`` as stdin/stdout/stderr; put the runner's own stdio back."""
    from specsim.cli import main

    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        with warnings.catch_warnings():  # a warning shown in one job is shown in the next too
            code = main(["point", *argv])
    except SystemExit as err:  # argparse: usage errors exit 2
        code = err.code if isinstance(err.code, int) else 1
    except Exception:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        for target, fd in enumerate(own):
            os.dup2(fd, target)  # the client's descriptors are closed: it sees EOF on exit
    return code


def run_runner(fd: int) -> None:
    """A runner's life: warm up, then one job per request until the dispatcher hangs up."""
    sock = socket.socket(fileno=fd)
    own = [os.dup(i) for i in range(3)]
    _warm_up()
    while True:
        try:
            request, fds = _read_request(sock)
        except (OSError, ValueError):
            os._exit(0)  # the dispatcher retired this runner or went away
        argv = [os.fsdecode(a) for a in request.split(b"\0")[1:-1]]
        code = _run_job(argv, fds, own)
        try:
            sock.sendall(f"{code}\n".encode())
        except OSError:
            os._exit(0)


# --- the dispatcher ------------------------------------------------------------------------


class _Runner:
    def __init__(self, path: str) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "specsim.pointserver", "--runner", str(theirs.fileno()),
             path], pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=True)
        theirs.close()
        self.sock, self.jobs = mine, 0

    def retire(self) -> None:
        self.sock.close()  # the runner exits on EOF
        self.proc.wait()

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        self.sock.close()


class _Pool:
    def __init__(self, path: str) -> None:
        self.path, self.idle, self.busy = path, [], 0
        self.lock = threading.Lock()

    def take(self) -> _Runner:
        with self.lock:
            self.busy += 1
            if self.idle:
                return self.idle.pop()
        return _Runner(self.path)

    def give_back(self, runner: _Runner | None) -> None:
        with self.lock:
            self.busy -= 1
            if runner is not None and runner.jobs < RUNNER_JOBS:
                self.idle.append(runner)
                return
        if runner is not None:
            runner.retire()

    def close(self) -> None:
        with self.lock:
            idle, self.idle = self.idle, []
        for runner in idle:
            runner.retire()


def _reply(runner: _Runner, conn: socket.socket) -> bytes | None:
    """The runner's exit-status line for the job it was sent; None if the runner died first, or
    the client did (Snakemake killed the job)."""
    reply = b""
    while not reply.endswith(b"\n"):
        ready, _, _ = select.select([conn, runner.sock], [], [])
        if runner.sock in ready:
            chunk = runner.sock.recv(64)
            if not chunk:
                return None
            reply += chunk
        elif not conn.recv(1):
            return None
    return reply


def _serve_client(conn: socket.socket, pool: _Pool) -> None:
    """Hand one client's job to a runner; send back its status; kill it if the client goes
    (with no reply, a client whose runner died runs the job itself)."""
    with conn:
        try:
            request, fds = _read_request(conn)
        except (OSError, ValueError):
            return  # the client went away mid-request: no runner was taken
        runner: _Runner | None = None
        reply = None
        try:
            try:
                runner = pool.take()
                socket.send_fds(runner.sock, [request], fds)  # forwarded as the client sent it
            finally:
                for fd in fds:
                    os.close(fd)
            reply = _reply(runner, conn)
        except OSError:
            pass
        if reply is None:
            if runner is not None:
                runner.kill()
            pool.give_back(None)
            return
        with contextlib.suppress(OSError):
            conn.sendall(reply.strip())
        conn.close()  # the client reads to EOF: do not make it wait for the bookkeeping
        assert runner is not None
        runner.jobs += 1
        pool.give_back(runner)


def serve(path: str, idle: float) -> None:
    lock_file = open(f"{path}.lock", "w")  # noqa: SIM115 (held for the worker's lifetime)
    try:
        fcntl.flock(lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return  # another worker serves this socket
    pool = _Pool(path)
    pool.give_back(pool.take())  # start the first runner's warm-up now
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
    last = time.monotonic()
    try:
        while True:
            try:
                conn, _ = srv.accept()
            except TimeoutError:
                with pool.lock:
                    busy = pool.busy > 0
                if busy:
                    last = time.monotonic()
                elif time.monotonic() - last > idle:
                    return
                continue
            last = time.monotonic()
            conn.settimeout(None)
            threading.Thread(target=_serve_client, args=(conn, pool), daemon=True).start()
    finally:
        srv.close()
        for leftover in (path, f"{path}.lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(leftover)
        pool.close()
        lock_file.close()


if __name__ == "__main__":
    if sys.argv[1] == "--runner":
        run_runner(int(sys.argv[2]))
    else:
        serve(sys.argv[1], float(os.environ.get("SPECSIM_POINT_SERVER_IDLE", "10")))
