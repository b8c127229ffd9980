"""Wall-clock timings a reader can trust: the one home of every wall-clock figure the pipeline
writes (the LLM tier's costs, kernels and runs, the real-text costs).

:func:`measure` runs named callables **interleaved** -- repeat r calls each of them once (or
``number`` times back to back, for calls shorter than ``min_seconds``) in an order rotated by r
-- so a change in the machine's load hits every callable alike and ratios between them stay
paired. A figure is the **median** over the repeats, with its quartiles (:class:`Timing`); a
ratio is the median of the per-repeat ratios, with their quartiles (:func:`paired_ratio`).

Reliability: a timing whose repeats disagree -- interquartile range over median above
:data:`TOLERANCE` -- or that has fewer than :data:`MIN_REPEATS` repeats is *unreliable*.
:func:`measure` re-takes the whole interleaved set up to :data:`RETRIES` times while any of its
timings is unreliable and keeps the attempt with the fewest unreliable ones; what is still
unreliable is written with ``reliable = False`` beside it, never as a clean number.

The machine's 1-minute load average before and after, and its CPU count, go beside every
measurement (:class:`Load`): a timing taken at a load above the CPU count shares the cores.

The clock (:data:`clock`, ``time.perf_counter``) and the load (``os.getloadavg``) are
parameters, so the verdicts are tested with fake clocks.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: The clock of every wall-clock figure (seconds, monotonic, the finest the platform has).
clock: Callable[[], float] = time.perf_counter
#: Largest interquartile range / median of a reliable timing (the repeats agree within it).
TOLERANCE = 0.25
#: Fewest repeats whose quartiles say anything: fewer is unreliable whatever they show.
MIN_REPEATS = 3
#: Re-takes of an interleaved set while any of its timings is unreliable (then it is marked).
RETRIES = 2
#: A repeat of a callable lasts at least this long: calls shorter than it are repeated back to
#: back ``number`` times within a repeat (sized on the warm-up call), and the mean taken.
MIN_SECONDS = 2e-3
#: The repeat index a callable of :func:`measure` sees on its warm-up call.
WARMUP = -1


@dataclass(frozen=True)
class Timing:
    """One measured quantity over its repeats (seconds per call, or any per-repeat value: a
    ratio, seconds per token); the median is the figure, the quartiles its spread."""

    samples: tuple[float, ...]
    tolerance: float = TOLERANCE

    @classmethod
    def of(cls, samples: Sequence[float] | np.ndarray, tolerance: float = TOLERANCE) -> Timing:
        return cls(tuple(float(x) for x in np.asarray(samples, dtype=np.float64).ravel()),
                   tolerance)

    def _q(self, q: float) -> float:
        return float(np.quantile(self.samples, q)) if self.samples else math.nan

    @property
    def median(self) -> float:
        return self._q(0.5)

    @property
    def q25(self) -> float:
        return self._q(0.25)

    @property
    def q75(self) -> float:
        return self._q(0.75)

    @property
    def spread(self) -> float:
        """Interquartile range over median (NaN without a positive median)."""
        m = self.median
        return (self.q75 - self.q25) / m if m > 0 else math.nan

    @property
    def reliable(self) -> bool:
        """At least :data:`MIN_REPEATS` repeats whose spread is within the tolerance."""
        return len(self.samples) >= MIN_REPEATS and self.spread <= self.tolerance

    def columns(self, name: str = "seconds") -> dict[str, Any]:
        """``name`` (the median), ``name_q25``, ``name_q75``."""
        return {name: self.median, f"{name}_q25": self.q25, f"{name}_q75": self.q75}


def columns(**named: Timing) -> dict[str, Any]:
    """A table row's timing columns: per keyword its median and quartiles
    (:meth:`Timing.columns`), then ``reliable``: every one of them is."""
    out: dict[str, Any] = {}
    for name, t in named.items():
        out |= t.columns(name)
    return out | {"reliable": all(t.reliable for t in named.values())}


def paired_ratio(num: Sequence[float] | np.ndarray, den: Sequence[float] | np.ndarray,
                 tolerance: float = TOLERANCE) -> Timing:
    """Per-repeat ratios num[r] / den[r] of two interleaved timings (or per-prompt speedups):
    their median and quartiles; paired, so a load change within one repeat cancels."""
    a, b = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired_ratio needs repeats in pairs: {a.shape} vs {b.shape}")
    return Timing.of(a / b, tolerance)


@dataclass(frozen=True)
class Load:
    """The machine's 1-minute load average before and after a measurement, and its CPUs."""

    before: float
    after: float
    cpus: int

    def columns(self) -> dict[str, Any]:
        return {"load_before": self.before, "load_after": self.after, "cpus": self.cpus}


