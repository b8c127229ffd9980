"""Config validation: the JSON schema (with defaults filled in) plus cross-field checks.

One code path for Snakemake (``workflow/rules/common.smk``) and for the tests: a bad config
raises :class:`specsim.errors.ConfigError` naming the key, the value and what is allowed.
Config files are read strictly and in bounded work by :mod:`specsim.configfile`.
"""

from __future__ import annotations

import copy
import functools
import reprlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from specsim.configfile import check_values, read_config
from specsim.errors import ConfigError
from specsim.grid import Grid, build_grid


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


# JSON Schema counts 512.0 as an integer; specsim does not (it would reach numpy as a float
# size, or name a grid point "gamma~2.0"): an integer key takes an integer, written as one.
_Validator = jsonschema.validators.extend(
    _with_defaults(jsonschema.Draft7Validator),
    type_checker=jsonschema.Draft7Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int)
        and not isinstance(value, bool)))


def _path_order(path: Any) -> list[tuple[int, Any]]:
    """Sort key for a jsonschema error path: list indices numerically, then keys as text.

    Comparing raw paths fails when an integer meets a string at the same depth (a list index,
    or a YAML key such as ``1:``, beside a name), so each part is ranked by kind first.
    """
    return [(0, part) if isinstance(part, int) else (1, str(part)) for part in path]


def _where(path: Any) -> str:
    out = "config"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _schema(path: Path) -> Any:
    """The schema file, parsed once per content (pure-Python YAML takes ~60 ms a parse: the
    schema is read by every config load); used read-only (defaults are deep-copied)."""
    stat = path.stat()
    return _parsed_schema(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=4)
def _parsed_schema(path: str, mtime_ns: int, size: int) -> Any:
    return yaml.safe_load(Path(path).read_text(encoding="utf-8"))


def validate_config(config: Any, schema_path: str | Path) -> dict[str, Any]:
    """Validate ``config`` in place (defaults filled in) and return it; raise ConfigError."""
    check_values(config, "config")  # bounded, before anything else walks it
    if not isinstance(config, dict):
        raise ConfigError(f"the config must be a YAML mapping of keys to values, got "
                          f"{type(config).__name__}: {reprlib.repr(config)}")
    errors = sorted(_Validator(_schema(Path(schema_path))).iter_errors(config),
                    key=lambda e: _path_order(e.absolute_path))
    if errors:
        err = errors[0]
        more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
        detail = err.message
        if err.validator == "oneOf":  # name what is allowed rather than jsonschema's summary
            detail = (f"{reprlib.repr(err.instance)} is not a valid "
                      f"{err.schema.get('description', 'value')}")
        if len(detail) > 300:  # jsonschema quotes the whole value: one readable line
            detail = detail[:297] + "..."
        raise ConfigError(f"{_where(err.absolute_path)}: {' '.join(detail.split())}{more}")
    return config


def load_grid(config: Any, schema_path: str | Path) -> Grid:
    """Schema, then cross-field checks (the realtext section's too), then the work the grid
    asks for: the grid every rule works from."""
    from specsim import work

    config = validate_config(config, schema_path)
    if config.get("realtext") is not None:  # before the grid: its trace models read it
        from specsim.realtext_settings import check_section
        try:
            check_section(config["realtext"])
        except ValueError as err:  # most name the key within the section
            named = str(err).split(".", 1)[0] in config["realtext"]
            raise ConfigError(f"realtext{'.' if named else ': '}{err}") from None
    grid = build_grid(config)
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


def write_grid_file(path: str | Path, grid: Grid) -> None:
    """Write ``grid`` as its provenance record (results/grid.json; :func:`read_grid_file` reads
    it back): the validated config, its digest, every point, the software versions, and a
    checksum over all of it."""
    from specsim.io import versions, write_json_verified

    write_json_verified(path, {**grid.to_json(), "versions": versions()})


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
