"""``custom``: the user's own target (and optionally draft) tables, from .npy or .csv files.

Everything but the target's origin is the table family's (:class:`TableFamily`): the same
drafts plus ``file`` (the draft's table from a file), the same DP exact reference. The files
are loaded and checked when the config is read (:meth:`CustomFamily.validate`), so a bad file
stops the run before any job; their sha256 enters the model's identity, so editing a file
reruns exactly the points that use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specsim.errors import ConfigError
from specsim.families.markov import TableFamily
from specsim.models.files import TableFileError, check_path, check_table, file_digest, load_table
from specsim.models.spec import ModelSpec
from specsim.sampling import FloatArray


class CustomFamily(TableFamily):
    """Tables read from the user's files (:func:`specsim.models.files.load_table`)."""

    name = "custom"
    source = "user"
    settings = ("target_file",)
    drafts = ("file", "blend", "temper", "calibrated", "identical", "uniform")

    def validate(self, key: str, entry: Mapping[str, Any]) -> None:
        """Load and check the user's tables now, so a bad file stops the run before any job."""
        if "target_file" not in entry:
            raise ConfigError(f"{key}.target_file: a custom model needs a target table file")
        draft = entry["draft"]
        kind = draft["kind"]
        if kind == "file" and "file" not in draft:
            raise ConfigError(f"{key}.draft.file: a 'file' draft needs the path of its table")
        if isinstance(draft.get("other"), dict):
            raise ConfigError(f"{key}.draft.other: custom models take 'far' or 'uniform' bases")
        files = [("target", f"{key}.target_file", entry["target_file"])]
        if kind == "file":
            files.append(("draft", f"{key}.draft.file", draft["file"]))
        shapes = []
        for role, where, path in files:
            try:
                table = check_table(load_table(path), key, role)
            except TableFileError as err:
                raise ConfigError(f"{where}: {err}") from None
            shapes.append(table.shape)
            if table.shape[0] != entry["vocab"]:
                raise ConfigError(f"{where}: {path!r} has {table.shape[0]} rows but {key}.vocab "
                                  f"is {entry['vocab']}; set vocab to the table's size")
        if len(shapes) == 2 and shapes[0] != shapes[1]:
            raise ConfigError(f"{key}: target {shapes[0]} and draft {shapes[1]} tables differ "
                              f"in shape")

    def spec_fields(self, entry: Mapping[str, Any]) -> dict[str, Any]:
        return {"target_file": str(entry["target_file"])}

    def describe(self, spec: ModelSpec) -> dict[str, Any]:
        assert spec.target_file is not None
        return {"target": {"file": spec.target_file,
                           "sha256": file_digest(check_path(spec.target_file))}}

    def base_target(self, spec: ModelSpec) -> FloatArray:
        assert spec.target_file is not None
        return check_table(load_table(spec.target_file), spec.name, "target")