def load_now(loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg) -> float:
    try:
        return float(loadavg()[0])
    except OSError:  # not available on this platform
        return math.nan


@dataclass
class Timings:
    """What :func:`measure` returns: a :class:`Timing` per name (seconds per call), the value
    each call returned (per name, one per repeat: the last of its ``number`` calls), the load,
    and how many attempts were made."""

    times: dict[Any, Timing]
    load: Load
    attempts: int = 1
    results: dict[Any, list[Any]] = field(default_factory=dict)

    def __getitem__(self, name: Hashable) -> Timing:
        return self.times[name]

    @property
    def reliable(self) -> bool:
        return all(t.reliable for t in self.times.values())

    def ratio(self, num: Hashable, den: Hashable) -> Timing:
        """Per-repeat ``num`` / ``den`` (paired: both timed in the same repeat)."""
        return paired_ratio(self.times[num].samples, self.times[den].samples,
                            self.times[num].tolerance)


def measure(fns: Mapping[Any, Callable[[int], Any]], repeats: int, *,
            min_seconds: float = MIN_SECONDS, tolerance: float = TOLERANCE,
            retries: int = RETRIES, warmup: bool = True,
            clock: Callable[[], float] | None = None,
            loadavg: Callable[[], tuple[float, float, float]] = os.getloadavg) -> Timings:
    """Time every callable of ``fns`` (called with the repeat index; :data:`WARMUP` on the
    warm-up call) over ``repeats`` interleaved repeats (module docstring); while any timing is
    unreliable, re-take the whole set, at most ``retries`` times, and keep the attempt with the
    fewest unreliable timings (the later on a tie). ``min_seconds`` 0: one call per repeat
    (each call its own repeat, e.g. a generation from prompt r)."""
    tick = globals()["clock"] if clock is None else clock
    names = list(fns)
    if repeats < 1 or not names:
        raise ValueError("measure needs at least one callable and one repeat")
    before = load_now(loadavg)
    number = dict.fromkeys(names, 1)
    if warmup:  # first calls pay for allocation, caches and kernel selection
        for name in names:
            t0 = tick()
            fns[name](WARMUP)
            dt = tick() - t0
            if min_seconds > 0:
                number[name] = max(1, math.ceil(min_seconds / max(dt, 1e-9)))
    best: Timings | None = None
    for attempt in range(1, retries + 2):
        samples: dict[Any, list[float]] = {n: [] for n in names}
        results: dict[Any, list[Any]] = {n: [] for n in names}
        for r in range(repeats):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                t0 = tick()
                for _ in range(number[name]):
                    out = fns[name](r)
                samples[name].append((tick() - t0) / number[name])
                results[name].append(out)
        got = Timings({n: Timing.of(samples[n], tolerance) for n in names},
                      Load(before, math.nan, os.cpu_count() or 0), attempt, results)
        bad = sum(not t.reliable for t in got.times.values())
        if best is None or bad <= sum(not t.reliable for t in best.times.values()):
            best = got
        if not bad or repeats < MIN_REPEATS:  # too few repeats: no re-take can help
            break
    assert best is not None
    best.load = Load(before, load_now(loadavg), os.cpu_count() or 0)
    best.attempts = attempt
    return best
