"""The LLM tier's steps: one registry entry each (one ``specsim llm STEP`` and its Snakemake
rule, built by :mod:`specsim.stage_rules`; ``make llm`` runs them), and the functions they run.

Each function takes the step's settings (:class:`specsim.pairs.llm.settings.Settings`, from the keys
:data:`specsim.pairs.llm.settings.STEPS` names) and the parsed arguments, and returns the declared
tables it computed (:mod:`specsim.outputs.llm`); the command (:mod:`specsim.stage_cli`) writes
them and draws the step's figures. Steps that need the model load it once (from the
converted-model cache, :func:`.loading.cache_dir`) and the token corpus the ``corpus`` step
saved. torch, transformers, pandas and matplotlib are imported only when a step runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from specsim import timing
from specsim.declare import Arg, Rule, Stage, Step
from specsim.pairs import llm

Tables = dict[str, Any]  # declared table name -> DataFrame

_CORPUS = Arg("corpus", "token corpus .npz (the corpus step)", files="results/llm/corpus.npz")
_COSTS = Arg("costs", "costs table .csv (the costs step)", files="=llm_costs")
_DEVICE = Arg("device", "device .json", files="results/llm/device.json")
# How the DAG runs a step: every step times something or loads the 135M model; the timed ones
# ask for every core so that nothing runs beside them, the others for the torch threads they use.
_TORCH = Rule(threads="settings", mem_mb=4000, runtime=20)
_TIMED = Rule(threads="all", mem_mb=4000, runtime=30)
_PER_PAIR = {"pair": "@pairs"}  # one job per pair: adding a pair runs only its jobs
_PAIR = ((("--pair",), {"required": True, "help": "the draft (a built draft's name)"}),)


def preflight(s: Any, args: argparse.Namespace) -> str | None:
    """Before a step that loads a model: a device or dtype this machine cannot run, or the
    int8 draft asked for off cpu/float32 (one line naming the key)."""
    from specsim.pairs.llm.loading import placement_problem
    from specsim.pairs.llm.settings import STEPS, int8_problem

    if "device" not in STEPS[args.step]:
        return None
    problem = placement_problem(s.device, s.dtype, "llm.device", "llm.dtype")
    if problem is None and getattr(args, "pair", None) == "int8":
        problem = int8_problem(s.device, s.dtype)
    return problem


def corpus(s: Any, args: argparse.Namespace) -> Tables:
    """Load the target (converting the GGUF file the first time: the later steps find it in the
    cache), tokenise the tier-1 corpus and save it; the record of both."""
    from specsim.io import write_json_verified
    from specsim.pairs.llm.lab import save_token_corpus, token_corpus
    from specsim.pairs.llm.loading import GGUF_FILE, gguf_path, load_target

    t0 = timing.clock()
    model, tok = load_target(args.cache_dir, s.threads)
    loaded = timing.clock()
    built = token_corpus(tok, s.holdout_every)
    save_token_corpus(built, args.out)
    write_json_verified(args.meta, {
        "gguf_file": GGUF_FILE, "gguf_bytes": gguf_path().stat().st_size,
        "params": int(sum(p.numel() for p in model.parameters())),
        "corpus_sha256": built.sha256, "corpus_chars": built.chars,
        "holdout_every": s.holdout_every, "train_tokens": int(built.train.size),
        "heldout_tokens": int(built.heldout.size), "load_seconds": round(loaded - t0, 3),
        "tokenise_seconds": round(timing.clock() - loaded, 3)})
    return {}


def device(s: Any, args: argparse.Namespace) -> Tables:
    """This CPU's peak matmul rate and copy bandwidth (the record), and single-matmul timings."""
    import torch

    from specsim.io import write_json_verified
    from specsim.pairs.llm.roofline import device_record, kernel_table, measure_device

    torch.set_num_threads(s.threads)
    measured, tm = measure_device(s)
    kernels = kernel_table(s)
    # timings are only as good as the machine was quiet: 1-minute load averages, CPUs
    write_json_verified(args.out, {
        **device_record(measured, tm), "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "loadavg_1min_before": tm.load.before, "loadavg_1min_after": tm.load.after})
    return {"llm_kernels": kernels}


def intensity(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.io import read_json_verified, read_table
    from specsim.pairs.llm.roofline import device_from_record, intensity_table

    measured = device_from_record(read_json_verified(args.device))
    return {"llm_intensity": intensity_table(measured, read_table(args.costs),
                                             s.cost_context_tokens)}


def _lab(s: Any, args: argparse.Namespace) -> Any:
    """The model, its tokenizer, the token corpus and the drafts (the steps that need them)."""
    from specsim.pairs.llm.lab import Lab, load_token_corpus

    lab = Lab(s, load_token_corpus(args.corpus), args.cache_dir)
    print(json.dumps({"load_model_seconds": round(lab.load_seconds, 3),
                      "draft_build_seconds": lab.build_seconds}), file=sys.stderr)
    return lab


def alpha(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.pairs.llm import experiments

    return {"llm_alpha": experiments.alpha_table(_lab(s, args))}


def costs(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.pairs.llm import experiments

    return {"llm_costs": experiments.verify_cost_table(_lab(s, args))}


def speculative(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.io import read_table
    from specsim.pairs.llm import experiments

    return {"llm_speculative": experiments.speculative_table(
        _lab(s, args), read_table(args.costs), read_table(args.alpha))}


def assisted(s: Any, args: argparse.Namespace) -> Tables:
    """The table, and its HTML rendering for the report (``--html``)."""
    from specsim.io import read_table
    from specsim.pairs.llm.assisted import assisted_table
    from specsim.precision import printable
    from specsim.report import write_html

    table = assisted_table(_lab(s, args), read_table(args.costs))
    write_html(printable(table), "llm_assisted", args.html)
    return {"llm_assisted": table}


def lossless(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.pairs.llm.lossless import lossless_table

    return {"llm_lossless": lossless_table(_lab(s, args), significance=args.significance)}


def audit(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.pairs.llm.audit import audit_table

    return {"llm_lossless_audit": audit_table(_lab(s, args), significance=args.significance)}


def trace(s: Any, args: argparse.Namespace) -> Tables:
    from specsim.pairs.llm.pairs import record_tier_pair

    record_tier_pair(_lab(s, args), args.pair, args.out)
    return {}


def pair(s: Any, args: argparse.Namespace) -> Tables:
    """One pair's runs (``--out``, one row per run: an input of the pairs step, not a result)."""
    from specsim.io import write_table
    from specsim.pairs.llm.pairs import measure_runs

    write_table(measure_runs(_lab(s, args), args.pair), args.out)
    return {}


def pairs(s: Any, args: argparse.Namespace) -> Tables:
    """The two pair tables from the traces, the runs and the costs (their figures: the step's)."""
    import pandas as pd

    from specsim.io import read_table
    from specsim.pairs.llm.pairs import pair_tables
    from specsim.traces.format import read_trace

    traces = {p: read_trace(Path(args.traces_dir) / f"{p}.parquet") for p in s.trace_pairs}
    runs = pd.concat([read_table(Path(args.runs_dir) / f"{p}.csv") for p in s.trace_pairs])
    accept, speedup = pair_tables(s.trace_pairs, traces, runs, read_table(args.costs), s.seed)
    return {"llm_pair_accept": accept, "llm_speedup_explained": speedup}


def engine(s: Any, args: argparse.Namespace) -> Tables:
    """The batched engine check; it writes its latency profile and calibration itself (the
    profile is read back as a user's would be)."""
    from specsim.outputs import declared_path
    from specsim.pairs.llm.engine_check import engine_check

    paths = {n: str(declared_path(args.results_dir, n))
             for n in ("llm_engine_latency", "llm_engine_calibration")}
    return {"llm_engine_schedule_check": engine_check(
        _lab(s, args), paths["llm_engine_latency"], args.counts,
        paths["llm_engine_calibration"])}


def figures(s: Any, args: argparse.Namespace) -> Tables:
    return {}  # the step's declared figures are drawn from the tables by the command


def machine(s: Any, args: argparse.Namespace) -> Tables:
    """The run's record: every setting, package versions, the CPU, the model and corpus (from
    the corpus step) and this CPU's measured rates (from the device step)."""
    import importlib.metadata
    import platform

    from specsim.io import read_json_verified, write_json

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    corpus_meta = read_json_verified(args.corpus_meta)
    rates = read_json_verified(args.device)
    write_json(args.out, {
        "settings": s.to_dict(), "torch": version("torch"),
        "transformers": version("transformers"), "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
        **{k: corpus_meta[k] for k in ("gguf_file", "gguf_bytes", "params", "corpus_sha256",
                                       "corpus_chars", "train_tokens", "heldout_tokens")},
        "peak_matmul_flops": rates["peak_flops"],
        "copy_bandwidth_bytes_per_s": rates["mem_bw"],
        **{k: rates[k] for k in ("ridge_macs_per_byte", "torch_threads",
                                 "torch_interop_threads", "loadavg_1min_before",
                                 "loadavg_1min_after")},
    })
    return {}


def dag(config: Any) -> tuple[dict[str, str], dict[str, Any]]:
    """The ``llm:`` section checked (drafts among the drafts built), each step's ``--settings``
    (with the root seed) and the files and numbers its rules name (:mod:`specsim.stage_rules`)."""
    from specsim.pairs.llm import settings

    s = settings.Settings.from_dict({**config["llm"], "seed": config["seed"]})
    return settings.step_settings(config["llm"], config["seed"]), {
        "pairs": list(s.trace_pairs), "threads": s.threads,
        "traces": [f"results/llm/traces/{p}.parquet" for p in s.trace_pairs],
        "runs": [f"results/llm/pairs/{p}.csv" for p in s.trace_pairs]}


def _step(name: str, helptext: str, *reads: Arg, writes: tuple[Arg, ...] = (),
          options: Any = (), rule: Rule = _TORCH) -> Step:
    return Step(name, helptext, f"specsim.pairs.llm.steps:{name}", reads=reads, writes=writes,
                options=options, rules=(rule,))


STAGE = Stage(
    "llm", "opt-in LLM tier: SmolLM2-135M on this CPU (one step)", llm.__doc__ or "",
    "specsim.pairs.llm.settings:Settings",
    steps=(
        # loads the model, converting the GGUF file into the cache the first time
        # ($SPECSIM_LLM_CACHE, default ~/.cache/specsim), so no later step converts it
        _step("corpus", "load (first: convert) the model; the tier-1 corpus in its tokens",
              writes=(replace(_CORPUS, flag="out", help="token corpus .npz"),
                      Arg("meta", "corpus and model record .json",
                          files="results/llm/corpus.json")),
              rule=replace(_TORCH, mem_mb=3000, runtime=10)),
        _step("device", "this CPU's peak matmul rate and copy bandwidth; single-matmul timings",
              writes=(replace(_DEVICE, flag="out"),),
              rule=replace(_TIMED, mem_mb=3000, runtime=5)),
        _step("alpha", "α and cross-entropy of every draft on held-out text", _CORPUS),
        _step("costs", "T(k) of KV-cached calls and the draft steps", _CORPUS,
              rule=replace(_TIMED, runtime=20)),
        _step("intensity", "MACs/byte and the roofline's T(k)/T(1) beside the measured",
              _DEVICE, _COSTS, rule=Rule(runtime=5)),
        _step("speculative", "plain vs speculative generation per (draft, γ)", _CORPUS, _COSTS,
              Arg("alpha", "alpha table .csv", files="=llm_alpha"), rule=_TIMED),
        _step("assisted", "specsim's loop beside transformers' assisted generation (same pair)",
              _CORPUS, _COSTS, writes=(Arg("html", "assisted table .html (for the report)",
                                           files="results/llm/assisted.html"),),
              rule=replace(_TIMED, html="llm_assisted")),
        _step("lossless", "exact law vs Monte Carlo of the first two tokens (Alg. 1 simulated, "
              "transformers' assisted generation); KV-cache check", _CORPUS,
              rule=replace(_TORCH, passes=("significance",))),
        _step("audit", "transformers' assisted generation with sampling warpers against the "
              "exact law of the first two tokens, with the TV detectable at power 0.9", _CORPUS,
              rule=replace(_TORCH, runtime=30, passes=("significance",))),
        _step("trace", "a trace of one pair (the target and --pair, a built draft)", _CORPUS,
              writes=(Arg("out", "trace .parquet", files="results/llm/traces/{pair}.parquet"),),
              options=_PAIR, rule=replace(_TORCH, wildcards=_PER_PAIR,
                                          options="--pair {wildcards.pair:q}")),
        _step("pair", "one pair's runs: target calls and seconds per (engine, γ, prompt)",
              _CORPUS, writes=(Arg("out", "runs .csv", files="results/llm/pairs/{pair}.csv"),),
              options=_PAIR, rule=replace(_TIMED, wildcards=_PER_PAIR,
                                          options="--pair {wildcards.pair:q}",
                                          more={"md": "results/llm/pairs/{pair}.md"})),
        _step("pairs", "predicted vs measured tokens per call, and the speedup explained",
              Arg("traces_dir", "directory of <pair>.parquet", directory=True,
                  files="@traces"),
              Arg("runs_dir", "directory of <pair>.csv", directory=True, files="@runs"), _COSTS,
              rule=Rule(mem_mb=3000)),
        _step("engine", "the batched loop at every batch size: counters at one K and a latency "
              "profile -> the predicted best K' per batch, beside the measured throughput",
              _CORPUS, writes=(Arg("counts", "acceptance counters .json",
                                   files="results/llm/engine_counts.json"),), rule=_TIMED),
        _step("figures", "the LLM figures (PDF + PNG) from the tables", rule=Rule()),
        # the run's record, written last: it waits for every table of the stage
        _step("machine", "the run's record: settings, versions, CPU, model, corpus, device",
              Arg("corpus_meta", "corpus .json", files="results/llm/corpus.json"), _DEVICE,
              writes=(Arg("out", "machine .json", files="results/llm/machine.json"),),
              rule=Rule(after=("@stage_tables",), local=True)),
    ),
    preflight="specsim.pairs.llm.steps:preflight",
    options=((("--cache-dir",), {"default": None,
                                 "help": "converted-model cache (default: $SPECSIM_LLM_CACHE "
                                         "or ~/.cache/specsim)"}),),
    dag="specsim.pairs.llm.steps:dag", category="LLM on this CPU",
)
