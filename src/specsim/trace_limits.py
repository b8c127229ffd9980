"""How large a trace may be: checked before a trace file is decoded, and on the settings that
record one, so no trace takes memory its job did not declare.

A trace file is refused (:class:`~specsim.traces.validate.TraceFileError`, naming the file and
the limit) when its Parquet footer declares more than :data:`MAX_POSITIONS` rows, more than
:data:`MAX_ENTRIES` kept support entries in all, or more than :data:`MAX_DECODED_BYTES` bytes
decoded -- all read from the footer, before any page is inflated (a few kilobytes of
compressed zeros can declare millions of rows) -- and, once its list offsets are read, a
position keeping more than :data:`MAX_SUPPORT` tokens. ``realtext.trace`` settings are held to
the same positions and entries (documents x length, times the kept support). Standard library
only: the realtext settings, which Snakemake imports on every parse, check against these.
"""

from __future__ import annotations

from typing import Final

#: Positions (rows) of one trace: 2^22, 128 times the default recorded trace (256 x 128).
MAX_POSITIONS: Final = 1 << 22
#: Kept support entries (token, p, q) over all positions: 2^25 (~0.8 GB as int64 + 2 float64).
MAX_ENTRIES: Final = 1 << 25
#: Tokens kept at one position (the union of a top-k of p and of q).
MAX_SUPPORT: Final = 4096
#: Bytes the footer declares decoded (every column, whatever its type): 1.5 GiB.
MAX_DECODED_BYTES: Final = 3 << 29


def stated() -> str:
    """The limits in words, as the config reference states them."""
    return (f"at most {MAX_POSITIONS} positions, {MAX_ENTRIES} kept support entries in all, "
            f"{MAX_SUPPORT} at one position, {MAX_DECODED_BYTES} bytes decoded")
