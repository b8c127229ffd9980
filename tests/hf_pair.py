"""A pair of Hugging Face model directories for ``specsim record hf`` tests: the tier's converted
SmolLM2-135M (its cache) and a copy of its first layers saved beside it. Needs the llm extra."""

from __future__ import annotations

from pathlib import Path


def saved_pair(where: Path, keep: int) -> tuple[Path, Path]:
    """(target directory, draft directory): the draft keeps the target's first ``keep`` layers
    and is saved, with the tokenizer, in ``where``."""
    from specsim.pairs.llm.loading import cache_dir, load_target, skip_copy

    model, tok = load_target(threads=1)
    skip_copy(model, keep).save_pretrained(where)
    tok.save_pretrained(where)
    return cache_dir(), where
