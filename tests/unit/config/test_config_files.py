"""Hostile config files and values: one line naming the file (and line or key), bounded work.

Companion of tests/integrity/test_integrity.py (duplicate keys, non-string keys) and
tests/unit/config/test_config.py (schema and cross-field errors): here the file itself -- what
Snakemake cannot load or loads silently wrong, what would make a reader or a walk run without bound
-- and numbers beyond any bound. Every case runs `specsim check-config` in a subprocess with a
timeout (a hang fails the test), and generated mutations of the tiny config cover the class.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from config_cases import BASE, HOSTILE
from conftest import ROOT, SCHEMA, TINY

from specsim.config import load_grid
from specsim.configfile import check_config_files, read_config
from specsim.errors import ConfigError

SPECSIM = str(Path(sys.executable).with_name("specsim"))
TINY_TEXT = TINY.read_text()


def _check_config(*files: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SPECSIM, "check-config", *files], capture_output=True, text=True,
                          timeout=120, check=False, cwd=cwd)


@pytest.mark.parametrize(("name", "content", "fragment"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_config_file_is_one_line_naming_it(tmp_path: Path, name: str, content: bytes,
                                                     fragment: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    res = _check_config(str(path))  # a hang fails on the timeout
    assert res.returncode == 1, res.stdout + res.stderr
    assert "Traceback" not in res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith(f"config error: {path}: "), lines[0]
    assert fragment in lines[0], lines[0]
    assert len(lines[0]) < 400, lines[0]


def test_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # reading it would block for ever
    with pytest.raises(ConfigError, match="not a regular file"):
        read_config(fifo)
    with pytest.raises(ConfigError, match=r"Is a directory|not a regular file"):
        read_config(tmp_path)


@pytest.mark.parametrize("indent", ["\t", 2, None])
def test_a_valid_json_config_is_accepted(tmp_path: Path, indent: str | int | None) -> None:
    """JSON is read as Snakemake reads it (JSON first), tab-indented or not."""
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(BASE, indent=indent))
    assert read_config(path) == BASE
    check_config_files([str(path)])
    res = _check_config(str(path))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"config ok: {path}")


def test_check_config_merges_files_as_snakemake_does(tmp_path: Path) -> None:
    over = tmp_path / "over.yaml"
    over.write_text("budget: {chains: 3}\n")  # below the minimum: the merged config is refused
    res = _check_config(str(TINY), str(over))
    assert res.returncode == 1
    assert res.stderr.strip() == (f"config error: {TINY} + {over}: config.budget.chains: 3 is "
                                  f"less than the minimum of 2") or "budget" in res.stderr
    over.write_text("budget: {chains: 1024}\n")
    res = _check_config(str(TINY), str(over))
    assert res.returncode == 0, res.stderr


# --------------------------------------------------------------------------------------------
# Generated mutations of the tiny config's text: each is accepted or refused in one line.
# --------------------------------------------------------------------------------------------
def _mutations(n: int, seed: int = 23) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    lines = TINY_TEXT.splitlines(keepends=True)
    inserts = ["\t", "!x ", "&a ", "*a ", "? ", "- ", "---\n", "<<: *a\n", "{", "[", "]", "}",
               ": ", "\x00", "\ufeff", "1" * 400, "1e999", ".nan", "&a [*a]", "'", '"',
               "%YAML 1.1\n"]
    out = []
    for i in range(n):
        k = rng.randrange(len(lines))
        mutated = list(lines)
        op = rng.choice(["insert", "duplicate", "delete", "truncate", "swap"])
        if op == "insert":
            pos = rng.randrange(len(mutated[k]) + 1)
            mutated[k] = mutated[k][:pos] + rng.choice(inserts) + mutated[k][pos:]
        elif op == "duplicate":
            mutated.insert(k, mutated[k])
        elif op == "delete":
            del mutated[k]
        elif op == "truncate":
            mutated = [*mutated[:k], mutated[k][: rng.randrange(len(mutated[k]) + 1)]]
        else:
            j = rng.randrange(len(lines))
            mutated[k], mutated[j] = mutated[j], mutated[k]
        out.append((f"{i}-{op}-line{k + 1}", "".join(mutated)))
    return out


MUTATIONS = _mutations(240)


@pytest.mark.parametrize(("name", "text"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_a_mutated_config_is_accepted_or_refused_in_one_line(tmp_path: Path, name: str,
                                                             text: str) -> None:
    path = tmp_path / "tiny.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        check_config_files([str(path)])
        load_grid(read_config(path), SCHEMA)
    except ConfigError as err:
        assert "\n" not in str(err), str(err)
        assert len(str(err)) < 600, str(err)


# --------------------------------------------------------------------------------------------
# Numbers: every numeric key bounded in the schema; hostile numbers anywhere refused by name.
# --------------------------------------------------------------------------------------------
def _numeric_schema_nodes(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    if isinstance(node, dict):
        if node.get("type") in ("number", "integer"):
            out.append((path, node))
        for key, value in node.items():
            out += _numeric_schema_nodes(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _numeric_schema_nodes(value, f"{path}[{i}]")
    return out


def test_every_numeric_schema_key_has_both_bounds() -> None:
    nodes = _numeric_schema_nodes(yaml.safe_load(SCHEMA.read_text()))
    assert len(nodes) > 50
    unbounded = [p for p, n in nodes if not ({"maximum", "exclusiveMaximum"} & set(n))
                 or not ({"minimum", "exclusiveMinimum"} & set(n))]
    assert not unbounded, f"numeric keys without a minimum and a maximum: {unbounded}"


def _numeric_leaves(obj: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in _numeric_leaves(v, (*path, k))]
    if isinstance(obj, list):
        return [p for i, v in enumerate(obj) for p in _numeric_leaves(v, (*path, i))]
    return [path] if isinstance(obj, int | float) and not isinstance(obj, bool) else []


KNOB_PATHS = [("studies", "schemes", "knobs", k) for k in ("drafts", "lenience", "epsilon",
                                                          "delta")]
KNOB_PATHS += [("studies", "policies", "knobs", k) for k in ("threshold", "cap", "c")]
NUMBER_PATHS = [*_numeric_leaves(BASE), *KNOB_PATHS, ("max_work",), ("max_points",),
                ("budget", "max_enumeration"), ("worked_example", "context")]


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(BASE)
    node: Any = cfg
    for part in path[:-1]:
        node = node[part] if isinstance(node, list) else node.setdefault(part, {})
    node[path[-1]] = [value] if path in KNOB_PATHS else value
    return cfg


def _dotted(path: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**53 + 1, 1e308, -1e308],
                         ids=["huge", "minus_huge", "over_2^53", "1e308", "minus_1e308"])
@pytest.mark.parametrize("path", NUMBER_PATHS, ids=[_dotted(p)[1:] for p in NUMBER_PATHS])
def test_a_number_beyond_any_bound_is_refused_naming_the_key(path: tuple[Any, ...],
                                                             value: Any) -> None:
    with pytest.raises(ConfigError) as info:
        load_grid(_with(path, value), SCHEMA)
    message = str(info.value)
    assert "\n" not in message
    assert _dotted(path)[1:].split("[")[0].split(".")[-1] in message, message


@pytest.mark.parametrize("path", [("budget", "chains"), ("seed",), ("studies", "accept_curve",
                                  "gamma", 0), ("models", "stub", "vocab")])
def test_an_integer_key_takes_an_integer(path: tuple[Any, ...]) -> None:
    """512.0 reached the point jobs as a float size; 2.0 named a point gamma~2.0."""
    cfg = _with(path, 3.0)
    with pytest.raises(ConfigError, match="is not of type 'integer'"):
        load_grid(cfg, SCHEMA)


# --------------------------------------------------------------------------------------------
# Through make: the config checked before Snakemake starts (tests/workflow/test_config_runs.py:
# through Snakemake).
# --------------------------------------------------------------------------------------------
def test_make_run_checks_the_config_before_snakemake() -> None:
    res = subprocess.run(["make", "-n", "run", "CONFIG=tests/data/tiny.yaml"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    lines = res.stdout.splitlines()
    check = [i for i, ln in enumerate(lines)
             if ln.endswith("specsim check-config tests/data/tiny.yaml")]
    run = [i for i, ln in enumerate(lines)
           if "snakemake --cores" in ln and ln.endswith("--configfile tests/data/tiny.yaml")]
    assert check and run and check[0] < run[0], lines  # checked first, then run
