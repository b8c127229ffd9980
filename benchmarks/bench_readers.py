"""``specsim advise``'s metrics readers on the sizes practitioners collect (issue 41).

Two inputs, written to a temporary directory:

* a vLLM server log of ``--lines`` lines (default 10^6): one ``SpecDecoding metrics:`` line in
  five, the others ordinary request lines; a third of the interval lines busy (3000 rounds: the
  rates do not pin the counts, their rounding is carried) and one in a hundred idle (``nan``);
* a ``/metrics`` scrape of ``--megabytes`` MB (default 100): vLLM's spec-decode counters among
  that many bytes of other series (histogram buckets of many labelled series).

Each is read by :func:`specsim.acceptance.readers.read_counts` in a fresh process, which
reports its CPU time (``resource.getrusage``: user + system, less noisy than wall time on a
shared machine) and its peak resident memory (``ru_maxrss``) beside the same process's peak
after the imports alone; the table prints both, and the input's size. ``--quick`` shrinks the
inputs 100-fold (``make bench-smoke``).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from specsim.acceptance.readers import read_counts
def usage():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime, r.ru_maxrss / 1024
t0, base = usage()
wall = time.perf_counter()
reading = read_counts([sys.argv[1]])
wall = time.perf_counter() - wall
t1, peak = usage()
print(json.dumps({"cpu": t1 - t0, "wall": wall, "rss_imports": base, "rss_peak": peak,
                  "rounds": reading.counts.rounds, "notes": len(reading.notes)}))
"""

FMT = ("INFO 06-12 14:03:11 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
       "%.2f, Accepted throughput: %.2f tokens/s, Drafted throughput: %.2f tokens/s, Accepted: "
       "%d tokens, Drafted: %d tokens, Per-position acceptance rate: %s, Avg Draft acceptance "
       "rate: %.1f%%\n")
IDLE = ("INFO 06-12 14:03:21 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
        "nan, Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: "
        "0 tokens, Drafted: 0 tokens, Per-position acceptance rate: nan, nan, nan, Avg Draft "
        "acceptance rate: nan%\n")
OTHER = ("INFO 06-12 14:03:11 [loggers.py:123] Engine 000: Avg prompt throughput: 1234.5 "
         "tokens/s, Avg generation throughput: 456.7 tokens/s, Running: 12 reqs\n")


def vllm_log(path: Path, lines: int, rng: random.Random) -> None:
    with path.open("w") as f:
        for i in range(lines):
            if i % 5:
                f.write(OTHER)
                continue
            if i % 500 == 0:
                f.write(IDLE)
                continue
            n = 3000 if i % 3 == 0 else rng.randint(20, 400)
            a1 = rng.randint(n // 2, n)
            a2 = rng.randint(a1 // 2, a1)
            a3 = rng.randint(a2 // 2, a2)
            acc, dr = a1 + a2 + a3, 3 * n
            rates = ", ".join(f"{x / n:.3f}" for x in (a1, a2, a3))
            f.write(FMT % (1 + acc / n, acc / 10, dr / 10, acc, dr, rates, 100 * acc / dr))


def scrape(path: Path, megabytes: float) -> None:
    from specsim.acceptance.counts import AcceptanceCounts
    from specsim.acceptance.readers import to_prometheus

    line = ('vllm:request_latency_seconds_bucket{engine="0",le="%s",model_name="m",'
            'route="/v1/chat/completions",tenant="t%05d"} 12345.0\n')
    target = int(megabytes * 1e6)
    with path.open("w") as f:
        f.write("# HELP vllm:request_latency_seconds Request latency.\n"
                "# TYPE vllm:request_latency_seconds histogram\n")
        written, i = 0, 0
        while written < target:
            s = line % (f"{0.001 * (i % 40):.3f}", i // 40)
            f.write(s)
            written += len(s)
            i += 1
        f.write(to_prometheus(AcceptanceCounts(2_345_678, (2_000_001, 1_500_000, 999_999)),
                              {"engine": "0", "model_name": "m"}))


def measure(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, str(path)], check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=int, default=10**6)
    ap.add_argument("--megabytes", type=float, default=100.0)
    ap.add_argument("--quick", action="store_true", help="inputs 100 times smaller")
    args = ap.parse_args(argv)
    lines, mb = (args.lines // 100, args.megabytes / 100) if args.quick else (args.lines,
                                                                              args.megabytes)
    print(f"{'input':<34} {'size':>10} {'cpu s':>7} {'wall s':>7} {'peak MB':>8} "
          f"{'imports MB':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        cases = [(f"vLLM log, {lines} lines", Path(tmp) / "vllm.log",
                  lambda p: vllm_log(p, lines, random.Random(41))),
                 (f"/metrics scrape, {mb:g} MB", Path(tmp) / "metrics.prom",
                  lambda p: scrape(p, mb))]
        for name, path, make in cases:
            make(path)
            r = measure(path)
            size = path.stat().st_size / 1e6
            print(f"{name:<34} {size:>8.1f}MB {r['cpu']:>7.2f} {r['wall']:>7.2f} "
                  f"{r['rss_peak']:>8.0f} {r['rss_imports']:>10.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
