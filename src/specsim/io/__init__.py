"""Reading and writing results, every file atomic and self-verifying.

:mod:`.atomic` writes whole files or none and checks sidecar and in-file checksums;
:mod:`.points` holds the point files (one Parquet row per grid point under a measure's schema,
with identity and payload digests); :mod:`.frames` the tidy tables (CSV with a Markdown twin)
and Parquet frames; :mod:`.render` the Markdown and HTML people read; :mod:`.provenance` the
software versions a file records.
"""

from __future__ import annotations

from specsim.io.atomic import (
    IntegrityError,
    atomic_path,
    check_sidecar,
    checksum_path,
    is_sidecar,
    is_temporary,
    payload_digest,
    read_json_verified,
    read_verified,
    seal,
    write_checksum,
    write_json,
    write_json_verified,
    write_text,
)
from specsim.io.frames import read_frame, read_table, write_frame, write_table
from specsim.io.points import PointFileError, PointSchema, read_point_file, write_point_file
from specsim.io.provenance import NOT_INSTALLED, point_versions, requirement_name, versions
from specsim.io.render import to_markdown, write_html_table

__all__ = [
    "NOT_INSTALLED",
    "IntegrityError",
    "PointFileError",
    "PointSchema",
    "atomic_path",
    "check_sidecar",
    "checksum_path",
    "is_sidecar",
    "is_temporary",
    "payload_digest",
    "point_versions",
    "read_frame",
    "read_json_verified",
    "read_point_file",
    "read_table",
    "read_verified",
    "requirement_name",
    "seal",
    "to_markdown",
    "versions",
    "write_checksum",
    "write_frame",
    "write_html_table",
    "write_json",
    "write_json_verified",
    "write_point_file",
    "write_table",
    "write_text",
]
