"""How a specsim step runs as a process of the workflow: which ``specsim`` command Snakemake's
shell jobs find, how a step stops when Snakemake (or SLURM) stops it, and what a point job
keeps out of its start-up."""

from __future__ import annotations

import os
import signal
import sys

__all__ = ["exit_on_sigterm", "hide_pandas", "put_on_path"]


def put_on_path() -> None:
    """Put the directory of the running interpreter -- where pip installed the ``specsim``
    command beside it -- first on PATH, so Snakemake's shell jobs run this installation's
    ``specsim`` whether or not the venv is activated, and no absolute path enters a rule."""
    here = os.path.dirname(sys.executable)
    if os.environ.get("PATH", "").split(os.pathsep)[0] != here:
        os.environ["PATH"] = os.pathsep.join([here, os.environ.get("PATH", "")])


def exit_on_sigterm() -> None:
    """Turn SIGTERM (Snakemake's and SLURM's kill) into ``SystemExit(143)``, so ``finally``
    blocks run: a step killed while writing removes its temporary file
    (:func:`specsim.io.atomic_path`) instead of leaving it beside the output."""
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))


class _NoPandas:
    """Import finder that reports pandas as absent (see :func:`hide_pandas`)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"pandas is not loaded in point jobs ({name})", name=name)


def hide_pandas() -> None:
    """A point job writes two one-row Parquet files and never needs pandas, but pyarrow's
    pandas shim imports it on the first ``pa.array`` call when it is installed -- about half
    of a point job's start-up. Point jobs run one per grid point, so they hide it."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
