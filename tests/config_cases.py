"""Configs for the config tests, unit and workflow alike: the tiny config with one key changed
(:func:`mutate`, :func:`rename`), the bad configs :data:`BAD` with what each message names, and
the hostile config files :data:`HOSTILE`."""

from __future__ import annotations

import copy
import math
from typing import Any

import yaml
from conftest import TINY

from specsim.configfile import MAX_CONFIG_BYTES, MAX_NODES

BASE: dict[str, Any] = yaml.safe_load(TINY.read_text())


def mutate(path: str, value: Any, delete: bool = False) -> dict[str, Any]:
    """A copy of the tiny config with one key (dotted path, [i] for list items) changed."""
    cfg = copy.deepcopy(BASE)
    *parents, last = path.split(".")
    node: Any = cfg
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if delete:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return cfg


def rename(section: str, old: str, new: str) -> dict[str, Any]:
    cfg = copy.deepcopy(BASE)
    cfg[section][new] = cfg[section].pop(old)
    return cfg


# (id, config, fragments the message must contain)
BAD: list[tuple[str, Any, list[str]]] = [
    ("list_yaml", [1, 2, 3], ["mapping", "list"]),
    ("scalar_yaml", "just a string", ["mapping", "str"]),
    ("none_yaml", None, ["mapping", "NoneType"]),
    ("missing_models", mutate("models", None, delete=True), ["models", "required"]),
    ("missing_gamma", mutate("studies.accept_curve.gamma", None, delete=True),
     ["studies.accept_curve", "gamma", "required"]),
    ("unknown_top_key", {**BASE, "seeds": 3}, ["seeds", "unexpected"]),
    ("unknown_model_key", mutate("models.seed_good.colour", "red"),
     ["models.seed_good", "colour"]),
    ("unknown_study_key", mutate("studies.equivalence.rules", ["correct"]),
     ["studies.equivalence", "rules"]),
    ("unknown_rule", mutate("studies.equivalence.rule", ["correct", "nucleus"]),
     ["studies.equivalence.rule[1]", "nucleus"]),
    ("scheme_rule_outside_schemes", mutate("studies.equivalence.rule", ["correct", "typical"]),
     ["studies.equivalence.rule", "'typical'", "analysis: schemes"]),
    ("unknown_model_in_study", mutate("studies.accept_curve.models", ["calibrated", "gpt"]),
     ["studies.accept_curve.models", "gpt", "not defined"]),
    ("alpha_above_one", mutate("studies.accept_curve.alpha", [0.5, 1.5]),
     ["studies.accept_curve.alpha[1]", "1.5"]),
    ("alpha_negative", mutate("studies.accept_curve.alpha", [-0.1]),
     ["studies.accept_curve.alpha[0]", "-0.1"]),
    ("alpha_unreachable", mutate("models.calibrated.draft.other", {"seed": 1, "sharpness": 2.5}),
     ["studies", "alpha", "reachable alpha"]),
    ("gamma_zero", mutate("studies.accept_curve.gamma", [0, 4]),
     ["studies.accept_curve.gamma[0]", "0"]),
    ("gamma_string", mutate("studies.accept_curve.gamma", ["four"]),
     ["studies.accept_curve.gamma[0]", "'four'", "integer"]),
    ("gamma_float", mutate("studies.accept_curve.gamma", [2.5]),
     ["studies.accept_curve.gamma[0]", "2.5"]),
    ("temperature_negative", mutate("studies.temperature.temperature", [-1.0]),
     ["studies.temperature.temperature[0]", "-1.0"]),
    ("c_negative", mutate("studies.break_even.c", [0.1, -0.5]),
     ["studies.break_even.c[1]", "-0.5"]),
    ("nan_value", mutate("studies.break_even.c", [math.nan]), ["studies.break_even.c[0]", "nan"]),
    ("inf_value", mutate("budget.chains", math.inf), ["budget.chains", "inf"]),
    ("string_number", mutate("budget.rounds", "many"), ["budget.rounds", "'many'"]),
    ("bool_for_integer", mutate("budget.rounds", True), ["budget.rounds", "True"]),
    ("negative_chains", mutate("budget.chains", -5), ["budget.chains", "-5"]),
    ("zero_trials", mutate("budget.equivalence_trials", 0), ["budget.equivalence_trials", "0"]),
    ("batches_over_chains", mutate("budget.batches", 1024), ["budget.batches", "1024", "chains"]),
    ("shell_model_name", rename("models", "seed_good", "$(touch x)"), ["$(touch x)", "match"]),
    ("shell_study_name", rename("studies", "break_even", "x; rm -rf /"), ["x; rm -rf /", "match"]),
    ("uppercase_name", rename("models", "stub", "Stub"), ["Stub", "match"]),
    ("duplicate_grid_values", mutate("studies.accept_curve.gamma", [1, 4, 4]),
     ["studies.accept_curve.gamma", "non-unique"]),
    ("grid_too_large", {**BASE, "max_points": 3}, ["max_points", "raise"]),
    ("vocab_too_large_for_equivalence", mutate("models.stub.vocab", 2000),
     ["equivalence", "vocab"]),
    ("iid_with_target", mutate("models.stub.target", {"seed": 1}), ["models.stub.target"]),
    ("markov_with_noise", mutate("models.seed_good.noise", 0.3), ["models.seed_good.noise"]),
    ("blend_without_weight", mutate("models.seed_good.draft", {"kind": "blend"}),
     ["models.seed_good.draft.weight"]),
    ("knob_on_calibrated", mutate("studies.optimal_k.draft", [0.5]),
     ["studies.optimal_k.draft", "calibrated"]),
    ("noise_draft_on_markov", mutate("models.seed_good.draft", {"kind": "noise"}),
     ["models.seed_good.draft.kind", "noise"]),
    ("unknown_family", mutate("models.stub.family", "transformer"),
     ["models.stub.family", "transformer"]),
    ("bad_table_base", mutate("models.calibrated.draft.other", "nearby"),
     ["models.calibrated.draft.other", "nearby"]),
    ("negative_latency", mutate("latency", [[0.01, -0.001]]), ["latency[0][1]", "-0.001"]),
    ("empty_rule_list", mutate("studies.equivalence.rule", []),
     ["studies.equivalence.rule", "[]"]),
]


