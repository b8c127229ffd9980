"""The CLI in-process for the tests, unit and integrity alike: a step's exit status and output
(:func:`run`), and the tiny config cut to two points of milliseconds (:func:`mini_config`)."""

from __future__ import annotations

from typing import Any

import pytest

from specsim import cli


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def mini_config(tiny: dict[str, Any]) -> dict[str, Any]:
    """Two points of one accept_curve study, with a budget of milliseconds."""
    cfg = {k: v for k, v in tiny.items() if k != "studies"}
    cfg["models"] = {"calibrated": tiny["models"]["calibrated"]}
    cfg["budget"] = {**tiny["budget"], "chains": 64, "rounds": 8, "batches": 4}
    cfg["studies"] = {"accept_curve": {"analysis": "accept_curve", "models": ["calibrated"],
                                       "alpha": [0.8], "gamma": [1, 2]}}
    cfg["worked_example"] = {"alpha": 0.8}  # its only model is calibrated: name the alpha
    return cfg
