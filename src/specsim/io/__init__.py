"""Reading and writing results, every file atomic and self-verifying.

:mod:`.atomic` writes whole files or none, reads them bounded and checks sidecar and in-file
checksums before decoding; :mod:`.parquet` seals Parquet files with the digest of their bytes;
:mod:`.points` holds the point files (one Parquet row per grid point under a measure's schema,
with identity and payload digests); :mod:`.frames` the tidy tables (CSV with a Markdown twin)
and Parquet frames; :mod:`.render` the Markdown and HTML people read; :mod:`.provenance` the
software versions a file records; :mod:`.reserve` the room a workflow run keeps so that a disk
filling during the run ends it in one line.
"""

from __future__ import annotations

from specsim.io.arrays import read_npz, require_arrays, write_npz
from specsim.io.atomic import (
    READ_LIMITS,
    DiskFullError,
    IntegrityError,
    atomic_path,
    check_cells,
    check_sidecar,
    checksum_path,
    disk_full,
    file_sha256,
    is_sidecar,
    is_temporary,
    no_room,
    payload_digest,
    read_bounded,
    read_json_verified,
    read_verified,
    seal,
    write_checksum,
    write_json,
    write_json_verified,
    write_text,
)
from specsim.io.frames import read_frame, read_table, table_bytes, write_frame, write_table
from specsim.io.parquet import read_parquet, write_parquet
from specsim.io.points import PointFileError, PointSchema, read_point_file, write_point_file
from specsim.io.provenance import NOT_INSTALLED, point_versions, requirement_name, versions
from specsim.io.render import to_markdown, write_html_table
from specsim.io.reserve import met_full_disk

__all__ = [
    "NOT_INSTALLED",
    "READ_LIMITS",
    "DiskFullError",
    "IntegrityError",
    "PointFileError",
    "PointSchema",
    "atomic_path",
    "check_cells",
    "check_sidecar",
    "checksum_path",
    "disk_full",
    "file_sha256",
    "is_sidecar",
    "is_temporary",
    "met_full_disk",
    "no_room",
    "payload_digest",
    "point_versions",
    "read_bounded",
    "read_frame",
    "read_json_verified",
    "read_npz",
    "read_parquet",
    "read_point_file",
    "read_table",
    "read_verified",
    "require_arrays",
    "requirement_name",
    "seal",
    "table_bytes",
    "to_markdown",
    "versions",
    "write_checksum",
    "write_frame",
    "write_html_table",
    "write_json",
    "write_json_verified",
    "write_npz",
    "write_parquet",
    "write_point_file",
    "write_table",
    "write_text",
]
