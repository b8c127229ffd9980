"""What one point job needs -- peak memory and core-seconds -- estimated before it runs.

Every exact law and every simulation states what it allocates and computes as a function of its
sizes (states, draft length, chains per chunk): each scheme module beside its ``law``/``play``
(:meth:`specsim.schemes.Scheme.footprint`), each family beside its long run
(:meth:`specsim.families.Family.long_run_footprint`), the classic rules' DP beside it
(:func:`specsim.exact.footprints.round_dp_footprint`); each measure adds up what its job runs
(:meth:`specsim.measures.Measure.footprint`), and :mod:`specsim.work` checks every point job's
total against the memory it may declare before any job runs.

A :class:`Footprint` counts float64 cells alive at the peak (temporaries included), floating-point
operations and simulated chain-rounds; the constants below turn them into bytes and
core-seconds. They are calibrated against point jobs run alone (``benchmarks/point_memory.py``
prints estimate vs measured peak RSS; ``tests/unit/config/test_resources.py`` holds the estimate an
upper bound within a factor on small cases).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["BASE_BYTES", "BASE_SECONDS", "FLOPS_PER_CORE_SECOND", "ROUNDS_PER_CORE_SECOND",
           "Footprint", "human_bytes", "measure_job"]

CELL = 8  # bytes of a float64 (and of an intp)
# Peak RSS of a point job whose arrays are negligible: the interpreter, numpy, pyarrow and the
# point file writer (measured 95-110 MB; benchmarks/point_memory.py).
BASE_BYTES = 130e6
ROUNDS_PER_CORE_SECOND = 1e6  # measured order of magnitude (make bench: 1-5 M rounds/s at γ = 4)
# Dense linear algebra of the exact stage (matrix products, SVD, least squares) on one core;
# deliberately low (a cautious estimate): an SVD runs well below a matrix product's rate.
# Memory-bound steps (gathers, comparisons, sorting) count ~10 operations per element touched.
FLOPS_PER_CORE_SECOND = 2e9
BASE_SECONDS = 1.0  # starting a point job: the interpreter, its imports, writing two files


def human_bytes(n: float) -> str:
    """``550 GB``, ``2.1 GB``, ``480 MB`` (decimal units, as Snakemake's ``mem_mb``)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n / 1e3:.3g} kB"


@dataclass(frozen=True)
class Footprint:
    """Peak float64 ``cells`` alive at once, ``flops`` and simulated ``rounds`` of a step,
    and ``what`` the step is (the one holding the peak names it in refusals)."""

    cells: float = 0.0
    flops: float = 0.0
    rounds: float = 0.0
    what: str = ""

    @property
    def bytes(self) -> float:
        """Peak resident memory of a job running this step: its arrays and the interpreter."""
        return BASE_BYTES + CELL * self.cells

    @property
    def seconds(self) -> float:
        """Core-seconds of a job running this step: starting it, its arithmetic and its
        simulated rounds."""
        return (BASE_SECONDS + self.flops / FLOPS_PER_CORE_SECOND
                + self.rounds / ROUNDS_PER_CORE_SECOND)

    def then(self, *steps: Footprint) -> Footprint:
        """This step, then ``steps``, one after the other: the peak is the largest, the work
        adds up; ``what`` is the step holding the peak."""
        every = (self, *steps)
        top = max(every, key=lambda s: s.cells)
        return Footprint(top.cells, sum(s.flops for s in every), sum(s.rounds for s in every),
                         top.what)

    def plus(self, *held: Footprint) -> Footprint:
        """This step while ``held`` arrays stay alive: cells and work add up."""
        every = (self, *held)
        return Footprint(sum(s.cells for s in every), sum(s.flops for s in every),
                         sum(s.rounds for s in every), self.what)

    def named(self, what: str) -> Footprint:
        return Footprint(self.cells, self.flops, self.rounds, what)

    def repeated(self, times: float) -> Footprint:
        """This step run ``times`` times over the same arrays: the work multiplies."""
        return Footprint(self.cells, self.flops * times, self.rounds * times, self.what)


_CHILD = """
import json, resource, sys, time
from specsim import job
t0 = time.process_time()
with open(sys.argv[4], "w") as log:
    job.run(json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], log)
# VmHWM: this process image's own peak (ru_maxrss also keeps the parent's peak across the exec)
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")]
rss = int(hwm[0].split()[1]) if hwm else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"rss": rss * 1024, "cpu": time.process_time() - t0}))
"""


def measure_job(desc: dict[str, Any]) -> tuple[float, float]:
    """(peak resident bytes, CPU seconds) of one point job (:func:`specsim.job.run` on its
    description) run alone in a fresh interpreter: what its :class:`Footprint` estimates
    (Linux ``VmHWM``; calibration and tests only, never in a run)."""
    import subprocess  # calibration and tests only: not in a point job's start-up
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(desc), f"{tmp}/s.parquet",
                              f"{tmp}/e.parquet", f"{tmp}/log"], capture_output=True, text=True,
                             check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    return float(got["rss"]), float(got["cpu"])
