"""``specsim llm [--settings JSON] STEP ...``: one step of the opt-in LLM tier.

Each step is one Snakemake rule (workflow/rules/llm.smk; ``make llm`` runs them) and reads only
the settings :data:`.settings.STEPS` names. Steps that need the model load it once (from the
converted-model cache, :func:`.loading.cache_dir`) and the token corpus the ``corpus`` step
saved. torch, transformers, pandas and matplotlib are imported only when a step runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from specsim import llm, timing


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``llm`` sub-command of the ``specsim`` command line (:mod:`specsim.cli`)."""
    parser = sub.add_parser("llm", help="opt-in LLM tier: SmolLM2-135M on this CPU (one step)",
                            description=llm.__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", default="{}",
                        help="JSON of the step's settings: the config's llm section plus seed "
                             "(defaults: the schema's)")
    parser.add_argument("--cache-dir", default=None,
                        help="converted-model cache (default: $SPECSIM_LLM_CACHE or "
                             "~/.cache/specsim)")
    parser.add_argument("--significance", type=float, default=1e-3)
    steps = parser.add_subparsers(dest="step", required=True)

    def step(name: str, helptext: str, **files: str) -> None:
        p = steps.add_parser(name, help=helptext)
        for flag, what in files.items():
            p.add_argument(f"--{flag.replace('_', '-')}", required=True, help=what)

    step("corpus", "load (first: convert) the model; the tier-1 corpus in its tokens",
         out="token corpus .npz", meta="corpus and model record .json")
    step("device", "this CPU's peak matmul rate and copy bandwidth; single-matmul timings",
         out="device .json", kernels="kernels table .csv")
    step("alpha", "α and cross-entropy of every draft on held-out text",
         corpus="token corpus .npz", out="alpha table .csv")
    step("costs", "T(k) of KV-cached calls and the draft steps",
         corpus="token corpus .npz", out="costs table .csv")
    step("intensity", "MACs/byte and the roofline's T(k)/T(1) beside the measured",
         device="device .json", costs="costs table .csv", out="intensity table .csv")
    step("speculative", "plain vs speculative generation per (draft, γ)",
         corpus="token corpus .npz", costs="costs table .csv", alpha="alpha table .csv",
         out="speculative table .csv")
    step("assisted", "specsim's loop beside transformers' assisted generation (same pair)",
         corpus="token corpus .npz", costs="costs table .csv", out="assisted table .csv",
         html="assisted table .html (for the report)")
    step("lossless", "exact law vs Monte Carlo of the first two tokens (Alg. 1 simulated, "
         "transformers' assisted generation); KV-cache check",
         corpus="token corpus .npz", out="lossless table .csv")
    step("audit", "transformers' assisted generation with sampling warpers against the exact "
         "law of the first two tokens, with the TV detectable at power 0.9",
         corpus="token corpus .npz", out="lossless audit table .csv")
    step("trace", "a trace of one pair (the target and --pair, a built draft)",
         corpus="token corpus .npz", pair="the draft", out="trace .parquet")
    step("pair", "one pair's runs: target calls and seconds per (engine, γ, prompt)",
         corpus="token corpus .npz", pair="the draft", out="runs .csv")
    step("pairs", "predicted vs measured tokens per call, and the speedup explained",
         traces_dir="directory of <pair>.parquet", runs_dir="directory of <pair>.csv",
         costs="costs table .csv", tables_dir="directory of the two tables",
         figures_dir="directory of the figures")
    step("engine", "the batched loop at every batch size: counters at one K and a latency "
         "profile -> the predicted best K' per batch, beside the measured throughput",
         corpus="token corpus .npz", out="check table .csv", latency="latency profile .csv",
         counts="acceptance counters .json",
         calibration="calibrated cost out of sample .csv (and its _summary.csv)")
    step("figures", "the LLM figures (PDF + PNG) from the tables",
         tables_dir="directory of the tables", out_dir="directory of the figures")
    step("machine", "the run's record: settings, versions, CPU, model, corpus, device",
         corpus_meta="corpus .json", device="device .json", out="machine .json")
    parser.set_defaults(run=run)
    return parser


