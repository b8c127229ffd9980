"""Config validation: the JSON schema (with defaults filled in) plus cross-field checks.

One code path for Snakemake (``workflow/rules/common.smk``) and for the tests: a bad config
raises :class:`specsim.errors.ConfigError` naming the key, the value and what is allowed.
Config files are read strictly: a key written twice in one mapping is an error, because YAML
would silently keep only the last value.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from specsim.errors import ConfigError
from specsim.grid import Grid, build_grid, check_finite


def _with_defaults(cls: Any) -> Any:
    """A validator class that fills in ``default`` values while validating (jsonschema recipe)."""
    validate_properties = cls.VALIDATORS["properties"]

    def set_defaults(validator: Any, properties: dict[str, Any], instance: Any,
                     schema: dict[str, Any]) -> Iterator[Any]:
        if isinstance(instance, dict):
            for prop, sub in properties.items():
                if "default" in sub:
                    instance.setdefault(prop, copy.deepcopy(sub["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(cls, {"properties": set_defaults})


_Validator = _with_defaults(jsonschema.Draft7Validator)


def _path_order(path: Any) -> list[tuple[int, Any]]:
    """Sort key for a jsonschema error path: list indices numerically, then keys as text.

    Comparing raw paths fails when an integer meets a string at the same depth (a list index,
    or a YAML key such as ``1:``, beside a name), so each part is ranked by kind first.
    """
    return [(0, part) if isinstance(part, int) else (1, str(part)) for part in path]


def _check_keys(obj: Any, where: str) -> None:
    """Refuse mapping keys that are not strings (YAML reads ``1:``, ``yes:`` or ``null:`` so)."""
    if isinstance(obj, dict):
        for key, value in obj.items():
            if not isinstance(key, str):
                what = {"config.models": "model names", "config.studies": "study names"}.get(
                    where, "config keys")
                raise ConfigError(f"{where}: key {key!r} is not a string; {what} must be strings "
                                  f"(use a name such as 'm1')")
            _check_keys(value, f"{where}.{key}")
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            _check_keys(item, f"{where}[{i}]")


def _where(path: Any) -> str:
    out = "config"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validate_config(config: Any, schema_path: str | Path) -> dict[str, Any]:
    """Validate ``config`` in place (defaults filled in) and return it; raise ConfigError."""
    if not isinstance(config, dict):
        raise ConfigError(f"the config must be a YAML mapping of keys to values, got "
                          f"{type(config).__name__}: {config!r:.80}")
    _check_keys(config, "config")
    check_finite(config, "config")
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    errors = sorted(_Validator(schema).iter_errors(config),
                    key=lambda e: _path_order(e.absolute_path))
    if errors:
        err = errors[0]
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        detail = err.message
        if err.validator == "oneOf":  # name what is allowed rather than jsonschema's summary
            detail = f"{err.instance!r} is not a valid {err.schema.get('description', 'value')}"
        raise ConfigError(f"{_where(err.absolute_path)}: {detail}{more}")
    return config


def load_grid(config: Any, schema_path: str | Path) -> Grid:
    """Schema, then cross-field checks, then the work the grid asks for: the grid every rule
    works from."""
    from specsim import work

    grid = build_grid(validate_config(config, schema_path))
    work.check(grid)
    return grid


def read_grid_file(path: str | Path) -> Grid:
    """The grid of a verified grid file (results/grid.json): its checksum and its config
    digest must hold, so a corrupt or hand-edited file is refused with an IntegrityError
    naming it."""
    from specsim.grid import digest
    from specsim.io import IntegrityError, read_json_verified

    data = read_json_verified(path)
    if data.get("config_digest") != digest(data.get("config"))[:16]:
        raise IntegrityError(f"{path}: its config does not match its recorded config digest "
                             f"(edited by hand?); delete it and rerun snakemake")
    return Grid.from_json(data)


def study_sources(paths: list[str], config: dict[str, Any]) -> dict[str, str]:
    """Which config file defines each study (the last one wins, as in Snakemake's merge)."""
    out: dict[str, str] = {}
    for path in paths:
        studies = (read_config(path) or {}).get("studies") or {}
        out |= {name: Path(path).name for name in studies}
    return {name: out.get(name, "--config") for name in config.get("studies", {})}


def stale_provenance(grid_json: str | Path, config_digest: str, triggers: set[str]) -> str | None:
    """Why a finished run's results would silently outlive this config, or None.

    With Snakemake's ``params`` rerun trigger off (e.g. ``--rerun-triggers mtime``), a config
    edit reruns nothing: results/grid.json, the point files and every table would stay those
    of the old config with exit status 0. Refuse that case before any job runs.
    """
    if "params" in triggers:
        return None
    from specsim.io import IntegrityError, read_json_verified

    try:  # verified whole before it is trusted; bounded
        recorded = read_json_verified(grid_json).get("config_digest")
    except (OSError, IntegrityError):
        return None  # absent (fresh run) or corrupt: its reader will name it
    if recorded == config_digest:
        return None
    return (f"{grid_json} was built from another config (digest {recorded}, this config "
            f"{config_digest}) and --rerun-triggers excludes 'params', so nothing would be "
            f"recomputed; rerun with the default triggers, or delete {grid_json}")


class _DuplicateKeyError(yaml.YAMLError):
    """A mapping that names the same key twice (the message says which key and where)."""


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key written twice in one mapping, at any depth.

    The check hooks ``flatten_mapping``, which ``SafeConstructor.construct_mapping`` calls for
    every mapping before constructing it and which also flattens the mappings pulled in by
    merge keys (``<<: *anchor``): it is the one place that sees a mapping's own keys before
    merged keys are spliced in. Keys taken from a merge may be overridden (that is what merge
    keys are for); only the keys written in the mapping itself must be unique.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._flattened: set[int] = set()

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        if id(node) in self._flattened:  # already flattened as the source of a merge key
            return
        own = [key for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"]
        super().flatten_mapping(node)
        self._flattened.add(id(node))
        seen: dict[Any, int] = {}
        for key_node in own:
            if not isinstance(key_node, yaml.ScalarNode):
                continue  # a list/mapping key is unhashable; construct_mapping refuses it
            key = self.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if key in seen:
                where = (f"twice on line {line}" if seen[key] == line
                         else f"at lines {seen[key]} and {line}")
                raise _DuplicateKeyError(f"duplicate key {key!r} {where} (YAML keeps only the "
                                         f"last; remove one)")
            seen[key] = line


def _yaml_problem(err: yaml.YAMLError) -> str:
    """PyYAML's multi-line message as one line: the problem and where it is."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem and err.problem_mark:
        mark = err.problem_mark
        return f"{err.problem} at line {mark.line + 1}, column {mark.column + 1}"
    return " ".join(str(err).split())


def read_config(path: str | Path) -> Any:
    """Load a YAML config file strictly; raise ConfigError with a one-line message naming it.

    Refused: an unreadable file, bytes that are not UTF-8, invalid YAML and a mapping that
    names the same key twice (YAML itself would keep only the last value, silently).
    """
    try:
        text = Path(path).read_bytes().decode("utf-8-sig")
    except OSError as err:
        raise ConfigError(f"{path}: cannot read the config file ({err.strerror})") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path}: not UTF-8 text (byte {err.start} cannot be decoded); save "
                          f"the config as UTF-8") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)
    except _DuplicateKeyError as err:
        raise ConfigError(f"{path}: {err}") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({_yaml_problem(err)})") from None


def check_config_files(paths: list[str]) -> None:
    """Read each config file strictly (see :func:`read_config`); ConfigError on the first bad one.

    Snakemake's own loader keeps the last of two equal keys without a word; the Snakefile
    passes ``workflow.configfiles`` here so such a file stops the run before any job starts.
    """
    for path in paths:
        data = read_config(path)
        if isinstance(data, dict) and data.get("__use_yte__"):
            raise ConfigError(f"{path}: __use_yte__: Snakemake has already run this config's "
                              f"YTE template code while loading it; specsim refuses templated "
                              f"configs -- render it yourself (yte) and pass the result")
