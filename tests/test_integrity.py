"""Input integrity: strict config files, config key checks, table files, output permissions.

Each bad input is refused with one line that names the file (or the config key) and the fix;
never a traceback, never a silent change of meaning.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import SCHEMA, TINY

from specsim.config import _path_order, check_config_files, read_config, validate_config
from specsim.grid import ConfigError

# --------------------------------------------------------------------------------------------
# Config files: duplicate keys, unreadable files, one-line messages.
# --------------------------------------------------------------------------------------------
DUPLICATE_SEED = """\
models:
  m1: {family: iid, vocab: 20, draft: {kind: noise}}
seed: 1
studies:
  s1:
    analysis: accept_curve
    models: [m1]
    gamma: [2]
seed: 2
"""

DUPLICATE_MODEL = """\
models:
  m1: {family: iid, vocab: 20, draft: {kind: noise}}
  m2: {family: iid, vocab: 10, draft: {kind: noise}}
  m1: {family: iid, vocab: 30, draft: {kind: noise}}
"""

DUPLICATE_DEEP = """\
models:
  m1:
    family: iid
    vocab: 20
    draft:
      kind: noise
      kind: uniform
"""


def _one_line_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        read_config(path)
    message = str(info.value)
    assert "\n" not in message, message
    assert message.startswith(f"{path}: "), message
    return message


@pytest.mark.parametrize(("text", "expected"), [
    (DUPLICATE_SEED, "duplicate key 'seed' at lines 3 and 9 (YAML keeps only the last; "
                     "remove one)"),
    (DUPLICATE_MODEL, "duplicate key 'm1' at lines 2 and 4"),
    (DUPLICATE_DEEP, "duplicate key 'kind' at lines 6 and 7"),
    ("{a: 1, b: 2, a: 3}\n", "duplicate key 'a' twice on line 1"),
    ("a: 1\n1: x\n1.0: y\n", "duplicate key 1.0 at lines 2 and 3"),  # equal once loaded
], ids=["top_level", "model_name", "nested", "flow_mapping", "equal_numbers"])
def test_duplicate_keys_are_refused_naming_key_and_both_lines(tmp_path: Path, text: str,
                                                              expected: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    assert f"{path}: {expected}" in _one_line_error(path)


def test_duplicate_keys_in_the_real_configs_would_be_caught(tmp_path: Path) -> None:
    """Appending a second ``seed:``-style key to the tiny config is refused; the original loads."""
    text = TINY.read_text()
    assert read_config(TINY) == yaml.safe_load(text)
    first_key = next(line for line in text.splitlines() if line and line[0].isalpha())
    path = tmp_path / "tiny.yaml"
    path.write_text(text + first_key + "\n")
    assert "duplicate key" in _one_line_error(path)


def test_merge_keys_still_work(tmp_path: Path) -> None:
    """``<<: *anchor`` may be overridden by the mapping's own keys; that is not a duplicate."""
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {x: 1, y: 2}\n"
                    "over: {<<: *b, x: 3}\n"
                    "many: {<<: [*b, {z: 4}], z: 5}\n")
    assert read_config(path) == {"base": {"x": 1, "y": 2}, "over": {"x": 3, "y": 2},
                                 "many": {"x": 1, "y": 2, "z": 5}}


def test_merged_anchor_with_its_own_override_is_not_a_duplicate(tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text("a: &a {x: 1}\nb: &b {<<: *a, x: 2}\nc: {<<: *b, y: 3}\n")
    loaded = read_config(path)
    assert loaded["b"] == {"x": 2}
    assert loaded["c"]["y"] == 3
    assert loaded == yaml.safe_load(path.read_text())  # exactly what PyYAML itself gives


@pytest.mark.parametrize(("content", "fragment"), [
    (b"a: 1\n  b: [\n", "not valid YAML (mapping values are not allowed here at line 2"),
    (b"a: 1\nb: \xff\n", "not UTF-8 text (byte 8 cannot be decoded); save the config as UTF-8"),
    (b"a: [1, 2\n", "not valid YAML"),
    (b"a: 1\n---\nb: 2\n", "not valid YAML"),
    (b"? [1, 2]\n: x\n", "not valid YAML"),
], ids=["bad_indent", "not_utf8", "unclosed_list", "two_documents", "list_key"])
def test_bad_yaml_is_one_line_naming_the_file(tmp_path: Path, content: bytes,
                                              fragment: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_bytes(content)
    assert fragment in _one_line_error(path)


def test_missing_config_file_is_one_line(tmp_path: Path) -> None:
    assert "cannot read the config file (No such file or directory)" in _one_line_error(
        tmp_path / "nope.yaml")


def test_check_config_files_checks_every_file(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text("a: 1\n")
    bad.write_text(DUPLICATE_SEED)
    check_config_files([str(good)])
    check_config_files([])
    with pytest.raises(ConfigError, match=r"bad\.yaml: duplicate key 'seed' at lines 3 and 9"):
        check_config_files([str(good), str(bad)])


# --------------------------------------------------------------------------------------------
# Non-string keys and the order of schema errors.
# --------------------------------------------------------------------------------------------
BASE: dict[str, Any] = yaml.safe_load(TINY.read_text())


def test_integer_model_key_with_a_second_error_is_a_config_error() -> None:
    """Sorting jsonschema errors once compared 1 with 'stub' and raised TypeError."""
    cfg = copy.deepcopy(BASE)
    cfg["models"][1] = copy.deepcopy(cfg["models"]["stub"])
    cfg["models"][1]["vocab"] = 1
    cfg["models"]["stub"]["vocab"] = 1
    with pytest.raises(ConfigError) as info:
        validate_config(cfg, SCHEMA)
    assert str(info.value) == ("config.models: key 1 is not a string; model names must be "
                               "strings (use a name such as 'm1')")


@pytest.mark.parametrize(("where", "key", "expected"), [
    ("studies", True, "config.studies: key True is not a string; study names must be strings"),
    ("budget", 3, "config.budget: key 3 is not a string; config keys must be strings"),
    ("models.stub.draft", None, "config.models.stub.draft: key None is not a string"),
    ("", 2.5, "config: key 2.5 is not a string; config keys must be strings"),
])
def test_non_string_keys_anywhere_are_named(where: str, key: Any, expected: str) -> None:
    cfg = copy.deepcopy(BASE)
    node = cfg
    for part in filter(None, where.split(".")):
        node = node[part]
    node[key] = {}
    with pytest.raises(ConfigError) as info:
        validate_config(cfg, SCHEMA)
    assert expected in str(info.value)


def test_non_string_key_inside_a_list_is_named() -> None:
    cfg = copy.deepcopy(BASE)
    cfg["latency"] = [{1: 2}]
    with pytest.raises(ConfigError, match=r"^config\.latency\[0\]: key 1 is not a string"):
        validate_config(cfg, SCHEMA)


def test_error_paths_sort_with_mixed_parts() -> None:
    paths = [["models", "stub", "vocab"], ["models", 1], ["latency", 3], ["latency", 10],
             ["models", True], ["models", None]]
    ordered = sorted(paths, key=_path_order)
    assert ordered[:2] == [["latency", 3], ["latency", 10]]  # indices numerically
    assert ordered[-1] == ["models", "stub", "vocab"]  # names after indices