def run(args: argparse.Namespace) -> int:
    """Run the step ``args.step``; print its stage seconds and load averages to stderr (the
    rule's log; Snakemake's benchmark file has the job's own wall time)."""
    from specsim.io import (
        read_json_verified,
        read_table,
        write_json,
        write_json_verified,
        write_table,
    )
    from specsim.llm.settings import STEPS, Settings, int8_problem

    try:
        s = Settings.from_dict(json.loads(args.settings), step=args.step)
    except ValueError as err:
        return _refuse(args.step, f"--settings: {err}")
    if "device" in STEPS[args.step]:  # before any model loads
        from specsim.llm.loading import placement_problem

        problem = placement_problem(s.device, s.dtype, "llm.device", "llm.dtype")
        if problem or getattr(args, "pair", None) == "int8":
            problem = problem or int8_problem(s.device, s.dtype)
        if problem:
            return _refuse(args.step, problem)
    record: dict[str, Any] = {"loadavg_1min_before": os.getloadavg()[0]}
    t0 = timing.clock()
    if args.step == "corpus":
        write_json_verified(args.meta, _corpus(s, args.out, args.cache_dir))
    elif args.step == "device":
        write_json_verified(args.out, _device(s, args.kernels))
    elif args.step == "intensity":
        from specsim.llm.roofline import device_from_record, intensity_table

        device = device_from_record(read_json_verified(args.device))
        write_table(intensity_table(device, read_table(args.costs), s.cost_context_tokens),
                    args.out)
    elif args.step == "figures":
        from specsim.llm.figures import make_figures

        make_figures(args.tables_dir, args.out_dir)
    elif args.step == "machine":
        write_json(args.out, _machine(s, args.corpus_meta, args.device))
    elif args.step == "pairs":
        _pairs(s, args)
    elif args.step == "trace":
        from specsim.llm.lab import Lab, load_token_corpus
        from specsim.llm.pairs import record_tier_pair

        record_tier_pair(Lab(s, load_token_corpus(args.corpus), args.cache_dir), args.pair,
                         args.out)
    else:
        table = _with_lab(s, args)
        table = write_table(table, args.out)
        if args.step == "assisted":
            from specsim.report import write_html

            write_html(table, "llm_assisted", args.html)
    record[args.step] = round(timing.clock() - t0, 3)
    record["loadavg_1min_after"] = os.getloadavg()[0]
    print(json.dumps(record), file=sys.stderr)
    return 0


def _refuse(step: str, problem: str) -> int:
    print(f"specsim llm {step}: error: {problem}", file=sys.stderr)
    return 2


def _corpus(s: Any, out: str, cache: str | None) -> dict[str, Any]:
    """Load the target (converting the GGUF file the first time: the later steps find it in the
    cache), tokenise the tier-1 corpus and save it; the record of both."""
    from specsim.llm.lab import save_token_corpus, token_corpus
    from specsim.llm.loading import GGUF_FILE, gguf_path, load_target

    t0 = timing.clock()
    model, tok = load_target(cache, s.threads)
    loaded = timing.clock()
    corpus = token_corpus(tok, s.holdout_every)
    save_token_corpus(corpus, out)
    return {"gguf_file": GGUF_FILE, "gguf_bytes": gguf_path().stat().st_size,
            "params": int(sum(p.numel() for p in model.parameters())),
            "corpus_sha256": corpus.sha256, "corpus_chars": corpus.chars,
            "holdout_every": s.holdout_every, "train_tokens": int(corpus.train.size),
            "heldout_tokens": int(corpus.heldout.size),
            "load_seconds": round(loaded - t0, 3),
            "tokenise_seconds": round(timing.clock() - loaded, 3)}


