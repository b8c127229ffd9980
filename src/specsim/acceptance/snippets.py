"""The engines' configurations of a schedule of best draft lengths by batch size, as Markdown.

Each engine's mapping lives in :mod:`specsim.acceptance.engines` (one module per engine, the
engine's source files and commits in its docstring); this module only assembles them:
:func:`render` writes ``engine_config.md`` -- the schedule, where speculation stops paying, and
per engine the snippet to paste and the notes on what the engine does with it.
"""

from __future__ import annotations

from specsim.acceptance.engines import llama_cpp, sglang, tensorrt_llm, vllm
from specsim.acceptance.engines.ranges import Ranges, Snippet, check, stops_at

__all__ = ["render", "snippets"]


def snippets(ranges: Ranges, method: str = "draft_model") -> dict[str, Snippet]:
    """Per engine (``vllm``, ``tensorrt_llm``, ``sglang``, ``llama_cpp``): its
    :class:`~specsim.acceptance.engines.ranges.Snippet` of the schedule ``ranges``."""
    ranges = check(ranges)
    return {"vllm": vllm.snippet(ranges, method),
            "tensorrt_llm": tensorrt_llm.snippet(ranges, method),
            "sglang": sglang.snippet(ranges, method),
            "llama_cpp": llama_cpp.snippet(ranges, method)}


def render(ranges: Ranges, method: str = "draft_model") -> str:
    """All snippets as one Markdown document."""
    ranges = check(ranges)
    out = ["# Engine configuration for the best draft length by batch size", "",
           "| batches | best K |", "|---|---|"]
    out += [f"| {lo}-{hi} | {k} |" for lo, hi, k in ranges]
    stop = stops_at(ranges)
    out += ["", (f"Speculation stops paying from batch {stop} on." if stop is not None else
                 f"Speculation pays up to the largest batch in the schedule ({ranges[-1][1]}); "
                 "larger batches are not in it (not measured, or not asked with --batch).")]
    for part in snippets(ranges, method).values():
        out += ["", f"## {part.title}", "", f"```{part.lang}", part.code, "```", ""]
        out += [f"- {note}" for note in part.notes]
    return "\n".join(out) + "\n"
