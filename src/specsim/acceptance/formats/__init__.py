"""One module per family of engine output, each returning counters per draft length:
:mod:`.scrapes` (Prometheus scrapes), :mod:`.loglines` (log lines printing rates),
:mod:`.requests` (per-request JSON); :mod:`.context` (options, refusals, notes) and
:mod:`.rounding` (counts known to within a print's rounding) serve them all. The entry point
is :mod:`specsim.acceptance.readers`."""
