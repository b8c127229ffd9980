"""One workaround for Snakemake's job scheduler: at most one pending re-evaluation timer.

The problem (Snakemake 8.17 to at least 9.27, ``snakemake/scheduling/job_scheduler.py``). With
a job rate limit (``--max-jobs-per-timespan``, default ``100/1s``, so always), every pass of
the scheduler loop that finds ready jobs ends with ``_schedule_reevalutation(timespan)``: a new
``threading.Timer`` that wakes the loop one timespan later. Every finished job also wakes the
loop, and that pass starts a timer too; when the timer fires, its pass starts the next one. So
each job that finishes while other jobs wait for a core starts a chain of once-a-second passes
that lives until the last job has started, and every pass resets the parameters and resources
of *all* waiting jobs and runs the job selector over them. After k finished jobs with n waiting,
the loop does k passes of O(n) work a second: on the default grid (114 points, 2 cores) 6857
passes in a 136 s run, a third of a core taken from the simulations; on a 10^4-point grid it
grows without bound.

The fix: a timer is started only if none is pending that fires no later (the pass it triggers
re-arms the next one whenever jobs still wait, so the rate limit is enforced exactly as before),
and timers are daemon threads, so Snakemake's exit does not wait up to a timespan for the last
one. Nothing else changes: the same passes select the same jobs, only the redundant ones go.
Measured by ``make bench`` (``benchmarks/bench_dag.py``); tested in
``tests/test_snakemake_patch.py``.

Applied by ``workflow/rules/common.smk`` when the Snakefile loads (in every Snakemake process
that runs the workflow). If a Snakemake release renames the method or fixes the loop, this
does nothing and says so in its return value; the workflow's results never depend on it.
"""

from __future__ import annotations

import threading
import time
from typing import Any

_MARK = "_specsim_coalesced"
_STATE_LOCK = threading.Lock()


def coalesce_reevaluation_timers() -> bool:
    """Patch ``JobScheduler._schedule_reevalutation`` (Snakemake's spelling) in place.

    Returns True if the patch is (now or already) in place, False if this Snakemake has no
    such method or no ``_open_jobs`` semaphore to release (nothing is changed then).
    """
    try:
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    original = getattr(JobScheduler, "_schedule_reevalutation", None)
    if original is None:
        return False
    if getattr(original, _MARK, False):
        return True

    def _schedule_reevalutation(self: Any, delay: float) -> None:
        if not hasattr(self, "_open_jobs"):  # not the scheduler this patch was written for
            original(self, delay)
            return
        deadline = time.monotonic() + float(delay)
        with _STATE_LOCK:
            pending = getattr(self, "_specsim_next_wakeup", None)
            if pending is not None and pending <= deadline:
                return  # an earlier wake-up is already due; its pass re-arms if needed
            self._specsim_next_wakeup = deadline

        def wake() -> None:
            with _STATE_LOCK:
                if getattr(self, "_specsim_next_wakeup", None) == deadline:
                    self._specsim_next_wakeup = None
            self._open_jobs.release()

        timer = threading.Timer(float(delay), wake)
        timer.daemon = True
        timer.start()

    setattr(_schedule_reevalutation, _MARK, True)
    _schedule_reevalutation.__doc__ = original.__doc__
    JobScheduler._schedule_reevalutation = _schedule_reevalutation  # type: ignore[method-assign]
    return True
