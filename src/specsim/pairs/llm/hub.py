"""A user's own pair of Hugging Face causal LMs, as ``specsim record hf`` loads it: by Hub name
or local directory, both on one device in one dtype, sharing one tokenizer; and the prompts it
continues (lines of a text file, or held-out windows of the tier-1 corpus in the target's
tokens). torch and transformers are imported only inside the functions that load a model.
"""

from __future__ import annotations

import os
import urllib.error
import urllib.request
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit


def hub_cache() -> Path:
    """Hugging Face's local model cache, where its client looks (huggingface_hub's
    ``constants.py``: ``HF_HUB_CACHE``/``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else
    ``$XDG_CACHE_HOME/huggingface/hub``; huggingface/huggingface_hub at
    264537b5bf41f60f5280f579e1db5d8e51bba2cc)."""
    env = os.environ.get("HF_HUB_CACHE") or os.environ.get("HUGGINGFACE_HUB_CACHE")
    if env:
        return Path(env).expanduser()
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    return Path(home).expanduser() / "hub"


def unreachable(flag: str, name: str, timeout: float = 3.0) -> str | None:
    """Why the model ``name`` (of ``flag``) cannot be loaded -- not a local directory, not in
    the local cache (a ``models--<org>--<name>`` folder, huggingface_hub's ``repo_folder_name``)
    and no network to the Hub (``HF_HUB_OFFLINE`` set, or its host not reachable within
    ``timeout`` s) -- or None. Said in one line before the hub client would retry, printing
    a line per retry."""
    if Path(name).is_dir():
        return None
    cache = hub_cache()
    if (cache / ("models--" + name.replace("/", "--"))).is_dir():
        return None
    endpoint = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = endpoint.hostname or "huggingface.co", endpoint.port or (
        80 if endpoint.scheme == "http" else 443)
    if os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        why = "HF_HUB_OFFLINE is set"
    else:
        url = f"{endpoint.scheme or 'https'}://{host}:{port}/"
        try:  # any HTTP answer, an error status included, means the Hub can be reached
            urllib.request.urlopen(urllib.request.Request(url, method="HEAD"),
                                   timeout=timeout).close()
            return None
        except urllib.error.HTTPError:
            return None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            why = f"{host}:{port} unreachable: {getattr(reason, 'strerror', None) or reason}"
    return (f"{flag} {name}: model {name!r} is not in the local cache ({cache}) and there is "
            f"no network ({why}); download it where there is, or give a local directory")


def load_pair(target: str, draft: str, threads: int | None, device: str, dtype: str
              ) -> tuple[Any, Any, Any]:
    """Both models on ``device`` in ``dtype``, eval mode; the target's tokenizer, checked to be
    the draft's (when the draft has one)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from specsim.pairs.llm.loading import place

    if threads:
        torch.set_num_threads(threads)
    hf_logging.set_verbosity_error()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tok = AutoTokenizer.from_pretrained(target)
        try:
            tok_d = AutoTokenizer.from_pretrained(draft)
        except (OSError, ValueError):
            tok_d = None
        if tok_d is not None and tok_d.get_vocab() != tok.get_vocab():
            raise ValueError(f"--draft {draft}: its tokenizer is not the target's (a trace "
                             f"compares both distributions over one vocabulary)")
        models = [place(AutoModelForCausalLM.from_pretrained(m, dtype=getattr(torch, dtype)),
                        device, dtype) for m in (target, draft)]
    return models[0], models[1], tok


def prompts(tok: Any, path: str | None, n: int, prompt_tokens: int) -> list[list[int]]:
    """``n`` prompts in ``tok``'s ids: the first ``n`` non-empty lines of the text file ``path``
    (ValueError naming --prompts when there are fewer, or a line has no tokens), else ``n``
    held-out windows of ``prompt_tokens`` tokens of the tier-1 corpus."""
    if path:
        lines = [ln.strip() for ln in Path(path).read_text().splitlines()]
        lines = [ln for ln in lines if ln]
        if len(lines) < n:
            raise ValueError(f"--prompts {path}: {len(lines)} non-empty lines, "
                             f"--documents {n} asks for {n}")
        out = [tok(ln, add_special_tokens=False)["input_ids"] for ln in lines[:n]]
        empty = [i for i, ids in enumerate(out) if not ids]
        if empty:
            raise ValueError(f"--prompts {path}: line {empty[0] + 1} has no tokens")
        return [list(map(int, ids)) for ids in out]
    from specsim.pairs.llm.lab import heldout_windows, token_corpus

    corpus = token_corpus(tok)
    return [w.tolist() for w in heldout_windows(corpus.heldout, n, prompt_tokens)]