def _device(s: Any, kernels: str) -> dict[str, Any]:
    import torch

    from specsim.io import write_table
    from specsim.llm.roofline import device_record, kernel_table, measure_device

    torch.set_num_threads(s.threads)
    device, tm = measure_device(s)
    write_table(kernel_table(s), kernels)
    # timings are only as good as the machine was quiet: 1-minute load averages, CPUs
    return {**device_record(device, tm), "torch_threads": torch.get_num_threads(),
            "torch_interop_threads": torch.get_num_interop_threads(),
            "loadavg_1min_before": tm.load.before, "loadavg_1min_after": tm.load.after}


def _with_lab(s: Any, args: argparse.Namespace) -> Any:
    """The steps that need the model, its tokenizer, the token corpus and the drafts."""
    from specsim.io import read_table
    from specsim.llm import experiments
    from specsim.llm.lab import Lab, load_token_corpus
    from specsim.llm.lossless import lossless_table

    lab = Lab(s, load_token_corpus(args.corpus), args.cache_dir)
    if args.step == "alpha":
        table = experiments.alpha_table(lab)
    elif args.step == "costs":
        table = experiments.verify_cost_table(lab)
    elif args.step == "assisted":
        from specsim.llm.assisted import assisted_table

        table = assisted_table(lab, read_table(args.costs))
    elif args.step == "pair":
        from specsim.llm.pairs import measure_runs

        table = measure_runs(lab, args.pair)
    elif args.step == "speculative":
        table = experiments.speculative_table(lab, read_table(args.costs),
                                              read_table(args.alpha))
    elif args.step == "engine":
        from specsim.llm.engine_check import engine_check

        table = engine_check(lab, args.latency, args.counts, args.calibration)
    elif args.step == "audit":
        from specsim.llm.audit import audit_table

        table = audit_table(lab, significance=args.significance)
    else:
        table = lossless_table(lab, significance=args.significance)
    print(json.dumps({"load_model_seconds": round(lab.load_seconds, 3),
                      "draft_build_seconds": lab.build_seconds}), file=sys.stderr)
    return table


def _pairs(s: Any, args: argparse.Namespace) -> None:
    """The two pair tables from the traces, the runs and the costs; their figures."""
    import pandas as pd

    from specsim.io import read_table, write_table
    from specsim.llm.figures import make_pair_figures
    from specsim.llm.pairs import pair_tables
    from specsim.llm.settings import PAIR_TABLES
    from specsim.traces.format import read_trace

    traces = {p: read_trace(Path(args.traces_dir) / f"{p}.parquet") for p in s.trace_pairs}
    runs = pd.concat([read_table(Path(args.runs_dir) / f"{p}.csv") for p in s.trace_pairs])
    tables = pair_tables(s.trace_pairs, traces, runs, read_table(args.costs), s.seed)
    for name, table in zip(PAIR_TABLES, tables, strict=True):
        write_table(table, Path(args.tables_dir) / f"{name}.csv")
    make_pair_figures(args.tables_dir, args.figures_dir)


def _machine(s: Any, corpus_meta: str, device_json: str) -> dict[str, Any]:
    """The run's record: every setting, package versions, the CPU, the model and corpus (from
    the corpus step) and this CPU's measured rates (from the device step)."""
    import importlib.metadata
    import platform

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    from specsim.io import read_json_verified

    corpus, device = read_json_verified(corpus_meta), read_json_verified(device_json)
    return {
        "settings": s.to_dict(), "torch": version("torch"),
        "transformers": version("transformers"), "python": platform.python_version(),
        "cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
        **{k: corpus[k] for k in ("gguf_file", "gguf_bytes", "params", "corpus_sha256",
                                  "corpus_chars", "train_tokens", "heldout_tokens")},
        "peak_matmul_flops": device["peak_flops"],
        "copy_bandwidth_bytes_per_s": device["mem_bw"],
        **{k: device[k] for k in ("ridge_macs_per_byte", "torch_threads",
                                  "torch_interop_threads", "loadavg_1min_before",
                                  "loadavg_1min_after")},
    }