def billion_laughs(mapping: bool) -> str:
    """The "billion laughs" block: ten levels of nine aliases each, ~9^10 values expanded."""
    if mapping:
        lines = ["a: &a {" + ", ".join(f"x{j}: lol" for j in range(9)) + "}"]
        lines += [f"{c}: &{c} {{" + ", ".join(f"k{j}: *{p}" for j in range(9)) + "}"
                  for p, c in zip("abcdefghi", "bcdefghij", strict=True)]
    else:
        lines = ["a: &a [" + ", ".join(["lol"] * 9) + "]"]
        lines += [f"{c}: &{c} [" + ", ".join([f"*{p}"] * 9) + "]"
                  for p, c in zip("abcdefghi", "bcdefghij", strict=True)]
    return "\n".join(lines) + "\n"


# (id, file content, fragment of the one-line message after "<file>: ")
HOSTILE: list[tuple[str, bytes, str]] = [
    ("empty", b"", "the config is empty"),
    ("only_comments", b"# nothing\n\n", "the config is empty"),
    ("empty_mapping", b"{}\n", "the config is empty"),
    ("two_documents", b"models: {}\n---\nstudies: {}\n", "a second YAML document starts at line 2"),
    ("tag", b"seed: !foo 3\n", "tag '!foo' at line 1"),
    ("python_tag", b"seed: !!python/tuple [1, 2]\n", "no YAML tags"),
    ("complex_list_key", b"? [1, 2]\n: x\n", "a list used as a key at line 1"),
    ("complex_map_key", b"{? {a: 1} : x}\n", "a mapping used as a key at line 1"),
    ("duplicate_key", b"seed: 1\nseed: 2\n", "duplicate key 'seed' at lines 1 and 2"),
    ("top_level_list", b"- models\n- studies\n", "the top level is a list"),
    ("top_level_scalar", b"models\n", "the top level is a str"),
    ("not_utf8", b"seed: 1\nmodels: \xff\n", "not UTF-8 text (byte 16, line 2"),
    ("tab_indent", b"models:\n\tm: 1\n", "a tab at line 2"),
    ("control_char", b"seed: 1\nx: \x07\n", "at line 2 is not allowed in YAML"),
    ("undefined_alias", b"seed: *nope\n", "found undefined alias"),
    ("self_alias_list", b"a: &a [*a]\n", "alias *a at line 1 is inside the node &a"),
    ("self_alias_map", b"a: &a {b: *a}\n", "alias *a at line 1 is inside the node &a"),
    ("laughs_list", billion_laughs(False).encode(),
     f"more than {MAX_NODES} values (aliases expanded)"),
    ("laughs_map", billion_laughs(True).encode(),
     f"more than {MAX_NODES} values (aliases expanded)"),
    ("deep_yaml", b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n", "nested more than"),
    ("deep_json", b"{\"a\": " + b"[" * 100000 + b"]" * 100000 + b"}", "nested more than"),
    ("deep_alias", b"a: &a [[[[[[[[[[1]]]]]]]]]]\nb: &b [[[[[[[[[[*a]]]]]]]]]]\n"
                   b"c: &c [[[[[[[[[[*b]]]]]]]]]]\nd: [[[[[[[[[[*c]]]]]]]]]]\n",
     "nested more than"),
    ("too_large", b"# " + b"x" * MAX_CONFIG_BYTES + b"\n", f"more than the {MAX_CONFIG_BYTES}"),
    ("long_list", ("models: [" + ", ".join(["1"] * 5000) + "]\n").encode(), "5000 items"),
    ("huge_int_yaml", b"max_work: 1" + b"0" * 400 + b"\n", "config.max_work: an integer of"),
    ("huge_int_json", b"{\"max_work\": 1" + b"0" * 400 + b"}", "config.max_work: an integer of"),
    ("int_over_str_limit", b"seed: 1" + b"0" * 5000 + b"\n", "Exceeds the limit"),
    ("nan_json", b"{\"max_work\": NaN}", "config.max_work: nan is not a finite number"),
    ("inf_yaml", b"max_work: .inf\n", "config.max_work: inf is not a finite number"),
    ("duplicate_json", b"{\"seed\": 1,\n\t\"seed\": 2}", "duplicate key 'seed' in one JSON object"),
    ("yte", b"__use_yte__: true\nseed: 1\n", "__use_yte__"),
    ("non_string_key", b"models: {1: x}\n", "config.models: key 1 is not a string"),
]


def big_table(policy: str, knobs: dict[str, Any], vocab: int = 1024) -> dict[str, Any]:
    return {"seed": 8, "budget": {"chains": 512, "rounds": 16, "burn_in": 4, "batches": 16,
                                  "scheme_trials": 40000},
            "models": {"big": {"family": "markov", "vocab": vocab,
                               "target": {"seed": 1, "sharpness": 2.5},
                               "draft": {"kind": "blend", "weight": 0.85,
                                         "other": {"seed": 2, "sharpness": 2.5}}}},
            "studies": {"policies": {"analysis": "schemes", "models": ["big"], "gamma": [3],
                                     "rule": ["correct"], "policy": [policy], "knobs": knobs,
                                     "c": [0.05]}}}

