"""Full disks for the disk-full tests, unit and workflow alike: a tmpfs of a given size (root
only), filled to the last bytes, and the temporaries a step must not leave behind."""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(tmp_path: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (root only; skipped elsewhere: the monkeypatched tests cover it)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(disk)],
                          capture_output=True, check=False)
    if os.geteuid() != 0 or done.returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def fill(disk: Path, leave: int = 0) -> None:
    """Fill ``disk`` (a tmpfs) but ``leave`` bytes, with one file."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        if leave:
            free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
            os.posix_fallocate(fd, 0, free - leave)
            return
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as err:
        assert err.errno == errno.ENOSPC
    finally:
        os.close(fd)


def no_temporaries(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.endswith(".tmp")]

