"""specsim.timing: medians over interleaved repeats, their spread, the load, and the verdict --
all on fake clocks (no test here depends on how fast this machine is)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import pytest

from specsim import timing
from specsim.timing import MIN_REPEATS, RETRIES, TOLERANCE, Timing, measure, paired_ratio


class FakeClock:
    """A clock that only moves when a fake callable says how long it took."""

    def __init__(self) -> None:
        self.now = 0.0
        self.calls: list[tuple[str, int]] = []

    def __call__(self) -> float:
        return self.now

    def callable(self, name: str, durations: Callable[[int], float]) -> Callable[[int], str]:
        def fn(r: int) -> str:
            self.calls.append((name, r))
            self.now += durations(r)
            return f"{name}@{r}"
        return fn


def loads(*values: float) -> Callable[[], tuple[float, float, float]]:
    it: Iterator[float] = iter(values)
    return lambda: (next(it), 0.0, 0.0)


def test_steady_calls_give_their_time_interleaved_and_reliable() -> None:
    clk = FakeClock()
    fns = {"a": clk.callable("a", lambda r: 0.5), "b": clk.callable("b", lambda r: 1.5)}
    t = measure(fns, 4, clock=clk, loadavg=loads(0.7, 1.9))
    assert t["a"].median == 0.5 and t["b"].median == 1.5
    assert t.reliable and t.attempts == 1
    assert t.load.before == 0.7 and t.load.after == 1.9 and t.load.cpus >= 1
    # warm-up first (repeat index WARMUP), then the order rotates from repeat to repeat
    assert clk.calls[:2] == [("a", timing.WARMUP), ("b", timing.WARMUP)]
    assert [n for n, _ in clk.calls[2:]] == ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert t.results["b"] == ["b@0", "b@1", "b@2", "b@3"]
    assert t.ratio("b", "a").median == pytest.approx(3.0)


def test_one_outlier_moves_neither_the_median_nor_the_verdict() -> None:
    clk = FakeClock()
    fns = {"a": clk.callable("a", lambda r: 10.0 if r == 2 else 1.0)}
    t = measure(fns, 5, clock=clk, loadavg=loads(0, 0))
    assert t["a"].median == 1.0 and t["a"].reliable and t.attempts == 1
    assert max(t["a"].samples) == 10.0


def test_repeats_that_disagree_are_retaken_then_marked() -> None:
    clk = FakeClock()
    fns = {"noisy": clk.callable("noisy", lambda r: 1.0 + max(r, 0)),
           "steady": clk.callable("steady", lambda r: 1.0)}
    t = measure(fns, 5, clock=clk, loadavg=loads(0, 0))
    assert t.attempts == RETRIES + 1
    assert len(clk.calls) == 2 + (RETRIES + 1) * 2 * 5  # the whole set re-taken each time
    assert not t["noisy"].reliable and t["steady"].reliable and not t.reliable
    assert t["noisy"].spread == pytest.approx((4.0 - 2.0) / 3.0)
    assert t["noisy"].spread > TOLERANCE
    cols = timing.columns(seconds=t["noisy"], ratio=t.ratio("steady", "steady"))
    assert cols == {"seconds": 3.0, "seconds_q25": 2.0, "seconds_q75": 4.0, "ratio": 1.0,
                    "ratio_q25": 1.0, "ratio_q75": 1.0, "reliable": False}
    assert timing.columns(seconds=t["steady"])["reliable"]


def test_a_retake_that_agrees_is_kept() -> None:
    clk = FakeClock()
    state = {"attempt_calls": 0}

    def dur(r: int) -> float:
        state["attempt_calls"] += 1
        first = 1 < state["attempt_calls"] <= 6  # the warm-up, then the first attempt
        return 1.0 + r if first else 2.0

    t = measure({"x": clk.callable("x", dur)}, 5, clock=clk, loadavg=loads(0, 0))
    assert t.attempts == 2 and t["x"].reliable and t["x"].samples == (2.0,) * 5


def test_too_few_repeats_are_unreliable_and_not_retaken() -> None:
    clk = FakeClock()
    t = measure({"x": clk.callable("x", lambda r: 1.0)}, MIN_REPEATS - 1, clock=clk,
                loadavg=loads(0, 0))
    assert not t["x"].reliable and t.attempts == 1


def test_short_calls_are_repeated_within_a_repeat() -> None:
    clk = FakeClock()
    t = measure({"x": clk.callable("x", lambda r: 5e-4)}, 3, clock=clk, min_seconds=2e-3,
                loadavg=loads(0, 0))
    assert len(clk.calls) == 1 + 3 * 4  # warm-up sized number = 2 ms / 0.5 ms
    assert t["x"].median == pytest.approx(5e-4)
    one = FakeClock()
    measure({"x": one.callable("x", lambda r: 5e-4)}, 3, clock=one, min_seconds=0,
            loadavg=loads(0, 0))
    assert len(one.calls) == 1 + 3


def test_paired_ratio_cancels_a_load_change_shared_by_a_repeat() -> None:
    slow = [1.0, 3.0, 1.0, 1.0, 5.0]  # the machine slowed in repeats 1 and 4
    plain = [2.0 * s for s in slow]
    spec = [1.6 * s for s in slow]
    r = paired_ratio(plain, spec)
    assert r.median == pytest.approx(1.25) and r.spread == pytest.approx(0.0) and r.reliable
    assert not Timing.of(plain).reliable  # the raw times disagree
    with pytest.raises(ValueError, match="pairs"):
        paired_ratio([1.0, 2.0], [1.0])


def test_load_without_getloadavg_is_nan() -> None:
    def broken() -> tuple[float, float, float]:
        raise OSError("no load average")

    assert math.isnan(timing.load_now(broken))
