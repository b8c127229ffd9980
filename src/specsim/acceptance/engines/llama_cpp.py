"""llama.cpp (``llama-server``): the ``--spec-*`` flags, one draft length for every batch.

Followed from ggml-org/llama.cpp (files read at the commits named):

- ``common/arg.cpp`` at 0017d6fb63f9590e791a7562b276148f7bd5b7fc: ``--spec-type`` (a
  comma-separated list of type names), ``--spec-draft-model``/``-md``, ``--spec-draft-n-max N``
  ("number of tokens to draft"), ``--spec-draft-n-min N`` ("minimum number of draft tokens"),
  ``--spec-draft-p-min P`` ("minimum speculative decoding probability (greedy)": drafting stops
  below it), ``--spec-ngram-mod-n-min`` / ``--spec-ngram-mod-n-max`` (0..1024, the n-gram draft
  lengths). ``--draft``/``--draft-n``/``--draft-max`` and ``--draft-min``/``--draft-n-min`` are
  removed ("the argument has been removed. use --spec-draft-n-max or --spec-ngram-mod-n-max"):
  never written here. The parser checks no range for ``--spec-draft-n-max`` / ``-n-min``.
- ``common/speculative.cpp`` at 001d906a6d86e2490e394361e7cc6f478b100088: the type names
  ``none``, ``draft-simple``, ``draft-eagle3``, ``draft-mtp``, ``draft-dflash``,
  ``draft-dspark``, ``ngram-simple``, ``ngram-map-k``, ``ngram-map-k4v``, ``ngram-mod``,
  ``ngram-cache`` (``draft-mtp-adaptive`` there too).

llama-server drafts one length for every slot: the one value written is the best K at batch 1,
with the best K for each ``-np`` (parallel slots, the largest batch it forms) listed beside it.
``--spec-draft-p-min 0`` drafts all K tokens as the schedule assumes; with P > 0 drafts are
cut short by confidence, which changes their cost and tail (collect the counters with the P
you serve with).
"""

from __future__ import annotations

from specsim.acceptance.engines.ranges import Ranges, Snippet, from_one

__all__ = ["SPEC_TYPE", "flags", "snippet"]

SOURCES = {"common/arg.cpp": "0017d6fb63f9590e791a7562b276148f7bd5b7fc",
           "common/speculative.cpp": "001d906a6d86e2490e394361e7cc6f478b100088"}
#: specsim / vLLM method -> ``--spec-type``
SPEC_TYPE = {"draft_model": "draft-simple", "eagle3": "draft-eagle3", "mtp": "draft-mtp",
             "dflash": "draft-dflash", "dspark": "draft-dspark", "ngram": "ngram-mod"}


def flags(k: int, method: str = "draft_model") -> str:
    """``llama-server`` flags drafting ``k`` >= 1 tokens."""
    kind = SPEC_TYPE.get(method, "<spec-type>")
    if kind.startswith("ngram"):
        return f"--spec-type {kind} --spec-ngram-mod-n-min 0 --spec-ngram-mod-n-max {k}"
    model = " -md <draft.gguf>" if kind in ("draft-simple", "draft-eagle3") else ""
    return (f"--spec-type {kind}{model} --spec-draft-n-max {k} --spec-draft-n-min 0 "
            "--spec-draft-p-min 0")


def snippet(ranges: Ranges, method: str = "draft_model") -> Snippet:
    """The ``llama-server`` command, and the best value for each ``-np``."""
    full, assumed = from_one(ranges)
    src = ", ".join(f"{p} at {c[:12]}" for p, c in SOURCES.items())
    notes = [f"Follows ggml-org/llama.cpp master ({src}); --draft-max/--draft-min are removed "
             "there and not written."]
    k1 = full[0][2]
    code = ("# speculation does not pay at batch 1: no --spec-* flags" if k1 == 0 else
            "llama-server -m <target.gguf> -np 1 " + flags(k1, method))
    n_max = ("--spec-ngram-mod-n-max" if SPEC_TYPE.get(method, "").startswith("ngram")
             else "--spec-draft-n-max")
    per = [f"-np {lo}{'' if lo == hi else f'-{hi}'}: "
           + (f"{n_max} {k}" if k else "no speculation") for lo, hi, k in full]
    notes.append("One draft length for every slot; with -np N parallel slots use the best K "
                 "of batch N: " + "; ".join(per) + ".")
    if method not in SPEC_TYPE:
        notes.append(f"No llama.cpp --spec-type is known here for method {method!r}: write "
                     "yours.")
    if assumed:
        notes.append(assumed[0].upper() + assumed[1:] + ".")
    return Snippet("llama.cpp", "sh", code, tuple(notes))
